import RealtimeProtocol

/// A `room_event` frame's data: `{event, data, meta?}` (docs/rooms-protocol.md).
struct RoomEventFrame {
    struct Meta {
        var id: UInt64
        var at: Int64
        var from: String?
        var replayed: Bool?
    }

    var event: String
    var data: RoomData
    var meta: Meta?

    /// Reads the fields of a parsed frame (a history page's event).
    init?(_ value: JSONValue) {
        guard case .object(let members) = value else { return nil }
        self.init(members, data: .value(members["data"] ?? .null))
    }

    /// A frame read by `StrictJSON.roomEvent` (its data kept as text).
    init(_ fields: StrictJSON.RoomEventFields) {
        event = fields.event
        data = .text(fields.data)
        meta = fields.meta.map { Meta(id: $0.id, at: $0.at, from: $0.from, replayed: $0.replayed) }
    }

    /// `nil` when `event` is missing or `meta` is malformed (an id that is not a positive whole
    /// number, a time that is not a number, a sender that is not a string or null).
    private init?(_ value: [String: JSONValue], data: RoomData) {
        guard let event = value["event"]?.string else { return nil }
        self.event = event
        self.data = data
        guard let meta = value["meta"], meta != .null else { return }
        guard let id = meta["id"]?.number, id >= 1, id < 9.0e15, id == id.rounded(),
              let at = meta["at"]?.number, abs(at) < 9.0e15 else { return nil }
        let from = meta["from"]
        guard from == nil || from == .null || from?.string != nil else { return nil }
        self.meta = Meta(id: UInt64(id), at: Int64(at), from: from?.string, replayed: meta["replayed"]?.bool)
    }
}

/// A `room_history` frame's data: a page or an error, with the request id.
struct RoomHistoryFrame {
    var request: String
    var events: [RoomEventFrame] = []
    var more = false
    var error: RoomError?

    init?(_ value: JSONValue) {
        guard let request = value["request"]?.string else { return nil }
        self.request = request
        if let failure = value["error"] {
            guard let code = failure["code"]?.string else { return nil }
            error = RoomError(RoomErrorCode(rawValue: code), failure["message"]?.string ?? "")
            return
        }
        guard let list = value["events"]?.array else { return nil }
        var events: [RoomEventFrame] = []
        for item in list {
            guard let event = RoomEventFrame(item) else { return nil }
            events.append(event)
        }
        self.events = events
        more = value["more"]?.bool ?? false
    }
}
