import RealtimeProtocol

/// The hub's side of a cluster's bus (`RealtimeFanout`; DESIGN.md, "Scale-out"): events the
/// bus brings are delivered to this node's members; a room whose ids skip, a bus that was down
/// and a room the bus has been quiet about are caught up from the history store, so a member is
/// never left silently behind. What the store no longer has is told to the members with the
/// room error `resync`: they rejoin from their position and learn `recovered: false`.
extension RealtimeHub: FanoutReceiver {
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
        withState { busMessage(message, in: &$0) }
    }

    /// A room event, channel event or presence change the bus brought, under the lock:
    /// delivered to this node's members (the terminations and kicks are `fanoutReceived`'s).
    func busMessage(_ message: FanoutMessage, in state: inout State) {
        switch message {
        case .room(let app, let room, let epoch, let record):
            roomEventArrived(app: app, room: room, epoch: epoch, record: record, in: &state)
        case .channel(let event):
            _ = deliverChannel(event, in: &state)
        case .presence(let change):
            state.presenceReads[change.topic]?.keep(change)
            deliverPresence(change, in: &state)
        case .terminateUser, .kickRoomUser:
            break
        }
    }

    /// The bus confirmed it follows `topic`: a room's events kept before then are caught up
    /// from the store, and presence changes published before then are told. Called by the bus,
    /// on its thread: the work runs on the topic's shard's lane (when the lane is full, the
    /// sweep's quiet check catches the room up within `fanoutCheckInterval`).
    public func fanoutFollowing(_ topic: FanoutTopic) {
        let queued: Bool
        switch topic {
        case .room(let app, let room):
            queued = submitPresenceWork(on: topic) { [self] in
                catchUpRooms([(app, room)])
                refreshPresence([topic])
            }
        case .channel:
            queued = submitPresenceWork(on: topic) { [self] in refreshPresence([topic]) }
        case .app:
            return
        }
        if !queued {
            presenceViewsToRead.withLock { _ = $0.insert(topic) }
            log("\(topic) followed with the room lane full: its members are read at the next sweeps")
        }
    }

    /// Brings this node's presence views back to the cluster's, after changes the bus may not
    /// have brought (before a subscription was active, while the bus was down): each view is
    /// read again with no lock held, and every difference told to the node's members as an
    /// arrival or departure under it.
    ///
    /// A batch whose read fails is kept (`presenceViewsToRead`) and read again at the next
    /// sweep: the changes the bus did not bring are in the registry only.
    func refreshPresence(_ topics: [FanoutTopic]) {
        guard let fanout = configurationStorage.fanout else { return }
        for start in stride(from: 0, to: topics.count, by: Self.maxFanoutChecksPerSweep) {
            let batch = Array(topics[start..<min(start + Self.maxFanoutChecksPerSweep, topics.count)])
            // The changes the bus brings from now until the list is applied are kept: the
            // list may have been read before them.
            let starts = withState { state in batch.map { state.presenceReads[$0, default: PresenceRead()].begin() } }
            let lists: [[(user: String, info: String?)]]
            do throws(RoomStoreError) {
                lists = try fanout.presenceMembers(batch, limit: Self.maxClusterPresenceMembers)
            } catch {
                withState { state in for topic in batch { _ = state.presenceReads.end(topic, from: 0) } }
                presenceViewsToRead.withLock { $0.formUnion(batch) }
                log("\(batch.count) presence view(s) left to the next sweep: \(error)")
                continue
            }
            withState { state in
                var applied: [FanoutTopic] = []
                var again: [FanoutTopic] = []
                for ((topic, list), start) in zip(zip(batch, lists), starts) {
                    // Too many changes to keep, or the view closed during the read (the list may
                    // be older than a view opened since): read again.
                    guard let changes = state.presenceReads.end(topic, from: start) else {
                        again.append(topic)
                        continue
                    }
                    var members = Dictionary(list.map { ($0.user, $0.info.flatMap(StrictJSON.parse)) }, uniquingKeysWith: { first, _ in first })
                    for change in changes { _ = Self.apply(change, info: change.info.flatMap(StrictJSON.parse), to: &members) }
                    if applyPresenceList(topic, members: members.map { ($0.key, $0.value) }, in: &state) { applied.append(topic) }
                }
                // Under the hub's lock, as the views change: a view opened since from this
                // node's members alone stays due for its read.
                presenceViewsToRead.withLock { stale in
                    stale.subtract(applied)
                    stale.formUnion(again)
                }
            }
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
    /// with the store and caught up on its shard's lane (one pipelined round trip per batch of
    /// rooms, no lock held across any; a frozen master holds its own rooms only), and every
    /// presence view read again on the node's lane. Called by the bus, on its thread. The node
    /// counts as healthy once the presence views are read (the rooms left to a full lane are
    /// the sweep's quiet checks').
    public func fanoutReady() {
        let followed = withState { state in state.rooms.flatMap { app, rooms in rooms.keys.map { (app: app, room: $0) } } }
        let left = lane.submitPerShard("bus ready", followed, room: { $0 }) { [self] rooms in
            for start in stride(from: 0, to: rooms.count, by: Self.maxFanoutChecksPerSweep) {
                catchUpRooms(Array(rooms[start..<min(start + Self.maxFanoutChecksPerSweep, rooms.count)]))
            }
        }
        let queued = lane.submit { [self] in
            // Presence changes published while the bus was down did not come.
            let views = withState { presenceViews(in: $0) }
            refreshPresence(views)
            fanoutConnected.withLock { $0 = true }
            log("cluster bus ready (\(followed.count - left.count) room(s) to catch up, \(views.count) presence view(s) read again)")
        }
        if !queued || !left.isEmpty {
            if !queued {
                let views = withState { presenceViews(in: $0) }
                presenceViewsToRead.withLock { $0.formUnion(views) }
                fanoutConnected.withLock { $0 = true }
            }
            log("cluster bus ready with the room lane full: \(left.count) room(s)\(queued ? "" : " and the presence views") left to the sweep's checks")
        }
    }

    /// The sweep's step for presence views whose read failed (`refreshPresence`): the topics
    /// whose view closed are forgotten (also while the bus is down: the set never holds more
    /// than the views open), the others read again on the lane, once at a time, while the bus
    /// is up (the bus's coming back reads them all).
    func readPresenceViewsAgain() {
        guard !presenceViewsToRead.withLock({ $0.isEmpty }) else { return }
        withState { state in
            presenceViewsToRead.withLock { stale in stale = stale.filter { Self.hasPresenceView($0, in: state) } }
        }
        guard fanoutConnected.withLock({ $0 }) else { return }
        _ = lane.submitOnce("presence views") { [self] in
            refreshPresence(presenceViewsToRead.withLock { $0.sorted { "\($0)" < "\($1)" } })
        }
    }

    /// Whether this node keeps a view of the topic's members.
    static func hasPresenceView(_ topic: FanoutTopic, in state: State) -> Bool {
        switch topic {
        case .channel(let app, let name): state.channels[app]?[name]?.clusterView != nil
        case .room(let app, let name): state.rooms[app]?[name]?.clusterView != nil
        case .app: false
        }
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

    /// The bus's shards and whether each is up (`RealtimeFanout.shardStatus`: a Redis
    /// Cluster's masters; empty otherwise), read without the hub's lock.
    public var fanoutShards: [FanoutShardStatus] { configurationStorage.fanout?.shardStatus ?? [] }

    /// How long a room request may run on its shard's lane before `/health` names the shard as
    /// not answering: half a second (a Redis answers in a millisecond; a page of history in a
    /// few).
    public static let storeStallThreshold: Duration = .milliseconds(500)

    /// The history store's shards that stopped answering, each as `"<shard> (not answering
    /// for 1.2 s)"`; a store reached whole (one Redis, SQLite, memory) is named `the history
    /// store`. Read without the hub's lock (a frozen Redis Cluster master holds its own rooms
    /// only, and the health check says which).
    public var stalledStoreShards: [String] {
        let fanout = configurationStorage.fanout
        return Self.storeShardsStalled(lane.stalledShards(after: Self.storeStallThreshold)) { [roomStore] shard in
            [roomStore.isAnswering(shard: shard), fanout?.isAnswering(shard: shard)]
        }
    }

    /// Of the shards whose lane has run one request for `storeStallThreshold` or longer, those
    /// that a connection the lane's work uses (the history store's, the bus's presence calls')
    /// says stopped answering, or that none can tell of (`RoomHistoryStore.isAnswering`,
    /// `RealtimeFanout.isAnswering`): a long request of many quick commands (a catch-up of a
    /// thousand rooms) on a shard whose connections answer each is no stall.
    static func storeShardsStalled(_ running: [(shard: String, running: Duration)], answering: (String) -> [Bool?]) -> [String] {
        running.compactMap { shard, running in
            let said = answering(shard).compactMap { $0 }
            guard said.isEmpty || said.contains(false) else { return nil }
            let seconds = Double(running.components.seconds) + Double(running.components.attoseconds) / 1e18
            return "\(shard.isEmpty ? "the history store" : shard) (not answering for \(String(format: "%.1f", seconds)) s)"
        }
    }

    // MARK: - Rooms

    func roomEventArrived(app: String, room name: String, epoch: String, record: RoomEventRecord, in state: inout State) {
        guard let room = state.rooms[app]?[name] else { return }
        switch room.busEvent(epoch: epoch, id: record.id) {
        case .keepForJoins:
            deliverKept(record, epoch: epoch, room: name, app: app, in: &state)
        case .duplicate:
            // Not a sign of life: the room's quiet check still compares it with the store.
            break
        case .catchUp:
            state.queue(.catchUp(app: app, room: name))
        case .deliver:
            state.rooms[app]?[name]?.cursor = RoomPosition(epoch: epoch, id: record.id)
            state.rooms[app]?[name]?.checkedAt = now()
            deliverKept(record, epoch: epoch, room: name, app: app, in: &state)
        }
    }

    /// Queues a catch-up of the room on the lane, unless one waits already (the events the bus
    /// brings past a gap meanwhile are read again from the store). With the lane full, the
    /// sweep's quiet check catches the room up instead.
    func scheduleCatchUp(app: String, room name: String) {
        lane.submitOnce("catch-up \(app.utf8.count):\(app):\(name)", room: (app, name)) { [self] in catchUpRooms([(app, name)]) }
    }

    /// Compares each room's cursor with the store's position and catches it up, with no lock
    /// held across the store (`checkRooms`).
    func catchUpRooms(_ rooms: [(app: String, room: String)]) {
        let chosen = withState { state in
            rooms.compactMap { entry in state.rooms[entry.app]?[entry.room]?.cursor.map { QuietRoom(app: entry.app, room: entry.room, cursor: $0) } }
        }
        checkRooms(chosen)
    }

    /// Delivers what the store kept after the room's cursor, read with no lock held, if the
    /// cursor did not move meanwhile (the bus delivered since: nothing to do); when the store
    /// cannot (another epoch, expired events), or the events are more than `maxCatchUpBytes`,
    /// the members are told to resync (each then streams its own replay, paced). Performs: the
    /// decisions are `QuietRoom.lostWrites` and `roomCaughtUp`.
    func catchUpRoom(_ chosen: QuietRoom) {
        let replay: RoomReplay
        var forked: RoomPosition?
        do {
            replay = try roomStore.replay(app: chosen.app, room: chosen.room, after: chosen.cursor, now: wallMilliseconds(), maxBytes: Self.maxCatchUpBytes)
            if case .unrecoverable(.unknownPosition, let current) = replay, chosen.lostWrites(current) { forked = forkIfBehind(chosen, current) }
        } catch {
            log("cannot catch up room \(chosen.room.prefix(80)) from the history store: \(error)")
            return
        }
        withState { roomCaughtUp(chosen, replay, forked: forked, in: &$0) }
    }

    /// A room's catch-up read, under the lock: unless the room's cursor moved since it was
    /// chosen, the events after it are delivered and the cursor moves to the store's position;
    /// events the store no longer has (or more than one catch-up carries) send the members
    /// `resync`, the cursor then at the store's position (`forked`, when the store lost writes
    /// and moved the room to a new epoch).
    func roomCaughtUp(_ chosen: QuietRoom, _ replay: RoomReplay, forked: RoomPosition?, in state: inout State) {
        guard var room = state.rooms[chosen.app]?[chosen.room], room.cursor == chosen.cursor else { return }
        room.checkedAt = now()
        switch replay {
        case .events(let records, let current):
            room.cursor = current
            state.rooms[chosen.app]?[chosen.room] = room
            for record in records where record.id > chosen.cursor.id {
                deliverKept(record, epoch: current.epoch, room: chosen.room, app: chosen.app, in: &state)
            }
        case .unrecoverable(let reason, var current):
            if reason == .unknownPosition, let forked { current = forked }
            let why = reason == .tooLarge ? "this node fell behind the room by more than one catch-up carries"
                : "events this node missed are gone (\(reason.rawValue))"
            resyncMembers(&room, name: chosen.room, why: why, in: &state)
            room.cursor = current
            state.rooms[chosen.app]?[chosen.room] = room
        }
    }

    /// Bytes of records one catch-up of a room reads (1 MiB): a node that fell further behind
    /// (its bus lost for long while a room kept up to 100,000 events) tells its members to
    /// resync instead of building every missed frame at once.
    static let maxCatchUpBytes = 1 << 20

    /// Marks every member stale and sends it the room error `resync`: its rejoin from its
    /// position tells it (and its app) what was lost.
    func resyncMembers(_ room: inout Room, name: String, why: String, excluding: String? = nil, in state: inout State) {
        for socketID in room.order where socketID != excluding {
            guard room.members[socketID]?.stale == false else { continue }
            room.members[socketID]?.stale = true
            guard let connection = state.connections[socketID] else { continue }
            state.send(RoomFrame.error(.resync, "\(why): rejoin from your position", room: name, namespace: connection.namespace), to: connection)
        }
    }

    /// A room whose history went back below this node's cursor in the same epoch (the store
    /// lost writes this node saw: a Redis failover) moves to a new epoch in the store
    /// (`RoomHistoryStore.forkIfBehind`), so its old ids are never given to other events; the
    /// members are then told to resync and learn their gap. Called with no lock held.
    ///
    /// - Returns: the room's position now (`position` when the store cannot be asked).
    func forkIfBehind(_ chosen: QuietRoom, _ position: RoomPosition) -> RoomPosition {
        do {
            let forked = try roomStore.forkIfBehind(app: chosen.app, room: chosen.room, seen: chosen.cursor, now: wallMilliseconds())
            log("room \(chosen.room.prefix(80)) went back from \(chosen.cursor.id) to \(position.id) in its epoch (the store lost writes): now epoch \(forked.epoch.prefix(16)) at \(forked.id)")
            return forked
        } catch {
            log("room \(chosen.room.prefix(80)) went back from \(chosen.cursor.id) to \(position.id), and no new epoch could be made: \(error)")
            return position
        }
    }

    /// A room the sweep compares with the store, with the cursor it had when chosen.
    struct QuietRoom: Hashable {
        var app: String
        var room: String
        var cursor: RoomPosition

        /// Whether the store's `position` went back below the cursor in the same epoch: the
        /// store lost writes this node saw (a Redis failover), and the room moves to a new
        /// epoch (`RealtimeHub.forkIfBehind`).
        func lostWrites(_ position: RoomPosition) -> Bool {
            position.epoch == cursor.epoch && position.id < cursor.id
        }
    }

    /// The sweep's share, chosen under the lock: rooms the bus brought no new event of for
    /// `fanoutCheckInterval`, at most `maxFanoutChecksPerSweep` of them, the longest unchecked
    /// first. `checkRooms` compares them with the store after the lock is released.
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

    /// Compares rooms with the store: the store is asked with no lock held (a frozen Redis
    /// holds only the caller, never the service thread), then each room whose cursor did not
    /// move meanwhile is resynced (on another epoch, or a stream that went back: a Redis
    /// restored from an older snapshot) or, when behind on the same epoch, caught up
    /// (`catchUpRoom`); one whose cursor moved heard from the bus since, and is left for a
    /// later check. Performs: the decisions are `QuietRoom.lostWrites` and `roomsCompared`.
    func checkRooms(_ chosen: [QuietRoom]) {
        let now = wallMilliseconds()
        for (app, group) in Dictionary(grouping: chosen, by: \.app) {
            // Rooms whose part of the store cannot be reached (a Redis Cluster shard down) are
            // left for a later check; the others are compared.
            var positions: [RoomPosition?]
            do {
                positions = try roomStore.reachablePositions(app: app, rooms: group.map(\.room), now: now)
            } catch {
                log("cannot compare \(group.count) room(s) with the history store: \(error)")
                continue
            }
            let unreached = positions.count { $0 == nil }
            if unreached > 0 { log("cannot compare \(unreached) of \(group.count) room(s) with the history store: their part of it is unreachable") }
            for (index, (chosen, position)) in zip(group, positions).enumerated() {
                guard let position, chosen.lostWrites(position) else { continue }
                positions[index] = forkIfBehind(chosen, position)
            }
            let behind = withState { roomsCompared(group, positions, in: &$0) }
            for room in behind { catchUpRoom(room) }
        }
    }

    /// Rooms compared with the store's `positions` (`nil`: its part of the store unreachable,
    /// left for a later check), under the lock: a room whose cursor moved since it was chosen
    /// heard from the bus and is left; one on another epoch, or whose stream went back, sends
    /// its members `resync` and takes the store's position; one behind on the same epoch is
    /// returned, to be caught up (`catchUpRoom`).
    func roomsCompared(_ group: [QuietRoom], _ positions: [RoomPosition?], in state: inout State) -> [QuietRoom] {
        let instant = now()
        var behind: [QuietRoom] = []
        for (chosen, position) in zip(group, positions) {
            guard let position, var room = state.rooms[chosen.app]?[chosen.room], let cursor = room.cursor, cursor == chosen.cursor else { continue }
            room.checkedAt = instant
            switch Room.compare(cursor, with: position) {
            case .resync(let why):
                resyncMembers(&room, name: chosen.room, why: why, in: &state)
                room.cursor = position
            case .behind:
                behind.append(chosen)
            case .current:
                break
            }
            state.rooms[chosen.app]?[chosen.room] = room
        }
        return behind
    }
}

/// The presence changes the bus brought for one topic while its members were being read again
/// (`RealtimeHub.refreshPresence`), for every read in flight (each from where it began).
/// Bounded: past `RealtimeHub.maxViewChanges` changes the reads that began before are read again.
struct PresenceRead: Hashable, Sendable {
    /// Reads in flight.
    private(set) var readers = 0
    private(set) var changes: [PresenceFanoutEvent] = []
    /// Changes dropped at the bound, or the view closed: the reads in flight are read again.
    private(set) var overflowed = false

    /// The topic's view closed (no member left on this node): the reads in flight are made
    /// again, their list possibly older than a view opened since.
    mutating func invalidate() { overflowed = true }

    /// A read begins: returns where its changes start.
    mutating func begin() -> Int {
        readers += 1
        return changes.count
    }

    /// Keeps a change the bus brought.
    mutating func keep(_ change: PresenceFanoutEvent) {
        guard changes.count < RealtimeHub.maxViewChanges else { return overflowed = true }
        changes.append(change)
    }

    /// A read that began at `start` ended: the changes kept since, `nil` when some were dropped.
    mutating func end(from start: Int) -> [PresenceFanoutEvent]? {
        readers -= 1
        return overflowed ? nil : Array(changes[min(start, changes.count)...])
    }
}

extension [FanoutTopic: PresenceRead] {
    /// A read of `topic` that began at `start` ended: the changes kept since, or `nil` when
    /// some were dropped at the bound (the read must be made again). The topic's entry goes
    /// with its last read.
    mutating func end(_ topic: FanoutTopic, from start: Int) -> [PresenceFanoutEvent]? {
        guard var read = self[topic] else { return [] }
        let changes = read.end(from: start)
        self[topic] = read.readers > 0 ? read : nil
        return changes
    }
}
