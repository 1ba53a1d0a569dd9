/// Missed events a resume cannot bring, as the server tells them before the replay that follows
/// (the `gap` room event, docs/rooms-protocol.md "Replay"): exactly which ids are gone, so an
/// app that keeps the room's events itself (from the webhook, whose room events carry the same
/// ids) fetches that range and nothing more. A client reports it on the room as a
/// `not_recovered` error whose `gap` this is.
public struct RoomGap: Hashable, Sendable {
    /// Why: `expired` (past the room's span or count), `epoch_changed` (the history itself was
    /// lost), `too_large` (more than one replay may carry: the oldest are left out).
    public var reason: String
    /// The epoch of what follows (the room's current one).
    public var epoch: String
    /// The missing ids of `epoch`, `nil` when none of that epoch is missing (a new epoch
    /// replayed whole).
    public var missing: ClosedRange<UInt64>?
    /// When the first event that follows was kept, in milliseconds since 1970 (the server's
    /// clock): every missing event of `epoch` was kept before it. `nil` when nothing follows.
    public var before: Int64?
    /// After an epoch change, where the member was in the lost epoch: every event after it
    /// there is gone too (how many, nobody knows any more). `nil` in the same epoch.
    public var previous: RoomPosition?

    /// Creates a gap.
    public init(reason: String, epoch: String, missing: ClosedRange<UInt64>?, before: Int64?, previous: RoomPosition?) {
        self.reason = reason
        self.epoch = epoch
        self.missing = missing
        self.before = before
        self.previous = previous
    }

    /// Reads a `gap` event's data: `{"reason", "epoch", "first"?, "last"?, "before"?,
    /// "previous"?: {"epoch", "id"}}`; `nil` when it is not that shape (ids as whole numbers
    /// below 2^53, `first` ≤ `last`, both or neither).
    public init?(json: JSONValue) {
        guard let reason = json["reason"]?.string, let epoch = json["epoch"]?.string, !epoch.isEmpty else { return nil }
        func id(_ value: JSONValue?) -> UInt64?? {
            guard let value else { return .some(nil) }
            guard let number = value.number, number >= 0, number < 9.0e15, number == number.rounded() else { return nil }
            return .some(UInt64(number))
        }
        guard let first = id(json["first"]), let last = id(json["last"]), (first == nil) == (last == nil) else { return nil }
        if let first, let last {
            guard first >= 1, first <= last else { return nil }
            missing = first...last
        } else {
            missing = nil
        }
        if let value = json["before"] {
            guard let number = value.number, number >= 0, number < 9.0e15, number == number.rounded() else { return nil }
            before = Int64(number)
        } else {
            before = nil
        }
        if let value = json["previous"] {
            guard let previousEpoch = value["epoch"]?.string, let previousID = id(value["id"]), let previousID else { return nil }
            previous = RoomPosition(epoch: previousEpoch, id: previousID)
        } else {
            previous = nil
        }
        self.reason = reason
        self.epoch = epoch
    }

    /// The position the replay that follows starts from: the last missing id of `epoch`; when
    /// none is missing, `position` itself in the same epoch, id 0 in a new one.
    ///
    /// - Parameter position: the member's position before the gap.
    public func resume(from position: RoomPosition) -> RoomPosition {
        RoomPosition(epoch: epoch, id: missing?.upperBound ?? (position.epoch == epoch ? position.id : 0))
    }

    /// The data as sent: keys in the order `init?(json:)` documents.
    public var json: String {
        var output = #"{"reason":"#
        RealtimeMessage.appendJSONString(reason, to: &output)
        output += #","epoch":"#
        RealtimeMessage.appendJSONString(epoch, to: &output)
        if let missing { output += #","first":\#(missing.lowerBound),"last":\#(missing.upperBound)"# }
        if let before { output += #","before":\#(before)"# }
        if let previous {
            output += #","previous":{"epoch":"#
            RealtimeMessage.appendJSONString(previous.epoch, to: &output)
            output += #","id":\#(previous.id)}"#
        }
        return output + "}"
    }

    /// The data as a value (what a client puts in its `not_recovered` error's `gap`).
    public var value: JSONValue {
        var fields: [String: JSONValue] = ["reason": .string(reason), "epoch": .string(epoch)]
        if let missing {
            fields["first"] = .number(Double(missing.lowerBound))
            fields["last"] = .number(Double(missing.upperBound))
        }
        if let before { fields["before"] = .number(Double(before)) }
        if let previous { fields["previous"] = .object(["epoch": .string(previous.epoch), "id": .number(Double(previous.id))]) }
        return .object(fields)
    }
}
