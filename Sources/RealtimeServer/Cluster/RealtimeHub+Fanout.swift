import RealtimeProtocol

/// The hub's side of a cluster's bus (`RealtimeFanout`; DESIGN.md, "Scale-out"): events the
/// bus brings are delivered to this node's members; a room whose ids skip, a bus that was down
/// and a room the bus has been quiet about are caught up from the history store, so a member is
/// never left silently behind. What the store no longer has is told to the members with the
/// room error `resync`: they rejoin from their position and learn `recovered: false`.
extension RealtimeHub {
    /// How long a followed room may go without an event from the bus before this node compares
    /// its position with the store's (an event lost by the bus is then delivered late, never
    /// missed).
    public static let fanoutCheckInterval = Duration.seconds(2)
    /// Most rooms compared with the store per sweep (one pipelined round trip to Redis).
    static let maxFanoutChecksPerSweep = 1000

    /// A message the bus brought: delivered to this node's members of its room or channel.
    /// Called by the bus, on its thread.
    ///
    /// - Parameter message: a kept room event or a channel event.
    public func fanoutReceived(_ message: FanoutMessage) {
        if case .terminateUser(let app, let user) = message {
            let closed = terminateLocalUser(appID: app, userID: user)
            if closed > 0 { log("terminated \(closed) connection(s) of \(user.prefix(80)) for another node") }
            return
        }
        if case .kickRoomUser(let app, let room, let user, let reason) = message {
            let kicked = kickLocalRoomUser(appID: app, room: room, userID: user, reason: reason)
            if kicked > 0 { log("kicked \(kicked) connection(s) of \(user.prefix(80)) from \(room.prefix(80)) for another node") }
            return
        }
        state.withLock { state in
            switch message {
            case .room(let app, let room, let epoch, let record):
                roomEventArrived(app: app, room: room, epoch: epoch, record: record, in: &state)
            case .channel(let event):
                _ = deliverChannel(event, in: state)
            case .presence(let change):
                deliverPresence(change, in: &state)
            case .terminateUser, .kickRoomUser:
                break
            }
        }
    }

    /// The bus confirmed it follows `topic`: a room's events kept before then are caught up
    /// from the store. Called by the bus, on its thread.
    public func fanoutFollowing(_ topic: FanoutTopic) {
        state.withLock { state in
            switch topic {
            case .room(let app, let room):
                catchUp([(app, room)], in: &state)
                // Presence changes published before the subscription was active: told now.
                refreshPresence(channels: [], rooms: [(app, room)], in: &state)
            case .channel(let app, let channel):
                refreshPresence(channels: [(app, channel)], rooms: [], in: &state)
            case .app:
                break
            }
        }
    }

    /// Brings this node's presence views back to the cluster's, after changes the bus may not
    /// have brought (before a subscription was active, while the bus was down): each view is
    /// read again and every difference told to the node's members as an arrival or departure.
    func refreshPresence(channels: [(app: String, channel: String)], rooms: [(app: String, room: String)], in state: inout State) {
        let topics = channels.map { FanoutTopic.channel(app: $0.app, channel: $0.channel) } + rooms.map { FanoutTopic.room(app: $0.app, room: $0.room) }
        for topic in topics {
            guard let members = clusterMembers(topic, limit: Self.maxClusterPresenceMembers) else { continue }
            applyPresenceList(topic, members: members, in: &state)
        }
    }

    /// The presence topics this node keeps a view of.
    func presenceViews(in state: State) -> [FanoutTopic] {
        let channels = state.channels.flatMap { app, channels in
            channels.filter { $0.value.clusterView != nil }.keys.map { FanoutTopic.channel(app: app, channel: $0) }
        }
        let rooms = state.rooms.flatMap { app, rooms in rooms.filter { $0.value.clusterView != nil }.keys.map { FanoutTopic.room(app: app, room: $0) } }
        return channels + rooms
    }

    /// The bus is connected (again) and follows every topic: every followed room is compared
    /// with the store and caught up. Called by the bus, on its thread.
    public func fanoutReady() {
        // One batch per hold of the lock (one pipelined round trip, plus one replay per room
        // that is behind on the same epoch), so deliveries go on between batches.
        let followed = state.withLock { state in state.rooms.flatMap { app, rooms in rooms.keys.map { (app: app, room: $0) } } }
        for start in stride(from: 0, to: followed.count, by: Self.maxFanoutChecksPerSweep) {
            let batch = Array(followed[start..<min(start + Self.maxFanoutChecksPerSweep, followed.count)])
            state.withLock { state in catchUp(batch, in: &state) }
        }
        // Presence changes published while the bus was down did not come: every view read
        // again outside the lock (one round trip per batch), the differences told under it.
        let views = state.withLock { presenceViews(in: $0) }
        for start in stride(from: 0, to: views.count, by: Self.maxFanoutChecksPerSweep) {
            let batch = Array(views[start..<min(start + Self.maxFanoutChecksPerSweep, views.count)])
            guard let lists = try? configurationStorage.fanout?.presenceMembers(batch, limit: Self.maxClusterPresenceMembers) else { continue }
            state.withLock { state in
                for (topic, list) in zip(batch, lists) {
                    applyPresenceList(topic, members: list.map { ($0.user, $0.info.flatMap(StrictJSON.parse)) }, in: &state)
                }
            }
        }
        fanoutConnected.withLock { $0 = true }
        log("cluster bus ready (\(followed.count) room(s) caught up, \(views.count) presence view(s) read again)")
    }

    /// The bus lost its connection: events published meanwhile are caught up when it is ready
    /// again. Called by the bus, on its thread.
    ///
    /// - Parameter reason: why, for the log.
    public func fanoutLost(_ reason: String) {
        fanoutConnected.withLock { $0 = false }
        log("cluster bus lost: \(reason)")
    }

    /// Whether the cluster's bus is connected and its server answers now
    /// (`RealtimeFanout.isResponsive`; always true without a bus): the health check's answer.
    /// Read without the hub's lock, so the answer never waits for a call that holds it.
    public var isFanoutHealthy: Bool {
        guard let fanout = configurationStorage.fanout else { return true }
        return fanoutConnected.withLock { $0 } && fanout.isResponsive
    }

    // MARK: - Rooms

    func roomEventArrived(app: String, room name: String, epoch: String, record: RoomEventRecord, in state: inout State) {
        guard let cursor = state.rooms[app]?[name]?.cursor else { return }
        guard epoch == cursor.epoch else {
            // A new epoch, or a message of the epoch this node already left (it was in flight
            // while a join found the new one): the store says which.
            return catchUp([(app, name)], in: &state)
        }
        // Already delivered (caught up from the store before the bus brought it). Not a sign of
        // life: the room's quiet check still compares it with the store.
        guard record.id > cursor.id else { return }
        guard record.id == cursor.id + 1 else { return catchUp(app: app, room: name, in: &state) }
        state.rooms[app]?[name]?.cursor = RoomPosition(epoch: epoch, id: record.id)
        state.rooms[app]?[name]?.checkedAt = now()
        deliverKept(record, room: name, app: app, in: state)
    }

    /// Compares each room's cursor with the store's position (one round trip per app): a room
    /// on another epoch, or whose stream went back (a Redis restored from an older snapshot), is
    /// resynced; one behind on the same epoch is caught up.
    func catchUp(_ rooms: [(app: String, room: String)], in state: inout State) {
        let now = wallMilliseconds()
        let instant = self.now()
        for (app, group) in Dictionary(grouping: rooms, by: \.app) {
            let names = group.map(\.room).filter { state.rooms[app]?[$0]?.cursor != nil }
            guard !names.isEmpty else { continue }
            let positions: [RoomPosition]
            do {
                positions = try roomStore.positions(app: app, rooms: names, now: now)
            } catch {
                log("cannot compare \(names.count) room(s) with the history store: \(error)")
                continue
            }
            for (name, position) in zip(names, positions) {
                guard var room = state.rooms[app]?[name], let cursor = room.cursor else { continue }
                room.checkedAt = instant
                if position.epoch != cursor.epoch || position.id < cursor.id {
                    let why = position.epoch != cursor.epoch ? "the room's history was lost (a new epoch)" : "the room's history went back (\(cursor.id) → \(position.id))"
                    resyncMembers(&room, name: name, why: why, in: state)
                    room.cursor = position
                    state.rooms[app]?[name] = room
                } else {
                    state.rooms[app]?[name] = room
                    if position.id > cursor.id { catchUp(app: app, room: name, in: &state) }
                }
            }
        }
    }

    /// Delivers what the store kept after the room's cursor; when it cannot (another epoch,
    /// expired events), the members are told to resync.
    func catchUp(app: String, room name: String, in state: inout State) {
        guard var room = state.rooms[app]?[name], let cursor = room.cursor else { return }
        let replay: RoomReplay
        do {
            replay = try roomStore.replay(app: app, room: name, after: cursor, now: wallMilliseconds())
        } catch {
            log("cannot catch up room \(name.prefix(80)) from the history store: \(error)")
            return
        }
        room.checkedAt = now()
        switch replay {
        case .events(let records, let current):
            room.cursor = current
            state.rooms[app]?[name] = room
            for record in records where record.id > cursor.id { deliverKept(record, room: name, app: app, in: state) }
        case .unrecoverable(let reason, let current):
            resyncMembers(&room, name: name, why: "events this node missed are gone (\(reason.rawValue))", in: state)
            room.cursor = current
            state.rooms[app]?[name] = room
        }
    }

    /// Marks every member stale and sends it the room error `resync`: its rejoin from its
    /// position tells it (and its app) what was lost.
    func resyncMembers(_ room: inout Room, name: String, why: String, excluding: String? = nil, in state: State) {
        for socketID in room.order where socketID != excluding {
            guard room.members[socketID]?.stale == false else { continue }
            room.members[socketID]?.stale = true
            guard let connection = state.connections[socketID] else { continue }
            connection.output.send(text: RoomFrame.error(.resync, "\(why): rejoin from your position", room: name, namespace: connection.namespace))
        }
    }

    /// A room the sweep compares with the store, with the cursor it had when chosen.
    struct QuietRoom {
        var app: String
        var room: String
        var cursor: RoomPosition
    }

    /// The sweep's share, chosen under the lock: rooms the bus brought no new event of for
    /// `fanoutCheckInterval`, at most `maxFanoutChecksPerSweep` of them, the longest unchecked
    /// first. `checkQuietRooms` compares them with the store after the lock is released.
    func quietRooms(in state: State) -> [QuietRoom] {
        guard configurationStorage.fanout != nil else { return [] }
        let instant = now()
        var quiet: [(room: QuietRoom, checkedAt: ContinuousClock.Instant)] = []
        for (app, rooms) in state.rooms {
            for (name, room) in rooms {
                guard let cursor = room.cursor else { continue }
                let checkedAt = room.checkedAt ?? instant
                guard instant - checkedAt >= Self.fanoutCheckInterval else { continue }
                quiet.append((QuietRoom(app: app, room: name, cursor: cursor), checkedAt))
            }
        }
        // The longest unchecked first: past the batch size, every room still gets its turn.
        if quiet.count > Self.maxFanoutChecksPerSweep { quiet.sort { $0.checkedAt < $1.checkedAt } }
        return quiet.prefix(Self.maxFanoutChecksPerSweep).map(\.room)
    }

    /// Compares quiet rooms with the store: the store is asked with no lock held (a frozen
    /// Redis holds only the sweep, never the service thread), then each room whose cursor did
    /// not move meanwhile is resynced or caught up as `catchUp` does; one whose cursor moved
    /// heard from the bus since, and is left for a later check.
    func checkQuietRooms(_ quiet: [QuietRoom]) {
        let now = wallMilliseconds()
        for (app, group) in Dictionary(grouping: quiet, by: \.app) {
            let positions: [RoomPosition]
            do {
                positions = try roomStore.positions(app: app, rooms: group.map(\.room), now: now)
            } catch {
                log("cannot compare \(group.count) room(s) with the history store: \(error)")
                continue
            }
            state.withLock { state in
                let instant = self.now()
                for (chosen, position) in zip(group, positions) {
                    guard var room = state.rooms[app]?[chosen.room], let cursor = room.cursor, cursor == chosen.cursor else { continue }
                    room.checkedAt = instant
                    if position.epoch != cursor.epoch || position.id < cursor.id {
                        let why = position.epoch != cursor.epoch ? "the room's history was lost (a new epoch)" : "the room's history went back (\(cursor.id) → \(position.id))"
                        resyncMembers(&room, name: chosen.room, why: why, in: state)
                        room.cursor = position
                        state.rooms[app]?[chosen.room] = room
                    } else {
                        state.rooms[app]?[chosen.room] = room
                        if position.id > cursor.id { catchUp(app: app, room: chosen.room, in: &state) }
                    }
                }
            }
        }
    }
}
