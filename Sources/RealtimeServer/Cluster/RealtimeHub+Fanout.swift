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
        state.withLock { state in
            switch message {
            case .room(let app, let room, let epoch, let record):
                roomEventArrived(app: app, room: room, epoch: epoch, record: record, in: &state)
            case .channel(let event):
                _ = deliverChannel(event, in: state)
            }
        }
    }

    /// The bus confirmed it follows `topic`: a room's events kept before then are caught up
    /// from the store. Called by the bus, on its thread.
    public func fanoutFollowing(_ topic: FanoutTopic) {
        guard case .room(let app, let room) = topic else { return }
        state.withLock { state in catchUp([(app, room)], in: &state) }
    }

    /// The bus is connected (again) and follows every topic: every followed room is compared
    /// with the store and caught up. Called by the bus, on its thread.
    public func fanoutReady() {
        let rooms = state.withLock { state -> Int in
            let followed = state.rooms.flatMap { app, rooms in rooms.keys.map { (app, $0) } }
            for start in stride(from: 0, to: followed.count, by: Self.maxFanoutChecksPerSweep) {
                catchUp(Array(followed[start..<min(start + Self.maxFanoutChecksPerSweep, followed.count)]), in: &state)
            }
            state.fanoutHealthy = true
            return followed.count
        }
        log("cluster bus ready (\(rooms) room(s) caught up)")
    }

    /// The bus lost its connection: events published meanwhile are caught up when it is ready
    /// again. Called by the bus, on its thread.
    ///
    /// - Parameter reason: why, for the log.
    public func fanoutLost(_ reason: String) {
        state.withLock { $0.fanoutHealthy = false }
        log("cluster bus lost: \(reason)")
    }

    /// Whether the cluster's bus is connected (always true without one): the health check's answer.
    public var isFanoutHealthy: Bool { configurationStorage.fanout == nil || state.withLock { $0.fanoutHealthy } }

    // MARK: - Rooms

    func roomEventArrived(app: String, room name: String, epoch: String, record: RoomEventRecord, in state: inout State) {
        guard var room = state.rooms[app]?[name], let cursor = room.cursor else { return }
        room.checkedAt = now()
        if epoch != cursor.epoch {
            resyncMembers(&room, name: name, why: "the room's history was lost (a new epoch)", in: state)
            room.cursor = RoomPosition(epoch: epoch, id: record.id)
            state.rooms[app]?[name] = room
            return
        }
        guard record.id > cursor.id else {
            // Already delivered (caught up from the store before the bus brought it).
            state.rooms[app]?[name] = room
            return
        }
        if record.id == cursor.id + 1 {
            room.cursor = RoomPosition(epoch: epoch, id: record.id)
            state.rooms[app]?[name] = room
            deliverKept(record, room: name, app: app, in: state)
            return
        }
        state.rooms[app]?[name] = room
        catchUp(app: app, room: name, in: &state)
    }

    /// Compares each room's cursor with the store's position (one round trip per app) and
    /// catches up those behind or on another epoch.
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
                state.rooms[app]?[name]?.checkedAt = instant
                guard let cursor = state.rooms[app]?[name]?.cursor, cursor != position else { continue }
                catchUp(app: app, room: name, in: &state)
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
    func resyncMembers(_ room: inout Room, name: String, why: String, in state: State) {
        for socketID in room.order {
            guard room.members[socketID]?.stale == false else { continue }
            room.members[socketID]?.stale = true
            guard let connection = state.connections[socketID] else { continue }
            connection.output.send(text: RoomFrame.error(.resync, "\(why): rejoin from your position", room: name, namespace: connection.namespace))
        }
    }

    /// The sweep's share: rooms the bus was quiet about for `fanoutCheckInterval`, compared
    /// with the store, at most `maxFanoutChecksPerSweep` of them.
    func checkQuietRooms(in state: inout State) {
        guard configurationStorage.fanout != nil else { return }
        let instant = now()
        var quiet: [(app: String, room: String)] = []
        search: for (app, rooms) in state.rooms {
            for (name, room) in rooms where room.cursor != nil {
                guard instant - (room.checkedAt ?? instant) >= Self.fanoutCheckInterval else { continue }
                quiet.append((app, name))
                if quiet.count >= Self.maxFanoutChecksPerSweep { break search }
            }
        }
        if !quiet.isEmpty { catchUp(quiet, in: &state) }
    }
}
