import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport

/// The cluster's bus on Redis pub/sub (DESIGN.md, "Scale-out"; `RealtimeFanout`): one
/// subscriber connection per node following exactly the rooms and channels the node has members
/// for, and one connection for publishing channel events. Room events are published by
/// `RedisRoomStore`'s append script, in the step that keeps them, and every node (the
/// publisher's too) delivers them from the bus, in the history's order. Channel events carry
/// their node's id: that node delivered them to its own subscribers at once and skips them.
///
/// Channels: a room's `rt:{<app length>:<app>:<room>}:live` (its keys' hash tag), a channel's
/// `rt:ch:<app length>:<app>:<channel>`. Messages are `FanoutCodec`'s. A message that does not
/// decode is logged and dropped: a room catches it up from the store at its next check.
public final class RedisFanout: RealtimeFanout {
    private final class Router: Sendable {
        /// Followed pub/sub channels and what they carry.
        let topics = Locked<[String: FanoutTopic]>([:])
        let hub = Locked<RealtimeHub?>(nil)
        let log: (@Sendable (String) -> Void)?
        /// This node's id on the bus: its own channel events are skipped (delivered already).
        let node = Crypto.hex(Crypto.randomBytes(8))

        init(log: (@Sendable (String) -> Void)?) { self.log = log }

        func handle(_ event: RedisSubscriber.Event) {
            guard let hub = hub.withLock({ $0 }) else { return }
            switch event {
            case .message(let channel, let payload):
                guard let topic = topics.withLock({ $0[channel] }) else { return }
                do {
                    let (message, origin) = try FanoutCodec.decode(payload, topic: topic)
                    guard origin != node else { return }
                    hub.fanoutReceived(message)
                } catch {
                    log?("a message on \(channel.prefix(120)) not understood, dropped: \(error)")
                }
            case .subscribed(let channel):
                if let topic = topics.withLock({ $0[channel] }) { hub.fanoutFollowing(topic) }
            case .ready:
                hub.fanoutReady()
            case .lost(let error):
                hub.fanoutLost("\(error)")
            }
        }
    }

    private let router: Router
    private let subscriber: RedisSubscriber
    private let publisher: RedisConnection

    /// Creates a bus to the Redis at `endpoint`; nothing connects before `start`.
    ///
    /// - Parameters:
    ///   - endpoint: the cluster's Redis.
    ///   - timeout: connect, command and ping deadline in milliseconds.
    ///   - log: where undecodable messages are reported.
    public init(endpoint: RedisEndpoint, timeout: Int = 2000, log: (@Sendable (String) -> Void)? = nil) {
        let router = Router(log: log)
        self.router = router
        self.subscriber = RedisSubscriber(endpoint: endpoint, timeout: timeout) { router.handle($0) }
        self.publisher = RedisConnection(endpoint: endpoint, timeout: timeout)
    }

    /// Starts following for `hub` (`RealtimeFanout`).
    public func start(_ hub: RealtimeHub) {
        router.hub.withLock { $0 = hub }
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
        let reply: RedisValue
        do {
            reply = try publisher.command("PUBLISH", Self.channel(of: .channel(app: event.app, channel: event.channel)), FanoutCodec.encode(event, origin: router.node))
        } catch {
            throw .unavailable("\(error)")
        }
        if case .error(let message) = reply { throw .unavailable("Redis refused PUBLISH: \(message)") }
    }

    /// Stops the subscriber; the hub hears nothing more (`RealtimeFanout`).
    public func stop() {
        subscriber.stop()
        router.hub.withLock { $0 = nil }
        publisher.disconnect()
    }

    /// The pub/sub channels followed now (for tests and metrics).
    public var followedChannels: Set<String> { subscriber.channels }

    static func channel(of topic: FanoutTopic) -> String {
        switch topic {
        case .room(let app, let room): return RedisRoomStore.liveChannel(app: app, room: room)
        case .channel(let app, let channel): return "rt:ch:\(app.utf8.count):\(app):\(channel)"
        }
    }
}
