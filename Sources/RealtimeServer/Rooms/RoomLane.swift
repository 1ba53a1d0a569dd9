import Dispatch
import SystemSupport

/// The hub's one ordered path to its room store and the cluster's presence registry (issue
/// 31): every call that may wait on Redis runs here, on a serial queue of its own, never on
/// the WebSocket service thread and never under the hub's lock. A frozen Redis then holds the
/// lane (room requests wait behind it, or are refused once `maxBacklog` wait), while pings,
/// channels and everything else that needs no store go on.
///
/// Serial, so it orders what needs an order: on one node an event's append and its delivery
/// are one step of the lane, so delivery order is id order; a join's read of the store never
/// runs between another event's append and its delivery.
///
/// One lane per shard of the store: a room's requests run on the lane of the Redis
/// Cluster master serving it (`RoomHistoryStore.shard`), and so does the node's work about it
/// (catch-ups, quiet checks, its presence: `submitPerShard`, `LaneJob.shard`); the node's work
/// about no one room (store expiry, a channel's presence without a sharded bus) and every room
/// of a store reached whole run on the lane `""`. A frozen master then holds its own rooms'
/// work only; each lane is serial, so the orders above hold per room.
///
/// Fair: jobs wait per client, and the next to run is that of the client that used
/// the lane least lately (`LaneSchedule`). What a job used is the bytes it moved (`meter`:
/// history pages, replay pages, events kept), or its run time at `bytesPerSecond` when that
/// is more. A crowd paging history as fast as its budgets allow then delays a member's send
/// by about one job, not by everything the crowd queued.
final class RoomLane: Sendable {
    /// Most jobs waiting or running at once on one shard's lane: past it a room request is
    /// refused with the retriable `store_full` (the Swift client retries a refused join with
    /// backoff), unless a client that used the lane more has a job waiting, which is refused in
    /// its place.
    let maxBacklog: Int
    /// Most jobs one connection has waiting on one shard's lane (`maxPerConnection` by default).
    let maxPerClient: Int

    /// The client the node's own work (sweeps, catch-ups, presence views, the HTTP API) is
    /// charged to, and the shard of the lane it runs on.
    static let node = ""
    /// Most room requests of one connection waiting at once by default: a client rejoining
    /// every room it may hold after a drop (`RealtimeHub.maxRoomsPerConnection`, 100) and a few
    /// more requests besides. Fairness does not rest on it (the schedule does): it bounds what
    /// one connection holds in memory.
    static let maxPerConnection = 128
    /// What a second of a job's run counts as, in bytes, when the job moved fewer: 50 MB, about
    /// what the lane reads from Redis in a second (`maximumTimeCost` at most). A send (a few
    /// hundred bytes, a fraction of a millisecond) counts little.
    static let bytesPerSecond = 50_000_000.0
    /// The least a job counts, in bytes.
    static let minimumCost = 256.0
    /// The most a job's run time counts, in bytes (100 ms of it): a job that waited on a
    /// store that stopped answering is not its client's doing, and must not put its client
    /// last for long after.
    static let maximumTimeCost = 5_000_000.0
    /// Most shards with a lane of their own (`RedisClusterConnection.maxNodes`); past it, rooms
    /// of further shards run on the lane `""`.
    static let maxShards = 64

    private let label: String
    /// Runs the lanes' jobs instead of their Dispatch queues, when set (a simulation).
    private let executor: (any HubExecutor)?
    /// The time source of the fair schedule (the hub's clock).
    private let now: @Sendable () -> ContinuousClock.Instant
    private let shardOf: @Sendable (_ app: String, _ room: String) -> String
    private let displaced: @Sendable () -> Void
    private let lanes: Locked<[String: ShardLane]>
    /// Keys of `submitOnce` jobs queued and not started yet.
    private let waiting = Locked(Set<String>())
    /// Rooms with jobs waiting or running: the shard their lane is, and how many (`pin`); as
    /// many rooms as jobs at most.
    private let pins = Locked<[String: (shard: String, jobs: Int)]>([:])
    /// The running job's record of the lane a queue serves (`meter`): the record, not the
    /// lane, which holds the queue (the queue keeps its specific values alive).
    private static let current = DispatchSpecificKey<Locked<RunningJob>>()
    private typealias RunningJob = (count: Int, bytes: Int, since: ContinuousClock.Instant?)

    /// One shard's serial lane: its queue, its fair schedule, and the job running.
    private final class ShardLane: Sendable {
        let name: String
        let queue: DispatchQueue
        let schedule: Locked<LaneSchedule<LaneJob>>
        /// Jobs running now (0 or 1), the bytes the running one metered, when it started.
        let running = Locked<RunningJob>((0, 0, nil))

        init(name: String, label: String, maxBacklog: Int, maxPerClient: Int) {
            self.name = name
            queue = DispatchQueue(label: name.isEmpty ? label : "\(label) \(name)")
            schedule = Locked(LaneSchedule(maxJobs: maxBacklog, maxPerClient: maxPerClient))
        }

        /// Runs the fairest job waiting, if any, on `now`'s clock; returns it once run.
        func runNext(now: @Sendable () -> ContinuousClock.Instant) -> LaneJob? {
            guard let (client, job) = schedule.withLock({ $0.next(at: now()) }) else { return nil }
            let start = now()
            running.withLock { $0 = (1, 0, start) }
            job.run()
            let end = now()
            let bytes = running.withLock { running in
                defer { running = (0, 0, nil) }
                return running.bytes
            }
            let took = (end - start).components
            let seconds = Double(took.seconds) + Double(took.attoseconds) / 1e18
            let cost = max(Double(bytes), min(seconds * RoomLane.bytesPerSecond, RoomLane.maximumTimeCost), RoomLane.minimumCost)
            schedule.withLock { $0.charge(client, cost: cost, at: end) }
            return job
        }
    }

    /// Creates a lane.
    ///
    /// - Parameters:
    ///   - label: the queues' label (seen in debuggers and backtraces; a shard's adds its name).
    ///   - maxBacklog: most jobs waiting or running at once per shard (at least 1).
    ///   - maxPerClient: most jobs of one connection waiting at once per shard (at least 1).
    ///   - executor: runs the lanes' jobs in place of their Dispatch queues (a simulation), or
    ///     `nil`.
    ///   - now: the fair schedule's clock (the hub's).
    ///   - displaced: called for each job refused after it was queued, to make room for a
    ///     client that used the lane less (the hub counts it as a refusal).
    ///   - shardOf: the shard serving a room (`RoomHistoryStore.shard`); `""` for every room by
    ///     default.
    init(label: String = "RealtimeServer.RoomLane", maxBacklog: Int, maxPerClient: Int = RoomLane.maxPerConnection,
         executor: (any HubExecutor)? = nil, now: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
         displaced: @escaping @Sendable () -> Void = {},
         shardOf: @escaping @Sendable (_ app: String, _ room: String) -> String = { _, _ in "" }) {
        self.label = label
        self.executor = executor
        self.now = now
        self.displaced = displaced
        self.maxBacklog = max(1, maxBacklog)
        self.maxPerClient = max(1, maxPerClient)
        self.shardOf = shardOf
        lanes = Locked([:])
        _ = lane(Self.node)
    }

    /// The shard's lane, made on first use (`""`'s past `maxShards`).
    private func lane(_ shard: String) -> ShardLane {
        lanes.withLock { lanes in
            if let lane = lanes[shard] { return lane }
            let name = lanes.count < Self.maxShards || lanes[Self.node] == nil ? shard : Self.node
            if let lane = lanes[name] { return lane }
            let lane = ShardLane(name: name, label: label, maxBacklog: maxBacklog, maxPerClient: maxPerClient)
            lane.queue.setSpecific(key: Self.current, value: lane.running)
            lanes[name] = lane
            return lane
        }
    }

    /// Queues `job` on its room's shard's lane (`job.shard`'s without a room; the node's
    /// without either), unless its client has `maxPerClient` waiting there, or `maxBacklog`
    /// wait and none of them belongs to a client that used the lane more (one of those is then
    /// refused in its place: its `refused` runs here, with no lock held).
    ///
    /// - Returns: whether the job was queued (`false`: the caller runs `job.refused`).
    func submit(_ job: LaneJob) -> Bool {
        var job = job
        if let room = job.room {
            job.shard = pin(room)
            job.pinned = [room]
        }
        return enqueue(job)
    }

    /// Queues `job` on the lane of `job.shard`; its `pinned` rooms are unpinned once it is done.
    private func enqueue(_ job: LaneJob) -> Bool {
        let lane = lane(job.shard ?? Self.node)
        let admission = lane.schedule.withLock { $0.enqueue(job, client: job.client, node: job.client == Self.node, at: now()) }
        switch admission {
        case .refused:
            unpin(job.pinned)
            return false
        case .displaced(let other):
            unpin(other.pinned)
            displaced()
            other.refused()
        case .queued: break
        }
        // One run per job queued; each takes the fairest job waiting then (none when a job
        // was displaced meanwhile).
        let run: @Sendable () -> Void = { [self] in
            if let done = lane.runNext(now: now) { unpin(done.pinned) }
        }
        if let executor { executor.async(on: lane.queue.label, run) } else { lane.queue.async(execute: run) }
        return true
    }

    /// Queues the node's `job` once per shard serving the rooms of `items` (`room` names each
    /// one's), each run given that shard's items (in their order), unless a job of `key` waits
    /// on that shard's lane already (its items are then left to the next call): node work about
    /// many rooms (a sweep's check, the catch-up after the bus came back) then waits only on
    /// the masters it reads, and runs in order with each room's requests.
    ///
    /// - Returns: the items whose job was not queued (a full lane, or one of `key` waiting).
    @discardableResult
    func submitPerShard<Item: Sendable>(_ key: String, _ items: [Item], room: (Item) -> (app: String, room: String),
                                        _ job: @escaping @Sendable (_ items: [Item]) -> Void) -> [Item] {
        var groups: [(shard: String, items: [Item], rooms: [(app: String, room: String)])] = []
        var index: [String: Int] = [:]
        for item in items {
            let named = room(item)
            let shard = pin(named)
            if let at = index[shard] {
                groups[at].items.append(item)
                groups[at].rooms.append(named)
            } else {
                index[shard] = groups.count
                groups.append((shard, [item], [named]))
            }
        }
        var left: [Item] = []
        for (shard, group, rooms) in groups {
            let onceKey = "\(key) @\(shard)"
            guard waiting.withLock({ $0.insert(onceKey).inserted }) else {
                unpin(rooms)
                left += group
                continue
            }
            let forget: @Sendable () -> Void = { [waiting] in waiting.withLock { _ = $0.remove(onceKey) } }
            var lanejob = LaneJob(client: Self.node, run: {
                forget()
                job(group)
            }, refused: forget)
            lanejob.shard = shard
            lanejob.pinned = rooms
            if !enqueue(lanejob) {
                forget()
                left += group
            }
        }
        return left
    }

    /// The shard whose lane takes a job of `room`: the one its jobs in flight run on, else the
    /// store's (`shardOf`). While a Redis Cluster slot moves (a failover, a resharding), a
    /// room's requests so stay on one lane, in order, until those sent before the move are
    /// done. Counts the job in flight until `unpin`.
    private func pin(_ room: (app: String, room: String)) -> String {
        pins.withLock { pins in
            let key = "\(room.app.utf8.count):\(room.app):\(room.room)"
            let shard = pins[key]?.shard ?? shardOf(room.app, room.room)
            pins[key] = (shard, (pins[key]?.jobs ?? 0) + 1)
            return shard
        }
    }

    /// Jobs of `rooms` are done (run, refused or displaced): one each.
    private func unpin(_ rooms: [(app: String, room: String)]) {
        guard !rooms.isEmpty else { return }
        pins.withLock { pins in
            for room in rooms {
                let key = "\(room.app.utf8.count):\(room.app):\(room.room)"
                guard let pin = pins[key] else { continue }
                pins[key] = pin.jobs > 1 ? (pin.shard, pin.jobs - 1) : nil
            }
        }
    }

    /// Queues the node's own `job` on `shard`'s lane (`""`: the node's; dropped when the lane
    /// is full).
    ///
    /// - Returns: whether the job was queued.
    @discardableResult
    func submit(shard: String? = nil, _ job: @escaping @Sendable () -> Void) -> Bool {
        submit(LaneJob(client: Self.node, shard: shard, run: job, refused: {}))
    }

    /// Counts `bytes` moved by the job running now on the calling lane (nothing elsewhere).
    func meter(_ bytes: Int) {
        DispatchQueue.getSpecific(key: Self.current)?.withLock { $0.bytes += bytes }
    }

    /// Queues the node's `job` under `key`, unless a job with that key is queued and not
    /// started yet (or the lane is full): periodic work (a sweep's check, a room's catch-up)
    /// never piles up behind a store that does not answer. The key is free again as the job
    /// starts, so what changes while it runs is caught by the next one.
    ///
    /// - Parameters:
    ///   - room: the one room the job is about, whose shard's lane runs it; `nil` (several
    ///     rooms, or none): the lane `""`.
    /// - Returns: whether `job` was queued.
    @discardableResult
    func submitOnce(_ key: String, room: (app: String, room: String)? = nil, _ job: @escaping @Sendable () -> Void) -> Bool {
        guard waiting.withLock({ $0.insert(key).inserted }) else { return false }
        let forget: @Sendable () -> Void = { [waiting] in waiting.withLock { _ = $0.remove(key) } }
        let queued = submit(LaneJob(client: Self.node, room: room, run: {
            forget()
            job()
        }, refused: forget))
        if !queued { forget() }
        return queued
    }

    /// How long `perform` waits for its job to start before it gives up on it (5 s): an HTTP
    /// publish behind a store that stopped answering is refused (retriable) rather than held for
    /// as long as the jobs before it take.
    static let performStartDeadline: Duration = .seconds(5)

    /// Runs `body` on the room's shard's lane (the lane `""` with no room), as the node's own
    /// work, and waits for its answer, unless the lane is full or the job has not started within
    /// `startDeadline` (it is then withdrawn: `body` never runs). Once started it is waited for
    /// (the store's own deadlines bound it). For callers that may wait (the HTTP API's
    /// handlers, an embedding app), never from a lane or under the hub's lock.
    ///
    /// - Returns: `body`'s answer, or `nil` when the lane was full or the job did not start in
    ///   time (`body` not run).
    /// - Throws: what `body` throws.
    func perform<Value: Sendable, Failure: Error>(room: (app: String, room: String)? = nil, startDeadline: Duration = RoomLane.performStartDeadline,
                                                  _ body: @escaping @Sendable () throws(Failure) -> Value) throws(Failure) -> Value? {
        let answer = Locked<Result<Value, Failure>?>(nil)
        // Whether the job started, or was given up on before it did: decided once, under the lock.
        let start = Locked<(started: Bool, abandoned: Bool)>((false, false))
        let done = DispatchSemaphore(value: 0)
        let queued = submit(LaneJob(client: Self.node, room: room, run: {
            guard start.withLock({ state -> Bool in
                if !state.abandoned { state.started = true }
                return state.started
            }) else { return }
            let result: Result<Value, Failure>
            do throws(Failure) { result = .success(try body()) } catch { result = .failure(error) }
            answer.withLock { $0 = result }
            done.signal()
        }, refused: { done.signal() }))
        guard queued else { return nil }
        let milliseconds = Int(max(.zero, min(startDeadline, .seconds(3600))) / .milliseconds(1))
        if done.wait(timeout: .now() + .milliseconds(milliseconds)) == .timedOut {
            let abandoned = start.withLock { state -> Bool in
                if !state.started { state.abandoned = true }
                return state.abandoned
            }
            if abandoned { return nil }
            done.wait()
        }
        return try answer.withLock { $0 }?.get()
    }

    /// What is over the lane's bounds now, one line per shard lane, none when nothing: jobs
    /// waiting past `maxBacklog`, or one connection's past `maxPerClient`.
    var overBounds: [String] {
        lanes.withLock { Array($0.values) }.compactMap { lane in
            let (jobs, largest) = lane.schedule.withLock { $0.backlog }
            guard jobs > maxBacklog || largest > maxPerClient else { return nil }
            return "\(label) \(lane.name.isEmpty ? "(its own lane: one store, or the node's work)" : lane.name): \(jobs) jobs waiting (at most \(maxBacklog)), \(largest) for one connection (at most \(maxPerClient))"
        }.sorted()
    }

    /// Jobs waiting or running now, on every shard's lane.
    var depth: Int {
        lanes.withLock { Array($0.values) }.reduce(0) { sum, lane in
            sum + lane.schedule.withLock { $0.count } + lane.running.withLock { $0.count }
        }
    }

    /// The shards whose lane has run one job for `threshold` or longer (a store that stopped
    /// answering), with how long: `/health` names them.
    func stalledShards(after threshold: Duration) -> [(shard: String, running: Duration)] {
        let now = self.now()
        return lanes.withLock { Array($0.values) }.compactMap { lane in
            guard let since = lane.running.withLock({ $0.since }), now - since >= threshold else { return nil }
            return (lane.name, now - since)
        }.sorted { $0.shard < $1.shard }
    }
}

/// Work a client's request leaves for the lane once the hub's lock is released.
struct LaneJob: Sendable {
    /// Whom the job's use of the lane is charged to: the connection's socket id, or
    /// `RoomLane.node`.
    var client: String
    /// The room whose shard's lane runs the job; `nil`: `shard`'s lane.
    var room: (app: String, room: String)?
    /// The shard whose lane runs a job with no `room` (a presence topic's); `nil`: the lane
    /// `""` (the node's own work, several rooms at once). Set to the room's by `submit`.
    var shard: String?
    /// The rooms whose pins the job holds until it is done (`RoomLane.submit`).
    var pinned: [(app: String, room: String)] = []
    /// The work, run on the lane.
    var run: @Sendable () -> Void
    /// Run instead when the lane does not take it, or takes it out again to make room for a
    /// client that used it less: the request's refusal.
    var refused: @Sendable () -> Void

    init(client: String, room: (app: String, room: String)? = nil, shard: String? = nil,
         run: @escaping @Sendable () -> Void, refused: @escaping @Sendable () -> Void) {
        self.client = client
        self.room = room
        self.shard = shard
        self.run = run
        self.refused = refused
    }
}
