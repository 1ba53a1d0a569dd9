import RealtimeProtocol

/// The app server's side of rooms (used by the HTTP API, tests and embedding apps).
extension RealtimeHub {
    /// Keeps an event in a room and delivers it to every member, in id order. Waits for the
    /// hub's lane (`RoomLane`, where the store is called): never call it from a hub callback.
    ///
    /// - Parameters:
    ///   - appID: the app.
    ///   - room: the room name.
    ///   - event: the event name (not one of `RoomSystemEvent.reserved`).
    ///   - data: the data as JSON text, at most 10 KiB.
    ///   - rule: the room's rule, as the backend declares it; `nil` keeps the one the hub
    ///     learned from the room's tokens (or `Configuration.defaultRoomRule`).
    /// - Returns: the stream's epoch and the kept record (its id and time).
    /// - Throws: `RoomError` with `invalid_room`, `not_allowed` (reserved name),
    ///   `bad_request` (data), `store_full` (the store failed, `Configuration.roomLaneBacklog`
    ///   requests wait for it already, or the request had not started after 5 s: it is then
    ///   never kept, `RoomLane.performStartDeadline`).
    @discardableResult
    public func publishRoom(appID: String, room: String, event: String, data: String, rule: RoomRule? = nil) throws(RoomError) -> (epoch: String, record: RoomEventRecord) {
        guard let app = app(id: appID) else { throw RoomError(.badRequest, "unknown app \(appID)") }
        guard RoomName.isValid(room) else { throw RoomError(.invalidRoom, "invalid room name") }
        guard RoomSystemEvent.isValidEventName(event) else { throw RoomError(.notAllowed, "reserved or invalid event name") }
        if let rule, !rule.isValid { throw RoomError(.badRequest, "rule out of range") }
        let kept = try lane.perform(room: (app.id, room)) { [self] () throws(RoomError) in
            try keepRoomEvent(app: app, room: room, event: event, data: data, from: nil, declared: rule, member: nil)
        }
        guard let kept else {
            metrics.roomLaneRefused.bump()
            throw Self.laneRefusal
        }
        return kept
    }

    /// Removes a user from a room on every connection: each gets `kicked`, then leaves. With a
    /// fan-out the other nodes are told to do the same with theirs.
    ///
    /// - Parameters:
    ///   - appID: the app's id.
    ///   - room: the room's name.
    ///   - userID: the user removed (every connection of theirs in the room).
    ///   - reason: shown to the user in `kicked`'s data, or `nil`.
    /// - Returns: how many connections were removed on this node.
    /// - Throws: `RoomError` with `store_full` when the other nodes could not be told (this
    ///   node's connections are removed all the same): the caller should kick again.
    @discardableResult
    public func kickRoomUser(appID: String, room: String, userID: String, reason: String? = nil) throws(RoomError) -> Int {
        let kicked = kickLocalRoomUser(appID: appID, room: room, userID: userID, reason: reason)
        if let fanout = configurationStorage.fanout {
            do throws(RoomStoreError) { try fanout.kick(app: appID, room: room, user: userID, reason: reason) } catch {
                log("kick of \(userID.prefix(80)) from \(room.prefix(80)) reached this node only: \(error)")
                throw RoomError(.storeFull, "kicked \(kicked) connection(s) on this node; the other nodes could not be told (\(error)): kick again")
            }
        }
        return kicked
    }

    /// Removes a user from a room on this node's connections, those whose join is on its way
    /// too: each gets `kicked`, then leaves.
    ///
    /// - Returns: how many connections were removed.
    func kickLocalRoomUser(appID: String, room: String, userID: String, reason: String?) -> Int {
        withState { roomUserKicked(appID: appID, room: room, userID: userID, reason: reason, in: &$0) }
    }

    /// A user kicked from a room on this node, under the lock: each of its connections in the
    /// room (joined, or joining) is sent `kicked` (with the first 200 characters of `reason`)
    /// and leaves.
    ///
    /// - Returns: how many connections were removed.
    func roomUserKicked(appID: String, room: String, userID: String, reason: String?, in state: inout State) -> Int {
        guard let record = state.rooms[appID]?[room] else { return 0 }
        let sockets = (record.users[userID] ?? []).union(record.pending.filter { $0.value.user == userID }.keys)
        guard !sockets.isEmpty else { return 0 }
        var data = "{"
        if let reason {
            data += #""reason":"#
            RealtimeMessage.appendJSONString(String(reason.prefix(200)), to: &data)
        }
        data += "}"
        for socketID in sockets {
            if let connection = state.connections[socketID] {
                state.send(RoomFrame.system(RoomSystemEvent.kicked, data: data, room: room, namespace: connection.namespace), to: connection)
            }
            leaveRoom(room, socketID: socketID, app: appID, in: &state)
        }
        return sockets.count
    }

    /// The users in a room on this node, sorted, and how many connections it has.
    public func roomMembers(appID: String, room: String) -> (users: [String], connections: Int) {
        withState { state in
            guard let record = state.rooms[appID]?[room] else { return ([], 0) }
            let users = Set(record.members.values.compactMap(\.user))
            return (users.sorted(), record.order.count)
        }
    }

    /// The users of a room as the HTTP API's `users` answers, sorted, and how many connections
    /// the room has on this node. With a fan-out the users are this node's and those the
    /// cluster's presence registry lists for the room (every node's members of a presence
    /// room); a room without presence registers nobody in Redis, so its other nodes' users are
    /// not listed (docs/rooms-protocol.md "HTTP API").
    public func roomUsers(appID: String, room: String) -> (users: [String], connections: Int) {
        let local = roomMembers(appID: appID, room: room)
        guard let cluster = clusterMembers(.room(app: appID, room: room), limit: Self.maxPresenceMembers) else { return local }
        return (Set(local.users).union(cluster.map(\.user)).sorted(), local.connections)
    }

    /// A page of a room's history: the newest `limit` events before `before`, oldest first.
    ///
    /// - Throws: `RoomError` with `no_history` for a room that keeps none,
    ///   `bad_request` for a limit outside 1…100, `store_full` when the store fails.
    public func roomHistory(appID: String, room: String, before: UInt64? = nil, limit: Int = 50) throws(RoomError) -> RoomStorePage {
        guard (1...RoomHistoryRequest.maxLimit).contains(limit) else { throw RoomError(.badRequest, "limit must be 1 to \(RoomHistoryRequest.maxLimit)") }
        guard RoomName.isValid(room) else { throw RoomError(.invalidRoom, "invalid room name") }
        let rule = withState { state in
            state.rooms[appID]?[room]?.rule ?? state.knownRules[appID]?[room]?.rule ?? configurationStorage.defaultRoomRule
        }
        return try historyPage(app: appID, room: room, rule: rule, before: before, limit: limit)
    }
}
