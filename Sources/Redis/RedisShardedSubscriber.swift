import Dispatch
import SystemSupport

/// Pub/sub on a Redis Cluster's sharded channels (Redis 7's `SSUBSCRIBE`: a channel is served
/// by the master of its slot, and a message published there with `SPUBLISH` reaches only that
/// shard, so pub/sub grows with the shards instead of being broadcast to every node).
///
/// One sharded `RedisSubscriber` per master of the slot map (each on its own thread, reporting
/// its shard up or down even with no channel), each following the channels of the set whose
/// slots it serves. The set is the caller's, as for `RedisSubscriber`. The map is the
/// `cluster` connection's: read again when a master reports a moved slot (a resharding, or a
/// failover seen by the old master's `sunsubscribe`), while a shard is down (a replica is
/// promoted after the cluster's node timeout), and every `mapCheckInterval` in any case; each
/// channel whose slot changed master is moved to the new master's subscriber, which reports it
/// `.subscribed` once followed there.
///
/// Handlers run on the shards' threads, each shard's in the order its master sent, tagged with
/// the shard's master.
public final class RedisShardedSubscriber: Sendable {
    /// The connection whose slot map places the channels.
    public let cluster: RedisClusterConnection
    /// Each shard's connect, write and ping deadline in milliseconds.
    public let timeout: Int
    /// Silence in milliseconds after which a shard's `PING` checks its connection.
    public let pingInterval: Int
    /// How often the map is read again while every shard is up (5 s); while one is down or a
    /// slot moved, every `recheckInterval`.
    public static let mapCheckInterval = Duration.seconds(5)
    /// How often a degraded subscription looks at the map again (250 ms).
    public static let recheckInterval = Duration.milliseconds(250)

    private struct State {
        var wanted: Set<String> = []
        /// The subscriber of each master in the map.
        var shards: [RedisEndpoint: RedisSubscriber] = [:]
        /// Where each channel of the set is followed (none while its slot has no master).
        var placed: [String: RedisEndpoint] = [:]
        /// The shards whose subscriber is ready.
        var ready: Set<RedisEndpoint> = []
        /// The map the channels were last placed by.
        var map: RedisSlotMap?
        /// A slot moved or a shard was lost: the map is read again at the next look.
        var stale = true
        var lastCheck: ContinuousClock.Instant?
        var running = false
        var stopping = false
    }

    private let state = Locked(State())
    private let handler: @Sendable (RedisEndpoint, RedisSubscriber.Event) -> Void
    /// Every change of the placement runs here, in order: `subscribe`, `unsubscribe` and the
    /// map's checks.
    private let queue = DispatchQueue(label: "RedisShardedSubscriber")

    /// Creates a subscriber; nothing connects before `start()`.
    ///
    /// - Parameters:
    ///   - cluster: the connection whose slot map places the channels (its seeds find the cluster).
    ///   - timeout: each shard's connect, write and ping deadline in milliseconds.
    ///   - pingInterval: idle milliseconds before a shard's `PING`.
    ///   - handler: called on a shard's thread for every event of that shard (`.slotMoved` is
    ///     handled here and not passed on).
    public init(cluster: RedisClusterConnection, timeout: Int = 2000, pingInterval: Int = 1000,
                handler: @escaping @Sendable (RedisEndpoint, RedisSubscriber.Event) -> Void) {
        self.cluster = cluster
        self.timeout = max(1, timeout)
        self.pingInterval = max(1, pingInterval)
        self.handler = handler
    }

    /// Starts following the map and the shards (once).
    public func start() {
        let starting = state.withLock { state -> Bool in
            guard !state.running, !state.stopping else { return false }
            state.running = true
            return true
        }
        guard starting else { return }
        queue.async { [weak self] in self?.look() }
    }

    /// The map's look, then the next one after `recheckInterval` (until `stop`).
    private func look() {
        guard !state.withLock({ $0.stopping }) else { return }
        check()
        let interval = Self.recheckInterval.components
        let milliseconds = Int(interval.seconds * 1000 + interval.attoseconds / 1_000_000_000_000_000)
        queue.asyncAfter(deadline: .now() + .milliseconds(milliseconds)) { [weak self] in self?.look() }
    }

    /// Adds a channel to the set (nothing when it is in it).
    public func subscribe(_ channel: String) {
        guard state.withLock({ $0.wanted.insert(channel).inserted }) else { return }
        queue.async { [weak self] in self?.place(channel) }
    }

    /// Removes a channel from the set (nothing when it is not in it).
    public func unsubscribe(_ channel: String) {
        guard state.withLock({ $0.wanted.remove(channel) != nil }) else { return }
        queue.async { [weak self] in self?.place(channel) }
    }

    /// The channels followed or to be.
    public var channels: Set<String> { state.withLock { $0.wanted } }

    /// Each master of the map as last read, whether its subscriber is ready, and how long its
    /// connection has been silent (`RedisSubscriber.silence`; `nil` while not connected).
    public var shards: [(master: RedisEndpoint, ready: Bool, silence: Duration?)] {
        let (shards, ready) = state.withLock { ($0.shards, $0.ready) }
        return shards.map { ($0.key, ready.contains($0.key), $0.value.silence) }.sorted { $0.master.description < $1.master.description }
    }

    /// Stops every shard's thread; waits for their handlers running now to return. Must not be
    /// called from a handler.
    public func stop() {
        state.withLock { state in
            state.stopping = true
            state.running = false
        }
        // Every placement queued before this returns first; none runs after.
        queue.sync {}
        for subscriber in state.withLock({ Array($0.shards.values) }) { subscriber.stop() }
    }

    // MARK: - Placement (on `queue`)

    /// Follows or drops one channel where the map places it now.
    private func place(_ channel: String) {
        let change = state.withLock { state -> (drop: RedisSubscriber?, add: RedisSubscriber?) in
            guard !state.stopping else { return (nil, nil) }
            let wanted = state.wanted.contains(channel)
            let target = wanted ? state.map?.shard(forSlot: RedisClusterSlot.of(channel))?.master : nil
            let current = state.placed[channel]
            guard target != current else { return (nil, nil) }
            state.placed[channel] = target
            if wanted, target == nil { state.stale = true }
            return (current.flatMap { state.shards[$0] }, target.flatMap { state.shards[$0] })
        }
        change.drop?.unsubscribe(channel)
        change.add?.subscribe(channel)
    }

    /// One look: reads the map again when it is stale, a shard is down or
    /// `mapCheckInterval` passed, then starts the new masters' subscribers, moves the channels
    /// whose slot changed master and stops the subscribers of masters that left the map.
    private func check() {
        let now = ContinuousClock.now
        let due = state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            let degraded = state.stale || state.ready.count < state.shards.count || state.shards.isEmpty
            return degraded || state.lastCheck.map { now - $0 >= Self.mapCheckInterval } ?? true
        }
        guard due else { return }
        state.withLock { $0.lastCheck = now; $0.stale = false }
        try? cluster.refreshSlotMap()
        guard let map = cluster.slotMap else {
            state.withLock { $0.stale = true }
            return
        }
        let masters = Set(map.shards.map(\.master))
        // New masters' subscribers, made outside the lock and started after the placement.
        let known = state.withLock { Set($0.shards.keys) }
        var made: [RedisEndpoint: RedisSubscriber] = [:]
        for master in masters.subtracting(known) {
            made[master] = RedisSubscriber(endpoint: master, timeout: timeout, pingInterval: pingInterval, sharded: true) { [weak self] event in
                self?.received(event, from: master)
            }
        }
        let (moves, gone) = state.withLock { state -> ([(channel: String, drop: RedisSubscriber?, add: RedisSubscriber?)], [RedisSubscriber]) in
            guard !state.stopping else { return ([], []) }
            state.shards.merge(made) { old, _ in old }
            var moves: [(channel: String, drop: RedisSubscriber?, add: RedisSubscriber?)] = []
            if state.map != map || !made.isEmpty {
                state.map = map
                for channel in state.wanted {
                    let target = map.shard(forSlot: RedisClusterSlot.of(channel))?.master
                    let current = state.placed[channel]
                    guard target != current else { continue }
                    state.placed[channel] = target
                    moves.append((channel, current.flatMap { state.shards[$0] }, target.flatMap { state.shards[$0] }))
                }
            }
            let leaving = state.shards.filter { !masters.contains($0.key) }
            for master in leaving.keys {
                state.shards[master] = nil
                state.ready.remove(master)
            }
            return (moves, Array(leaving.values))
        }
        for move in moves {
            move.drop?.unsubscribe(move.channel)
            move.add?.subscribe(move.channel)
        }
        for subscriber in made.values { subscriber.start() }
        for subscriber in gone { subscriber.stop() }
    }

    /// A shard's event: its readiness recorded, a moved slot or a loss makes the map stale;
    /// all but `.slotMoved` passed on.
    private func received(_ event: RedisSubscriber.Event, from master: RedisEndpoint) {
        switch event {
        case .slotMoved:
            state.withLock { $0.stale = true }
            return
        case .ready:
            state.withLock { _ = $0.ready.insert(master) }
        case .lost:
            state.withLock { state in
                state.ready.remove(master)
                state.stale = true
            }
        case .message, .subscribed:
            break
        }
        handler(master, event)
    }
}
