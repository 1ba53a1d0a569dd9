import RealtimeProtocol

/// The channels the app subscribed to, as the connection's state machine keeps them: their
/// order (resubscription order) and, per channel, what the current connection knows of it.
/// Subscriptions belong to the connection (seed, "What happens to channels"): `resetConnection()`
/// forgets everything but the names.
struct ChannelTable: Hashable {
    /// One channel's state on the current connection.
    struct Record: Hashable {
        let kind: RealtimeChannel.Kind
        /// The server confirmed the subscription on this connection.
        var subscribed = false
        /// `<ns>:subscribe` was sent on this connection: only then is a confirmation accepted.
        var requested = false
        /// Presence: the members, replaced at every subscription.
        var members = PresenceMembers()
        /// Presence: this connection's member, from the authorisation.
        var me: PresenceMember?
        /// Encrypted: the channel's shared secret, from the authorisation.
        var sharedSecret: [UInt8]?

        init(kind: RealtimeChannel.Kind) { self.kind = kind }
    }

    private(set) var order: [String] = []
    private var records: [String: Record] = [:]
    /// The kinds alone, for the per-frame lookup (no record copied).
    private var kinds: [String: ChannelKind] = [:]

    /// The kind of a channel in the table.
    func kind(of name: String) -> ChannelKind? { kinds[name] }

    subscript(name: String) -> Record? { records[name] }

    /// Changes a channel's record in place; nothing for a channel not in the table.
    mutating func update(_ name: String, _ change: (inout Record) -> Void) {
        guard records[name] != nil else { return }
        change(&records[name]!)
    }

    func contains(_ name: String) -> Bool { records[name] != nil }

    /// Adds a channel at the end of the order; returns whether it was new.
    mutating func add(_ name: String) -> Bool {
        guard records[name] == nil else { return false }
        let kind = ChannelKind(channelName: name)
        records[name] = Record(kind: kind)
        kinds[name] = kind
        order.append(name)
        return true
    }

    /// Removes a channel; returns whether it was there.
    mutating func remove(_ name: String) -> Bool {
        guard records.removeValue(forKey: name) != nil else { return false }
        kinds[name] = nil
        order.removeAll { $0 == name }
        return true
    }

    /// The connection ended: no channel is subscribed, member lists are empty.
    mutating func resetConnection() {
        for name in order {
            update(name) { record in
                record.subscribed = false
                record.requested = false
                record.members = PresenceMembers()
            }
        }
    }
}
