import RealtimeProtocol
import RealtimeServer
import SystemSupport

/// The hub's deferred work on the simulation's clock (`HubExecutor`): each queue serial, as a
/// Dispatch queue is (its next job starts a few microseconds after the last one ended, however
/// long that one waited on the store meanwhile), a wait after its duration.
final class SimulatedExecutor: HubExecutor {
    private struct Queue {
        var jobs: [@Sendable () -> Void] = []
        var head = 0
        var busy = false
    }

    let simulation: Simulation
    private let queues = Locked<[String: Queue]>([:])
    /// The node was killed: nothing more runs for it.
    private let stopped = Locked(false)

    init(simulation: Simulation) { self.simulation = simulation }

    func async(on queue: String, _ job: @escaping @Sendable () -> Void) {
        guard !stopped.withLock({ $0 }) else { return }
        let start = queues.withLock { queues -> Bool in
            queues[queue, default: Queue()].jobs.append(job)
            return queues[queue]?.busy == false
        }
        if start { pump(queue) }
    }

    func after(_ delay: Duration, _ job: @escaping @Sendable () -> Void) {
        simulation.after(delay) { [stopped] in
            guard !stopped.withLock({ $0 }) else { return }
            job()
        }
    }

    /// Drops every job still waiting, and runs none from now on (the node was killed, or the
    /// run ended).
    func clear() {
        stopped.withLock { $0 = true }
        queues.withLock { $0 = [:] }
    }

    /// Runs the queue's next job a few microseconds on, then the one after it, until none waits.
    private func pump(_ queue: String) {
        queues.withLock { $0[queue]?.busy = true }
        simulation.after(.microseconds(simulation.random(in: 1...50))) { [self] in
            let job = queues.withLock { queues -> (@Sendable () -> Void)? in
                guard var entry = queues[queue], entry.head < entry.jobs.count else {
                    queues[queue]?.busy = false
                    return nil
                }
                let job = entry.jobs[entry.head]
                entry.head += 1
                if entry.head > 64, entry.head * 2 > entry.jobs.count {
                    entry.jobs.removeFirst(entry.head)
                    entry.head = 0
                }
                queues[queue] = entry
                return job
            }
            guard let job, !stopped.withLock({ $0 }) else { return }
            job()
            pump(queue)
        }
    }
}

/// The history store every node shares, as the real stores' contract has it (ids, epochs,
/// trims and spans: an `InMemoryRoomStore` whose epochs come from the seed), handing each kept
/// event to the bus as the Redis store's append script does; `lose` drops a room's history (a
/// failover that lost writes, a flush): its next event starts a new epoch. Each call is a round
/// trip of 0.1 to 3 ms: the world goes on while the caller waits (`Simulation.wait`), the
/// command runs halfway, as the bus, the other lanes and the connections go on while a lane
/// waits on Redis.
final class SimulatedStore: RoomHistoryStore {
    let kept: InMemoryRoomStore
    let bus: SimulatedBus

    private let simulation: Simulation

    init(simulation: Simulation, bus: SimulatedBus) {
        self.simulation = simulation
        let counter = Locked(0)
        kept = InMemoryRoomStore(newEpoch: {
            let next = counter.withLock { value -> Int in
                value += 1
                return value
            }
            return "epoch\(next)"
        })
        self.bus = bus
    }

    func lose(app: String, room: String) { kept.lose(app: app, room: room) }

    /// Two shards, as a Redis Cluster's masters: each room's lane is its shard's
    /// (`RoomLane`), so the lanes' work interleaves as on a cluster. A room's presence
    /// registry is on its history's shard (one hash tag).
    func shard(app: String, room: String) -> String { Self.shard(of: room) }

    /// The shard holding `name`'s keys: `s0` or `s1`.
    static func shard(of name: String) -> String { "s\(name.utf8.reduce(0) { $0 &+ Int($1) } % 2)" }

    /// A room behind `seen` in its epoch (writes lost) moves to a new epoch, as the Redis
    /// store's fork script does; the position now.
    private func forkedIfBehind(app: String, room: String, seen: RoomPosition?, now: Int64) throws(RoomStoreError) -> RoomPosition {
        let current = try kept.position(app: app, room: room, now: now)
        guard let seen, seen.epoch == current.epoch, seen.id > current.id else { return current }
        kept.lose(app: app, room: room)
        return try kept.position(app: app, room: room, now: now)
    }

    /// Until when (nanoseconds) the store answers nothing: a failover in progress.
    private let downUntil = Locked<Int64>(0)

    /// The store fails over for `duration`: every call meanwhile fails (`unavailable`), the
    /// nodes' bus subscriptions to it drop and come back after, and then the new master serves
    /// the room with its newest `lost` events missing (a replica promoted without them; the
    /// events' bus messages, published before, have all arrived by then).
    func failOver(app: String, room: String, losing lost: Int, for duration: Duration, nodes: Int) {
        let end = simulation.time + Simulation.nanoseconds(duration)
        downUntil.withLock { $0 = max($0, end) }
        for node in 0..<nodes { bus.loseSubscription(node, for: duration) }
        simulation.after(duration - .microseconds(1)) { [self] in kept.dropNewest(app: app, room: room, count: lost) }
    }

    /// A round trip to the store: half of it, the command, the other half; `unavailable`
    /// while the store fails over.
    func roundTrip<Value>(_ command: () throws(RoomStoreError) -> Value) throws(RoomStoreError) -> Value {
        let half = Duration.microseconds(simulation.random(in: 50...1_500))
        simulation.wait(half)
        guard simulation.time >= downUntil.withLock({ $0 }) else { throw .unavailable("simulated: failing over") }
        let value = try command()
        simulation.wait(half)
        return value
    }

    func position(app: String, room: String, now: Int64) throws(RoomStoreError) -> RoomPosition {
        try roundTrip { () throws(RoomStoreError) in try kept.position(app: app, room: room, now: now) }
    }

    func append(app: String, room: String, event: String, data: String, from: String?, rule: RoomRule, at: Int64) throws(RoomStoreError) -> (epoch: String, record: RoomEventRecord) {
        try append(app: app, room: room, event: event, data: data, from: from, rule: rule, at: at, seen: nil)
    }

    func append(app: String, room: String, event: String, data: String, from: String?, rule: RoomRule, at: Int64,
                seen: RoomPosition?) throws(RoomStoreError) -> (epoch: String, record: RoomEventRecord) {
        try roundTrip { () throws(RoomStoreError) in
            _ = try forkedIfBehind(app: app, room: room, seen: seen, now: at)
            let appended = try kept.append(app: app, room: room, event: event, data: data, from: from, rule: rule, at: at)
            bus.publish(.room(app: app, room: room, epoch: appended.epoch, record: appended.record), on: .room(app: app, room: room))
            return appended
        }
    }

    func replay(app: String, room: String, after position: RoomPosition, now: Int64, maxBytes: Int) throws(RoomStoreError) -> RoomReplay {
        try roundTrip { () throws(RoomStoreError) in try kept.replay(app: app, room: room, after: position, now: now, maxBytes: maxBytes) }
    }

    func replayPage(app: String, room: String, after position: RoomPosition, limit: Int, maxBytes: Int, now: Int64) throws(RoomStoreError) -> RoomReplayPage {
        try roundTrip { () throws(RoomStoreError) in try kept.replayPage(app: app, room: room, after: position, limit: limit, maxBytes: maxBytes, now: now) }
    }

    func page(app: String, room: String, before: UInt64?, limit: Int, now: Int64) throws(RoomStoreError) -> RoomStorePage {
        try roundTrip { () throws(RoomStoreError) in try kept.page(app: app, room: room, before: before, limit: limit, now: now) }
    }

    func positions(app: String, rooms: [String], now: Int64) throws(RoomStoreError) -> [RoomPosition] {
        try roundTrip { () throws(RoomStoreError) in try kept.positions(app: app, rooms: rooms, now: now) }
    }

    func reachablePositions(app: String, rooms: [String], now: Int64) throws(RoomStoreError) -> [RoomPosition?] {
        try roundTrip { () throws(RoomStoreError) in try kept.reachablePositions(app: app, rooms: rooms, now: now) }
    }

    func expire(now: Int64) { kept.expire(now: now) }

    func settleRule(app: String, room: String, offered: RoomRuleRecord, force: Bool, now: Int64) throws(RoomStoreError) -> RoomRuleRecord {
        try roundTrip { () throws(RoomStoreError) in try kept.settleRule(app: app, room: room, offered: offered, force: force, now: now) }
    }

    func forkIfBehind(app: String, room: String, seen: RoomPosition, now: Int64) throws(RoomStoreError) -> RoomPosition {
        try roundTrip { () throws(RoomStoreError) in try forkedIfBehind(app: app, room: room, seen: seen, now: now) }
    }
}

/// The bus between the nodes (Redis pub/sub's contract): a node hears a topic's messages once it
/// follows it, in the order they were published to that topic, each after a delay of its own
/// path; a node's subscription can be lost for a while (it then hears nothing, is told the bus
/// was lost, and ready again after, as `RedisFanout` tells the hub).
final class SimulatedBus: Sendable {
    private struct Node {
        var receiver: (any FanoutReceiver)?
        /// Topics asked for (`SUBSCRIBE` sent), and those confirmed: only these hear messages,
        /// as Redis delivers nothing to a channel before the subscription is made.
        var asked: Set<FanoutTopic> = []
        var followed: Set<FanoutTopic> = []
        /// Messages are dropped for this node until then (nanoseconds), `nil` when connected.
        var lostUntil: Int64?
        /// When the node's last message of each topic arrives: the next comes after it (order
        /// per topic and subscriber, as Redis keeps it).
        var lastArrival: [FanoutTopic: Int64] = [:]
    }

    private let simulation: Simulation
    private let nodes: Locked<[Int: Node]> = Locked([:])

    init(simulation: Simulation) { self.simulation = simulation }

    /// Node `node`'s bus starts: it is ready a little later (its subscription connected).
    func attach(_ node: Int, _ receiver: any FanoutReceiver) {
        nodes.withLock { $0[node] = Node(receiver: receiver) }
        simulation.after(.microseconds(simulation.random(in: 50...2_000))) { [self] in
            guard nodes.withLock({ $0[node].map { $0.receiver === receiver && $0.lostUntil == nil } ?? false }) else { return }
            receiver.fanoutReady()
        }
    }

    func detach(_ node: Int) { nodes.withLock { $0[node] = nil } }

    func follow(_ topic: FanoutTopic, node: Int) {
        let added = nodes.withLock { $0[node]?.asked.insert(topic).inserted ?? false }
        guard added else { return }
        // Made a little later, as `SUBSCRIBE`'s answer comes: what is published meanwhile is
        // not heard.
        simulation.after(.microseconds(simulation.random(in: 50...2_000))) { [self] in
            let receiver = nodes.withLock { nodes -> (any FanoutReceiver)? in
                guard var entry = nodes[node], entry.asked.contains(topic) else { return nil }
                entry.followed.insert(topic)
                nodes[node] = entry
                return entry.lostUntil == nil ? entry.receiver : nil
            }
            simulation.note("bus: node \(node) follows \(topic)")
            receiver?.fanoutFollowing(topic)
        }
    }

    func unfollow(_ topic: FanoutTopic, node: Int) {
        nodes.withLock { nodes in
            _ = nodes[node]?.asked.remove(topic)
            _ = nodes[node]?.followed.remove(topic)
        }
    }

    /// Publishes `message` to every node following `topic` now, but `origin` (a channel event
    /// comes back to no node: it delivered its own).
    func publish(_ message: FanoutMessage, on topic: FanoutTopic, except origin: Int? = nil) {
        let now = simulation.time
        let deliveries = nodes.withLock { nodes -> [(Int64, any FanoutReceiver)] in
            var deliveries: [(Int64, any FanoutReceiver)] = []
            for index in nodes.keys.sorted() where index != origin {
                guard var node = nodes[index], node.followed.contains(topic), node.lostUntil == nil, let receiver = node.receiver else { continue }
                let delay = Int64(simulation.random(in: 20...3_000)) * 1_000
                let arrival = max(now + delay, (node.lastArrival[topic] ?? 0) + 1)
                node.lastArrival[topic] = arrival
                nodes[index] = node
                deliveries.append((arrival, receiver))
            }
            return deliveries
        }
        if case .presence = message { simulation.note("bus: \(deliveries.count) node(s) following \(topic) get it") }
        for (arrival, receiver) in deliveries {
            simulation.after(.nanoseconds(arrival - now)) { [self] in
                // A subscription lost meanwhile drops what was on its way.
                guard nodes.withLock({ node in node.values.contains { $0.receiver === receiver && $0.lostUntil == nil } }) else { return }
                receiver.fanoutReceived(message)
            }
        }
    }

    /// Node `index`'s subscription is lost for `duration`: it hears nothing meanwhile, is told
    /// the bus was lost, and that it is ready again after (its rooms are then caught up).
    func loseSubscription(_ index: Int, for duration: Duration) {
        let end = simulation.time + Simulation.nanoseconds(duration)
        guard let receiver = nodes.withLock({ nodes -> (any FanoutReceiver)? in
            guard nodes[index]?.lostUntil == nil else { return nil }
            nodes[index]?.lostUntil = end
            nodes[index]?.lastArrival = [:]
            return nodes[index]?.receiver
        }) else { return }
        receiver.fanoutLost("simulated: subscription lost")
        simulation.after(duration) { [self] in
            let back = nodes.withLock { nodes -> (any FanoutReceiver)? in
                nodes[index]?.lostUntil = nil
                return nodes[index]?.receiver
            }
            back?.fanoutReady()
        }
    }
}

/// One node's side of the bus and of the presence registry (`RealtimeFanout`), as
/// `RedisFanout` is: the node registers itself before a join when its last registration is half
/// a TTL old, a presence call that fails marks its topic for the next sweep's reconcile, and a
/// node found taken for dead has every topic reconciled for `reconcilesAfterRevival`.
final class NodeFanout: RealtimeFanout {
    private struct Registration {
        /// When the node last registered (nanoseconds), `nil` before the first time.
        var at: Int64?
        var revivedAt: Int64?
        var suspects: Set<FanoutTopic> = []
        var all = false
    }

    let bus: SimulatedBus
    let node: Int
    /// The node's id in the registry: each start is a new one.
    let id: String
    private let presence: SimulatedPresence
    private let simulation: Simulation
    private let registration = Locked(Registration())

    /// `RedisFanout.reconcilesAfterRevival`, nanoseconds.
    static let reconcilesAfterRevival: Int64 = 3_000_000_000

    init(bus: SimulatedBus, presence: SimulatedPresence, simulation: Simulation, node: Int, id: String) {
        self.bus = bus
        self.presence = presence
        self.simulation = simulation
        self.node = node
        self.id = id
    }

    func start(_ receiver: any FanoutReceiver) { bus.attach(node, receiver) }
    func follow(_ topic: FanoutTopic) { bus.follow(topic, node: node) }
    func unfollow(_ topic: FanoutTopic) { bus.unfollow(topic, node: node) }
    func publish(_ event: ChannelFanoutEvent) throws(RoomStoreError) {
        bus.publish(.channel(event), on: .channel(app: event.app, channel: event.channel), except: node)
    }
    func terminate(app: String, user: String) throws(RoomStoreError) {}
    func kick(app: String, room: String, user: String, reason: String?) throws(RoomStoreError) {}
    func stop() { bus.detach(node) }

    func shard(of topic: FanoutTopic) -> String {
        switch topic {
        case .room(_, let room): SimulatedStore.shard(of: room)
        case .channel(_, let channel): SimulatedStore.shard(of: channel)
        case .app: ""
        }
    }

    /// Registers the node; a node found taken for dead needs every topic reconciled.
    private func register() throws(RoomStoreError) -> [String] {
        let (wasAlive, dead) = try presence.register(id)
        let now = simulation.time
        registration.withLock { registration in
            if !wasAlive, registration.at != nil { registration.revivedAt = now }
            registration.at = now
            if let revived = registration.revivedAt, now - revived < Self.reconcilesAfterRevival { registration.all = true }
        }
        return dead
    }

    private func suspect(_ topic: FanoutTopic) { registration.withLock { _ = $0.suspects.insert(topic) } }

    func presenceJoin(_ topic: FanoutTopic, user: String, info: String?, excluding: String) throws(RoomStoreError) -> Bool {
        do throws(RoomStoreError) {
            let now = simulation.time
            let fresh = registration.withLock { $0.at.map { now - $0 < SimulatedPresence.ttl / 2 } ?? false }
            if !fresh { _ = try register() }
            return try presence.join(topic, node: id, user: user, info: info, excluding: excluding)
        } catch {
            suspect(topic)
            throw error
        }
    }

    func presenceLeave(_ topic: FanoutTopic, user: String, excluding: String) throws(RoomStoreError) -> Bool {
        do throws(RoomStoreError) {
            return try presence.leave(topic, node: id, user: user, excluding: excluding)
        } catch {
            suspect(topic)
            throw error
        }
    }

    func presenceMembers(_ topic: FanoutTopic, limit: Int) throws(RoomStoreError) -> [(user: String, info: String?)] {
        try presenceMembers([topic], limit: limit)[0]
    }

    func presenceMembers(_ topics: [FanoutTopic], limit: Int) throws(RoomStoreError) -> [[(user: String, info: String?)]] {
        guard !topics.isEmpty else { return [] }
        return try presence.members(topics, live: try presence.live(id), limit: limit)
    }

    func presenceSweep(local: [FanoutTopic: [String: String?]]) throws(RoomStoreError) -> [PresenceFanoutEvent] {
        let dead = try register()
        return try presence.cleanup(local.keys.sorted { "\($0)" < "\($1)" }, dead: dead)
    }

    var presenceNeedsReconcile: Bool { registration.withLock { !$0.suspects.isEmpty || $0.all } }

    func presenceSuspect(_ topic: FanoutTopic) { suspect(topic) }

    func presenceReconcile(local: [FanoutTopic: [String: String?]]) throws(RoomStoreError) -> [PresenceFanoutEvent] {
        let (suspected, all) = registration.withLock { registration in
            defer {
                registration.suspects = []
                registration.all = false
            }
            return (registration.suspects, registration.all)
        }
        let order = (all ? Set(local.keys).union(suspected) : suspected).sorted { "\($0)" < "\($1)" }
        guard !order.isEmpty else { return [] }
        let now = simulation.time
        let announce = registration.withLock { $0.revivedAt.map { now - $0 < Self.reconcilesAfterRevival } ?? false }
        do throws(RoomStoreError) {
            _ = try register()
            return try presence.reconcile(order, node: id, local: local, announce: announce)
        } catch {
            registration.withLock { registration in
                registration.suspects.formUnion(order)
                if all { registration.all = true }
            }
            throw error
        }
    }
}
