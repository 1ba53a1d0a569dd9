import RealtimeProtocol

/// A room's decisions on its own values (docs/rooms-protocol.md): who may join, who may send
/// what, and when it is full. The hub asks them under its lock and performs the answer.
extension RealtimeHub.Room {
    /// Whether a connection's join of a room may go on to the store (step 1 of a join): not
    /// while a join of the same room is on its way, not past the connection's room limit, and
    /// not as another user than the connection's membership (a rejoin is the same membership).
    ///
    /// - Parameters:
    ///   - room: the room on this node, `nil` when it has no member or join here yet.
    ///   - socketID: the joining connection.
    ///   - user: the user the join is for (the token's, or the connection's signed-in user).
    ///   - roomsHeld: how many rooms the connection holds or is joining.
    /// - Returns: `nil` to go on, else the room error to answer.
    static func admitJoin(_ room: Self?, socketID: String, user: String?, roomsHeld: Int) -> RoomError? {
        if room?.pending[socketID] != nil { return RoomError(.rateLimited, "a join of this room is on its way: wait for its answer") }
        guard let membership = room?.members[socketID] else {
            guard roomsHeld < RealtimeHub.maxRoomsPerConnection else {
                return RoomError(.tooManyRooms, "at most \(RealtimeHub.maxRoomsPerConnection) rooms per connection")
            }
            return nil
        }
        // Another user would leave the first counted, present and unkickable.
        return membership.user == user ? nil : RoomError(.forbidden, "already joined as another user: leave first")
    }

    /// Whether a join is refused because the room is full (step 3, with the rule the store
    /// settled): the rule's `max`, and a presence room's 1,000 users, counted as this node's
    /// users together with the cluster's as this node sees them (a union: a user of this node
    /// whose registration the bus has not brought back yet still counts). A user already
    /// present (another socket, or on another node) is never refused.
    ///
    /// - Returns: `nil` when the join is admitted, else `full`.
    func refusesJoinAsFull(user: String?, socketID: String) -> RoomError? {
        let capacity = min(rule.maxMembers ?? .max, rule.presence ? RealtimeHub.maxPresenceMembers : .max)
        let present = SubscriptionCheck.clusterUsers(view: clusterView, local: users.keys) ?? users.count
        let member = users[Self.userKey(user, socketID: socketID)] != nil || user.map { clusterView?[$0] != nil } == true
        return !member && present >= capacity ? RoomError(.full, "the room has its \(capacity) members") : nil
    }

    /// Whether a member may send an event into the room: joined, in a room whose rule lets
    /// members send, as a user (not anonymously), under an event name of the app's (not
    /// reserved), with data the room keeps (`RealtimeHub.checkRoomData`).
    ///
    /// - Returns: the sending user.
    /// - Throws: the room error to answer the sender with.
    func sender(socketID: String, event: String, data: String) throws(RoomError) -> String {
        guard let membership = members[socketID] else { throw RoomError(.notJoined, "not joined") }
        guard rule.membersSend else { throw RoomError(.notAllowed, "only the app's server sends into this room") }
        guard let user = membership.user else { throw RoomError(.notAllowed, "anonymous members cannot send") }
        guard RoomSystemEvent.isValidEventName(event) else { throw RoomError(.notAllowed, "reserved or invalid event name") }
        try RealtimeHub.checkRoomData(data, rule: rule)
        return user
    }
}

/// A followed room's cursor against what the bus and the store say (DESIGN.md, "Scale-out"):
/// ids arrive in order from the bus, so a skip, another epoch or a stream that went back is
/// caught up from the store or told to the members as `resync`, never passed over.
extension RealtimeHub.Room {
    /// What to do with a kept event the bus brought.
    enum BusVerdict: Equatable {
        /// Deliver it and move the cursor to it (the next id of the cursor's epoch).
        case deliver
        /// The room is opening here (its first join is on the lane): deliver it to the pending
        /// joins, which keep it for after their replay; the cursor comes with the join.
        case keepForJoins
        /// Already delivered (caught up from the store before the bus brought it): drop it.
        case duplicate
        /// A gap (a skipped id) or another epoch: catch the room up from the store.
        case catchUp
    }

    /// Decides what a kept event of `epoch` with `id` does to the room.
    func busEvent(epoch: String, id: UInt64) -> BusVerdict {
        guard let cursor else { return .keepForJoins }
        // A new epoch, or a message of the epoch this node already left (in flight while a
        // join found the new one): the store says which.
        guard epoch == cursor.epoch else { return .catchUp }
        guard id > cursor.id else { return .duplicate }
        return id == cursor.id + 1 ? .deliver : .catchUp
    }

    /// What a comparison of the cursor with the store's position says.
    enum StoreVerdict: Equatable {
        /// Up to date.
        case current
        /// Behind on the same epoch: read what follows the cursor.
        case behind
        /// The history was lost (another epoch) or went back (a Redis restored from an older
        /// snapshot): the members resync, and the cursor moves to the store's position.
        case resync(String)
    }

    /// Compares the cursor with the store's position of the room.
    static func compare(_ cursor: RoomPosition, with position: RoomPosition) -> StoreVerdict {
        if position.epoch != cursor.epoch { return .resync("the room's history was lost (a new epoch)") }
        if position.id < cursor.id { return .resync("the room's history went back (\(cursor.id) → \(position.id))") }
        return position.id > cursor.id ? .behind : .current
    }
}

/// A room's deliveries on its own values: who gets a kept event, what a join on its way keeps
/// of what the room delivers meanwhile, and how its replay and that merge by id (DESIGN.md's
/// join recipe: follow live first, buffer, read, merge by id, flush).
extension RealtimeHub.Room {
    /// The members a kept event goes to, in join order: not those whose join already brought
    /// them past it (`RoomMembership.after`), nor those waiting to resync.
    func recipients(of id: UInt64) -> [String] {
        order.filter { socketID in members[socketID].map { !$0.stale && $0.after < id } ?? false }
    }

    /// The members whose token ran out without a refresh at `seconds` (since 1970): they are
    /// told `expired` and leave.
    func expiredMembers(at seconds: Int) -> [String] {
        members.filter { $0.value.expiresAt <= seconds }.map(\.key)
    }

    /// The member count to tell the room, once per change of the number (`count` events are
    /// sent at most once a second, by the sweep): `nil` when there is nothing new to tell.
    mutating func countToTell() -> Int? {
        guard countDirty else { return nil }
        countDirty = false
        defer { lastCount = users.count }
        return lastCount == users.count ? nil : users.count
    }
}

extension RealtimeHub.PendingJoin {
    /// Keeps an event the room delivered while the join waits for its read: at most
    /// `limit` bytes (`RealtimeHub.maxPendingJoinBytes`); past it, nothing more is kept and the
    /// member is told to resync right after its `joined` (never a silent gap).
    mutating func keep(_ record: RoomEventRecord, epoch: String, limit: Int) {
        guard !overflowed else { return }
        guard bytes + record.size <= limit else {
            overflowed = true
            delivered = []
            bytes = 0
            return
        }
        delivered.append((epoch, record))
        bytes += record.size
    }

    /// What the join sends after its replay and `joined`: the kept events of the replay's
    /// epoch past its end, in id order. For a room that opened with this join (`cursor` set to
    /// the replay's end), only those that follow it without a gap count, and the cursor moves
    /// with them (the catch-up after the join brings the rest).
    ///
    /// - Parameters:
    ///   - position: where the replay ended.
    ///   - cursor: the room's cursor, moved when `opened`.
    ///   - opened: whether the room opened on this node with this join.
    func waiting(after position: RoomPosition, cursor: inout RoomPosition?, opened: Bool) -> [RoomEventRecord] {
        var waiting: [RoomEventRecord] = []
        for (epoch, record) in delivered where epoch == position.epoch && record.id > position.id {
            if opened {
                guard let current = cursor, record.id == current.id + 1 else { break }
                cursor = RoomPosition(epoch: epoch, id: record.id)
            }
            waiting.append(record)
        }
        return waiting
    }
}
