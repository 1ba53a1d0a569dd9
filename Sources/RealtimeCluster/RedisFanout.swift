import Dispatch
import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport

/// The cluster's bus on Redis pub/sub (DESIGN.md, "Scale-out"; `RealtimeFanout`): one
/// subscriber connection per node following exactly the rooms and channels the node has members
/// for, and one connection for publishing channel events. On a Redis Cluster
/// (`init(cluster:)`), pub/sub is sharded: each topic's channel shares its keys' hash tag, is
/// published with `SPUBLISH` on its slot's shard and followed with `SSUBSCRIBE` on a connection
/// per shard (`RedisShardedSubscriber`); a shard that is down stops only its topics, and each
/// shard that connects (again) has the hub catch its rooms up. Room events are published by
/// `RedisRoomStore`'s append script, in the step that keeps them, and every node (the
/// publisher's too) delivers them from the bus, in the history's order. Channel events carry
/// their node's id: that node delivered them to its own subscribers at once and skips them.
///
/// Channels, each under its topic's hash tag (the presence hashes' too): a room's
/// `rt:{<app length>:<app>:<room>}:live` (its keys' tag), a channel's
/// `rt:{ch:<app length>:<app>:<channel>}:live`, an app's `rt:{app:<app length>:<app>}:live`.
/// Messages are `FanoutCodec`'s. A message that does not
/// decode is logged and dropped: a room catches it up from the store at its next check.
public final class RedisFanout: RealtimeFanout {
    final class Router: Sendable {
        /// Followed pub/sub channels and what they carry.
        let topics = Locked<[String: FanoutTopic]>([:])
        let hub = Locked<(any FanoutReceiver)?>(nil)
        let log: (@Sendable (String) -> Void)?
        /// This node's id on the bus: its own channel events are skipped (delivered already).
        let node = Crypto.hex(Crypto.randomBytes(8))

        init(log: (@Sendable (String) -> Void)?) { self.log = log }

        static func comesBack(_ message: FanoutMessage) -> Bool {
            if case .presence = message { return true }
            return false
        }

        /// On a Redis Cluster, the shards' subscriber (set once, at `init(cluster:)`).
        let shards = Locked<RedisShardedSubscriber?>(nil)

        /// An event of the subscription (`shard`: the master it came from, on a cluster).
        func handle(_ event: RedisSubscriber.Event, shard: RedisEndpoint? = nil) {
            guard let hub = hub.withLock({ $0 }) else { return }
            switch event {
            case .message(let channel, let payload):
                guard let topic = topics.withLock({ $0[channel] }) else { return }
                do {
                    let (message, origin) = try FanoutCodec.decode(payload, topic: topic)
                    // A node delivers its own channel events and terminations itself; presence
                    // changes come back to it too, so every node tells them in Redis's order.
                    if origin == node, !Self.comesBack(message) { return }
                    hub.fanoutReceived(message)
                } catch {
                    log?("a message on \(channel.prefix(120)) not understood, dropped: \(error)")
                }
            case .subscribed(let channel):
                if let topic = topics.withLock({ $0[channel] }) { hub.fanoutFollowing(topic) }
            case .ready:
                if let shard { log?("Redis Cluster shard \(shard) ready") }
                hub.fanoutReady()
            case .lost(let error):
                // A shard down stops only its topics: the bus is lost when every shard is.
                if let shard, let shards = shards.withLock({ $0 }), shards.shards.contains(where: \.ready) {
                    log?("Redis Cluster shard \(shard) lost, its rooms and channels wait for it: \(error)")
                } else {
                    hub.fanoutLost("\(error)")
                }
            case .slotMoved:
                break
            case .refused(let channel, let message):
                if let shard { log?("Redis Cluster shard \(shard) refused to follow \(channel.prefix(120)) (tried again): \(message.prefix(200))") }
            }
        }
    }

    /// The subscription: one connection, or one per shard of a Redis Cluster.
    enum Subscription: Sendable {
        case single(RedisSubscriber)
        case sharded(RedisShardedSubscriber)

        func start() {
            switch self {
            case .single(let subscriber): subscriber.start()
            case .sharded(let subscriber): subscriber.start()
            }
        }

        func subscribe(_ channel: String) {
            switch self {
            case .single(let subscriber): subscriber.subscribe(channel)
            case .sharded(let subscriber): subscriber.subscribe(channel)
            }
        }

        func unsubscribe(_ channel: String) {
            switch self {
            case .single(let subscriber): subscriber.unsubscribe(channel)
            case .sharded(let subscriber): subscriber.unsubscribe(channel)
            }
        }

        func stop() {
            switch self {
            case .single(let subscriber): subscriber.stop()
            case .sharded(let subscriber): subscriber.stop()
            }
        }

        var channels: Set<String> {
            switch self {
            case .single(let subscriber): subscriber.channels
            case .sharded(let subscriber): subscriber.channels
            }
        }
    }

    let router: Router
    private let subscriber: Subscription
    /// Runs the presence scripts (one Redis, or the cluster's masters).
    let publisher: any RedisClient
    /// The presence scripts for `publisher` (`PUBLISH`, or `SPUBLISH` on a cluster).
    let presenceScripts: PresenceScripts
    /// Channel events and terminations go out in order on this queue, so a slow Redis never
    /// holds the thread that published (a socket thread, for a client event).
    private let sending = DispatchQueue(label: "RedisFanout.sending")
    /// The queue's own connection: a publish waiting out a timeout never holds the presence
    /// scripts (which run on `publisher`, on the hub's lane).
    private let sender: any RedisClient
    private let backlog = Locked((count: 0, bytes: 0))
    /// Most bytes of publishes waiting for Redis.
    public static let maxBacklogBytes = 64 * 1024 * 1024
    /// Set by `stop`: what is still queued is dropped, so a stop never waits out a backlog.
    private let stopped = Locked(false)
    /// Most publishes waiting for Redis; past it (or `maxBacklogBytes`) `publish` refuses
    /// (logged by the hub).
    public static let maxBacklog = 10_000
    /// Topics whose presence registration may differ from this node's members (a call failed):
    /// reconciled at the next sweep. Bounded: past `maxSuspects`, every topic is.
    let suspects = Locked((topics: Set<FanoutTopic>(), all: false))
    static let maxSuspects = 10_000
    /// Whether this node was ever registered among the live nodes (a missing registration
    /// means it was taken for dead only after that), and when it last was.
    let registered = Locked<(ever: Bool, at: ContinuousClock.Instant?)>((false, nil))
    /// When this node last found itself taken for dead (`reconcilesAfterRevival`).
    let revivedAt = Locked<ContinuousClock.Instant?>(nil)

    /// Creates a bus to the Redis at `endpoint`; nothing connects before `start`.
    ///
    /// - Parameters:
    ///   - endpoint: the cluster's Redis.
    ///   - timeout: connect, command and ping deadline in milliseconds.
    ///   - log: where undecodable messages are reported.
    public init(endpoint: RedisEndpoint, timeout: Int = 2000, log: (@Sendable (String) -> Void)? = nil) {
        let router = Router(log: log)
        self.router = router
        self.subscriber = .single(RedisSubscriber(endpoint: endpoint, timeout: timeout, pingInterval: Self.pingInterval) { router.handle($0) })
        self.publisher = RedisConnection(endpoint: endpoint, timeout: timeout)
        self.sender = RedisConnection(endpoint: endpoint, timeout: timeout)
        self.presenceScripts = PresenceScripts(sharded: false)
    }

    /// Creates a bus on a Redis Cluster (Redis 7, sharded pub/sub); nothing connects before
    /// `start`.
    ///
    /// - Parameters:
    ///   - seeds: one or more of the cluster's nodes (`--redis-cluster host:port,…`).
    ///   - timeout: connect, command and ping deadline in milliseconds, per node.
    ///   - log: where undecodable messages and shards lost or ready are reported.
    public init(cluster seeds: [RedisEndpoint], timeout: Int = 2000, log: (@Sendable (String) -> Void)? = nil) {
        let router = Router(log: log)
        self.router = router
        let subscriber = RedisShardedSubscriber(cluster: RedisClusterConnection(seeds: seeds, timeout: timeout), timeout: timeout,
                                                pingInterval: Self.pingInterval) { [weak router] shard, event in
            router?.handle(event, shard: shard)
        }
        self.subscriber = .sharded(subscriber)
        self.publisher = RedisClusterConnection(seeds: seeds, timeout: timeout)
        self.sender = RedisClusterConnection(seeds: seeds, timeout: timeout)
        self.presenceScripts = PresenceScripts(sharded: true)
        router.shards.withLock { $0 = subscriber }
    }

    /// Starts following for `receiver`, the hub (`RealtimeFanout`).
    public func start(_ receiver: any FanoutReceiver) {
        router.hub.withLock { $0 = receiver }
        subscriber.start()
    }

    /// Follows a room or channel (`RealtimeFanout`).
    public func follow(_ topic: FanoutTopic) {
        let channel = Self.channel(of: topic)
        router.topics.withLock { $0[channel] = topic }
        subscriber.subscribe(channel)
    }

    /// Stops following (`RealtimeFanout`).
    public func unfollow(_ topic: FanoutTopic) {
        let channel = Self.channel(of: topic)
        router.topics.withLock { $0[channel] = nil }
        subscriber.unsubscribe(channel)
    }

    /// Publishes a channel event to every node (`RealtimeFanout`).
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses.
    public func publish(_ event: ChannelFanoutEvent) throws(RoomStoreError) {
        try send(Self.channel(of: .channel(app: event.app, channel: event.channel)), FanoutCodec.encode(event, origin: router.node))
    }

    /// Queues one `PUBLISH` (in order with the others); a failure is logged.
    ///
    /// - Throws: `RoomStoreError.unavailable` when the message is over `FanoutCodec.maxMessageSize`
    ///   or `maxBacklog` publishes are waiting already (nothing queued).
    private func send(_ channel: String, _ message: String) throws(RoomStoreError) {
        guard message.utf8.count <= FanoutCodec.maxMessageSize else {
            throw .unavailable("a message of \(message.utf8.count) bytes, more than the bus carries (\(FanoutCodec.maxMessageSize))")
        }
        let size = message.utf8.count
        let queued = backlog.withLock { backlog -> Bool in
            guard backlog.count < Self.maxBacklog, backlog.bytes + size <= Self.maxBacklogBytes else { return false }
            backlog.count += 1
            backlog.bytes += size
            return true
        }
        guard queued else { throw .unavailable("\(Self.maxBacklog) publishes or \(Self.maxBacklogBytes) bytes already wait for Redis") }
        let (sender, router, backlog, stopped) = (sender, router, backlog, stopped)
        sending.async {
            defer { backlog.withLock { $0.count -= 1; $0.bytes -= size } }
            guard !stopped.withLock({ $0 }) else { return }
            let verb = sender.isSharded ? "SPUBLISH" : "PUBLISH"
            do {
                if case .error(let refusal) = try sender.command([verb, channel, message], key: channel) {
                    router.log?("Redis refused \(verb) on \(channel.prefix(120)): \(refusal)")
                }
            } catch {
                router.log?("a \(verb) on \(channel.prefix(120)) did not reach Redis (the other nodes miss it): \(error)")
            }
        }
    }

    /// Asks every other node to close the user's connections (`RealtimeFanout`).
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses.
    public func terminate(app: String, user: String) throws(RoomStoreError) {
        try send(Self.channel(of: .app(app)), "t \(router.node) \(user.utf8.count)\n" + user)
    }

    /// Asks every other node to kick `user` from `room` (`RealtimeFanout`).
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses.
    public func kick(app: String, room: String, user: String, reason: String?) throws(RoomStoreError) {
        try send(Self.channel(of: .app(app)), FanoutCodec.encodeKick(room: room, user: user, reason: reason, origin: router.node))
    }

    /// Stops the subscriber; the hub hears nothing more (`RealtimeFanout`).
    public func stop() {
        stopped.withLock { $0 = true }
        subscriber.stop()
        sending.sync {}
        router.hub.withLock { $0 = nil }
        publisher.disconnect()
        sender.disconnect()
    }

    /// Idle milliseconds before the subscriber pings Redis: often, so that a Redis that stops
    /// answering is seen within `maxSilence` (a `PING` costs Redis microseconds).
    static let pingInterval = 250

    /// Longest silence of the subscriber's connection that still counts as responsive: three
    /// ping intervals.
    public static let maxSilence = Duration.milliseconds(3 * pingInterval)

    /// Whether Redis answered the subscriber within `maxSilence` (`RealtimeFanout`): false as
    /// soon as a frozen Redis has let three pings go unanswered, well before the connection's
    /// `timeout` declares it lost. The subscriber's thread also runs the hub's handlers, so a
    /// hub that holds that thread past `maxSilence` (waiting for its lock) reads as silent too:
    /// such a node is not delivering the bus's events either.
    /// On a Redis Cluster, whether one shard at least answered so (the others' topics wait:
    /// `shardStatus` says which).
    public var isResponsive: Bool {
        switch subscriber {
        case .single(let single): single.silence.map { $0 <= Self.maxSilence } ?? false
        case .sharded(let sharded): sharded.shards.contains { Self.answers(ready: $0.ready, silence: $0.silence) }
        }
    }

    /// Each Redis Cluster shard's master and whether it is up: its subscriber ready and
    /// answering within `maxSilence` (`RealtimeFanout`; empty on one Redis).
    public var shardStatus: [FanoutShardStatus] {
        guard case .sharded(let sharded) = subscriber else { return [] }
        return sharded.shards.map { shard in
            FanoutShardStatus(name: shard.master.description, slots: shard.slots.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ","),
                              up: Self.answers(ready: shard.ready, silence: shard.silence))
        }
    }

    /// Whether a shard's subscriber is ready and its master answered within `maxSilence`.
    static func answers(ready: Bool, silence: Duration?) -> Bool {
        ready && (silence.map { $0 <= maxSilence } ?? false)
    }

    /// The pub/sub channels followed now (for tests and metrics).
    public var followedChannels: Set<String> { subscriber.channels }

    /// The pub/sub channel of a topic's live events, on its hash tag's slot.
    static func channel(of topic: FanoutTopic) -> String { topic.hashTag + ":live" }
}
