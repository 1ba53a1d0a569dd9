import Glibc
import RealtimeCluster
import RealtimeServer
import Redis
import TestSupport

/// Server nodes of one cluster on a private `redis-server`: each with its own store connection
/// (`RedisRoomStore`) and bus (`RedisFanout`), as `realtime-server --redis` runs them.
final class RedisNodes: Sendable {
    let redis: PrivateRedis
    let nodes: [ServerFixture]
    /// The first node.
    var fixture: ServerFixture { nodes[0] }

    /// - Parameters:
    ///   - count: how many nodes.
    ///   - configure: changes to each node's hub configuration, after the store and bus are set.
    init(count: Int = 1, configure: (inout RealtimeHub.Configuration) -> Void = { _ in }) throws {
        let redis = try PrivateRedis()
        self.redis = redis
        nodes = try (0..<count).map { _ in
            let store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
            let fanout = RedisFanout(endpoint: redis.endpoint)
            return try ServerFixture {
                $0.roomStore = store
                $0.fanout = fanout
                configure(&$0)
            }
        }
    }

    deinit { redis.stop() }

    /// Whether every node's bus is connected and its Redis answers, within `eventually`'s time.
    func ready() async -> Bool { await eventually { nodes.allSatisfy { $0.server.hub.isFanoutHealthy } } }

    /// Stops Redis answering (SIGSTOP: what a fork for a snapshot, a failover or a network
    /// stall does), until `thaw`.
    func freeze() { kill(redis.processIdentifier, SIGSTOP) }

    /// Lets Redis answer again (SIGCONT).
    func thaw() { kill(redis.processIdentifier, SIGCONT) }
}
