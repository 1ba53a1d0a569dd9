import Foundation
import RealtimeServer
import Redis

/// Starting a server as one node of a cluster: what `realtime-server --redis URL` does, for any
/// executable that runs nodes (the demo runs its own).
public enum ClusterNode {
    /// Starts a `RealtimeServer` for `options`: with `options.redis`, one node of the cluster on
    /// that Redis (`RedisRoomStore` for rooms' history, `RedisFanout` for events between nodes);
    /// with `options.redisCluster`, the same on a Redis Cluster (`RedisClusterConnection`,
    /// sharded pub/sub);
    /// with `options.dataDirectory`, one node keeping its rooms in that folder
    /// (`SQLiteRoomStore`); else one node in memory. A Redis that does not answer yet is logged
    /// and tried again on each use.
    ///
    /// - Parameters:
    ///   - options: the server's options (`redis`, `node`, apps, port…).
    ///   - log: connection and cluster log lines, or `nil`.
    ///   - warn: lines to show even when `log` is off (Redis not reachable yet).
    ///   - configure: more changes to the hub's configuration (its pong timeout, limits), after
    ///     the cluster's store and bus are set.
    /// - Throws: `RedisError.invalidEndpoint` for a bad `--redis` or `--redis-cluster`, `RoomStoreError.unavailable`
    ///   (or a file error) when the data folder cannot be made or opened, `WebSocketError` when
    ///   the server cannot listen.
    public static func start(options: RealtimeServerOptions, log: (@Sendable (String) -> Void)?,
                             warn: @escaping @Sendable (String) -> Void,
                             configure: (inout RealtimeHub.Configuration) -> Void = { _ in }) throws -> RealtimeServer {
        let store: RedisRoomStore
        let fanout: RedisFanout
        if let text = options.redisCluster {
            let seeds = try clusterSeeds(text)
            let connection = RedisClusterConnection(seeds: seeds)
            do {
                try connection.refreshSlotMap()
                log?("cluster node on Redis Cluster (\(connection.slotMap?.shards.count ?? 0) shard(s), found from \(seeds.map(\.description).joined(separator: ", ")))")
            } catch {
                warn("Redis Cluster not reachable yet (\(error)); rooms' history calls will retry it and the cluster bus reconnects by itself")
            }
            store = RedisRoomStore(redis: connection)
            fanout = RedisFanout(cluster: seeds, log: warn)
        } else if let text = options.redis {
            let endpoint = try RedisEndpoint(parsing: text)
            let connection = RedisConnection(endpoint: endpoint)
            do {
                _ = try connection.command("PING")
                log?("cluster node on Redis at \(endpoint)")
            } catch {
                warn("Redis not reachable yet (\(error)); rooms' history calls will retry it and the cluster bus reconnects by itself")
            }
            store = RedisRoomStore(redis: connection)
            fanout = RedisFanout(endpoint: endpoint, log: warn)
        } else {
            guard let folder = options.dataDirectory else { return try RealtimeServer(options: options, configure: configure, log: log) }
            do {
                // Rooms' history is the app's data: the folder is the server's user's alone.
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            } catch {
                throw RoomStoreError.unavailable("cannot make the data folder \(folder): \((error as NSError).localizedDescription)")
            }
            let store = try SQLiteRoomStore(path: (folder as NSString).appendingPathComponent("rooms.sqlite3"))
            log?("rooms kept in \(folder) (\(store.bytes) bytes of events)")
            return try RealtimeServer(options: options, configure: { configuration in
                configuration.roomStore = store
                configure(&configuration)
            }, log: log)
        }
        return try RealtimeServer(options: options, configure: { configuration in
            configuration.roomStore = store
            configuration.fanout = fanout
            configure(&configuration)
        }, log: log)
    }

    /// `--redis-cluster`'s seeds: `host:port` (or `redis://host:port`) separated by commas, at
    /// most `RedisClusterConnection.maxMapCandidates` (more are never asked).
    ///
    /// - Throws: `RedisError.invalidEndpoint` for a seed that is not a TCP address (a cluster
    ///   speaks TCP: its bus is a port beside each node's).
    public static func clusterSeeds(_ text: String) throws(RedisError) -> [RedisEndpoint] {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
        guard !parts.isEmpty, parts.count <= RedisClusterConnection.maxMapCandidates else { throw .invalidEndpoint(text) }
        return try parts.map { part throws(RedisError) in
            let endpoint = try RedisEndpoint(parsing: part.hasPrefix("redis://") ? part : "redis://" + part)
            guard case .tcp = endpoint else { throw .invalidEndpoint(part) }
            return endpoint
        }
    }
}
