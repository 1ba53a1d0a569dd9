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
    /// Most masters followed (`RedisClusterConnection.maxNodes`): a map naming more (a hostile
    /// or broken node's) gets a subscriber for the first ones only, and the channels of the
    /// others wait unplaced.
    public static let maxShards = RedisClusterConnection.maxNodes

    private struct State {
        var wanted: Set<String> = []
        /// The subscriber of each master in the map.
        var shards: [RedisEndpoint: RedisSubscriber] = [:]
        /// Where each channel of the set is followed (none while its slot has no master).
        private(set) var placed: [String: RedisEndpoint] = [:]
        /// The placed channels by slot, so that a moved slot finds its own at once.
        private var placedBySlot: [Int: Set<String>] = [:]
        /// Channels of the set followed nowhere: their slot had no master, or its master
        /// dropped them (a moved slot); placed again at the next look.
        var unplaced: Set<String> = []
        /// The shards whose subscriber is ready.
        var ready: Set<RedisEndpoint> = []
        /// The map the channels were last placed by.
        var map: RedisSlotMap?
        /// A slot moved or a shard was lost: the map is read again at the next look.
        var stale = true
        var lastCheck: ContinuousClock.Instant?
        var running = false
        var stopping = false

        /// Places `channel` on `master`, or nowhere.
        mutating func place(_ channel: String, on master: RedisEndpoint?) {
            let slot = RedisClusterSlot.of(channel)
            if let master {
                placed[channel] = master
                placedBySlot[slot, default: []].insert(channel)
            } else if placed.removeValue(forKey: channel) != nil {
                placedBySlot[slot]?.remove(channel)
                if placedBySlot[slot]?.isEmpty == true { placedBySlot[slot] = nil }
            }
        }

        /// Places `channel` where it belongs now: its slot's master in `map` when that master
        /// has a subscriber, nowhere when there is none (then among the unplaced) or when it left
        /// the set.
        ///
        /// - Parameter leaving: subscribers of masters just taken out of `shards`.
        /// - Returns: the subscribers to take it from and give it to; `nil` when it stays.
        mutating func replace(_ channel: String, leaving: [RedisEndpoint: RedisSubscriber] = [:]) -> (drop: RedisSubscriber?, add: RedisSubscriber?)? {
            let isWanted = wanted.contains(channel)
            let target = isWanted ? (map?.shard(forSlot: RedisClusterSlot.of(channel))?.master).flatMap { shards[$0] == nil ? nil : $0 } : nil
            if isWanted, target == nil { unplaced.insert(channel) } else { unplaced.remove(channel) }
            let current = placed[channel]
            guard target != current else { return nil }
            place(channel, on: target)
            return (current.flatMap { shards[$0] ?? leaving[$0] }, target.flatMap { shards[$0] })
        }

        /// The channels of `slot` placed on `master`.
        func placed(inSlot slot: Int, on master: RedisEndpoint) -> [String] {
            (placedBySlot[slot] ?? []).filter { placed[$0] == master }
        }
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

    /// Each master of the map as last read, the slot ranges it serves, whether its subscriber
    /// is ready, and how long its connection has been silent (`RedisSubscriber.silence`; `nil`
    /// while not connected); by first slot.
    public var shards: [(master: RedisEndpoint, slots: [ClosedRange<Int>], ready: Bool, silence: Duration?)] {
        let (shards, ready, map) = state.withLock { ($0.shards, $0.ready, $0.map) }
        return shards.map { master, subscriber in
            (master, map?.shards.first { $0.master == master }?.slots.sorted { $0.lowerBound < $1.lowerBound } ?? [], ready.contains(master), subscriber.silence)
        }.sorted { ($0.slots.first?.lowerBound ?? Int.max) < ($1.slots.first?.lowerBound ?? Int.max) }
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
        let change = state.withLock { state in state.stopping ? nil : state.replace(channel) }
        change?.drop?.unsubscribe(channel)
        change?.add?.subscribe(channel)
    }

    /// One look: reads the map again when it is stale, a shard is down or
    /// `mapCheckInterval` passed, then starts the new masters' subscribers, moves the channels
    /// whose slot changed master and stops the subscribers of masters that left the map.
    private func check() {
        let now = ContinuousClock.now
        let due = state.withLock { state -> Bool in
            guard !state.stopping else { return false }
            let degraded = state.stale || state.ready.count < state.shards.count || state.shards.isEmpty || !state.unplaced.isEmpty
            return degraded || state.lastCheck.map { now - $0 >= Self.mapCheckInterval } ?? true
        }
        guard due else { return }
        state.withLock { $0.lastCheck = now; $0.stale = false }
        try? cluster.refreshSlotMap()
        guard let map = cluster.slotMap else {
            state.withLock { $0.stale = true }
            return
        }
        let masters = Set(map.shards.prefix(Self.maxShards).map(\.master))
        // New masters' subscribers, made outside the lock and started after the placement.
        let known = state.withLock { Set($0.shards.keys) }
        var made: [RedisEndpoint: RedisSubscriber] = [:]
        for master in masters.subtracting(known) {
            made[master] = RedisSubscriber(endpoint: master, timeout: timeout, pingInterval: pingInterval, sharded: true) { [weak self] event in
                self?.received(event, from: master)
            }
        }
        let placement = state.withLock { state -> (moves: [(channel: String, drop: RedisSubscriber?, add: RedisSubscriber?)], gone: [RedisSubscriber])? in
            guard !state.stopping else { return nil }
            state.shards.merge(made) { old, _ in old }
            let leaving = state.shards.filter { !masters.contains($0.key) }
            for master in leaving.keys {
                state.shards[master] = nil
                state.ready.remove(master)
            }
            // Every channel when the map changed, else those waiting for a place.
            let changed = state.map != map || !made.isEmpty || !leaving.isEmpty
            state.map = map
            var moves: [(channel: String, drop: RedisSubscriber?, add: RedisSubscriber?)] = []
            for channel in changed ? state.wanted : state.unplaced {
                if let move = state.replace(channel, leaving: leaving) { moves.append((channel, move.drop, move.add)) }
            }
            return (moves, Array(leaving.values))
        }
        // Stopped meanwhile: the subscribers made here were never merged, and never start.
        guard let placement else { return }
        for move in placement.moves {
            move.drop?.unsubscribe(move.channel)
            move.add?.subscribe(move.channel)
        }
        for subscriber in made.values { subscriber.start() }
        for subscriber in placement.gone { subscriber.stop() }
    }

    /// Takes channels off their master (it dropped them, refused them, or never took them):
    /// out of its subscriber's set, so that placing them there again subscribes anew, and left
    /// for the next look to place. On `queue`.
    private func unplace(_ which: (State) -> [String]) {
        let (dropped, subscribers) = state.withLock { state -> ([String], [RedisSubscriber?]) in
            state.stale = true
            let dropped = which(state)
            let subscribers = dropped.map { state.placed[$0].flatMap { state.shards[$0] } }
            for channel in dropped {
                state.place(channel, on: nil)
                state.unplaced.insert(channel)
            }
            return (dropped, subscribers)
        }
        for (channel, subscriber) in zip(dropped, subscribers) { subscriber?.unsubscribe(channel) }
    }

    /// A shard's event: its readiness recorded; a moved slot unplaces that slot's channels
    /// there, a refusal its channel (both make the map stale, as a loss does); all but
    /// `.slotMoved` passed on.
    private func received(_ event: RedisSubscriber.Event, from master: RedisEndpoint) {
        switch event {
        case .slotMoved(let slot):
            // On the placement queue, in order with the looks that place channels.
            queue.async { [weak self] in self?.unplace { $0.placed(inSlot: slot, on: master) } }
            return
        case .refused(let channel, _):
            queue.async { [weak self] in self?.unplace { $0.placed[channel] == master ? [channel] : [] } }
        case .ready:
            state.withLock { state in
                if state.shards[master] != nil { state.ready.insert(master) }
            }
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
