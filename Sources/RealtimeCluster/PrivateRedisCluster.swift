import Foundation
import Glibc
import Redis
import Spawn
import SystemSupport

/// A private Redis Cluster for tests: `masters` masters with `replicasPerMaster` replicas each,
/// `redis-server` processes on loopback TCP ports (a cluster needs TCP: each node also listens
/// on its port + 10,000 for the cluster bus), joined with `redis-cli --cluster create`, in one
/// temporary directory. No persistence. Stopped by their pids. Debian's `redis-server` package
/// provides both binaries (`scripts/setup --test-peers`).
public final class PrivateRedisCluster: Sendable {
    /// Every node's address, masters first as `redis-cli` was given them.
    public let endpoints: [RedisEndpoint]
    /// The nodes' directory (removed by `stop`).
    public let directory: String
    /// Masters, as asked.
    public let masters: Int
    /// Replicas of each master, as asked.
    public let replicasPerMaster: Int
    private let processes: [Locked<ChildProcess?>]

    /// Starts the nodes, joins them and waits until every node says `cluster_state:ok`, serves
    /// all 16,384 slots and lists every master with its replicas.
    ///
    /// - Parameters:
    ///   - masters: masters (3 by default, the fewest Redis Cluster accepts).
    ///   - replicasPerMaster: replicas of each (1 by default).
    ///   - nodeTimeout: `cluster-node-timeout` in milliseconds: how long a master may be
    ///     unreachable before its replica is promoted (2,000 by default, short for tests).
    ///   - timeout: how long to wait for the cluster, in seconds.
    /// - Throws: `PrivateRedis.StartFailure` when a node does not start, the cluster is not
    ///   made, or it is not `ok` in time.
    public init(masters: Int = 3, replicasPerMaster: Int = 1, nodeTimeout: Int = 2000, timeout: Double = 30) throws {
        var template = Array("/tmp/private-redis-cluster.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw PrivateRedis.StartFailure(description: "mkdtemp failed: errno \(errno)") }
        directory = String(cString: made)
        self.masters = masters
        self.replicasPerMaster = replicasPerMaster
        let count = masters * (1 + replicasPerMaster)
        let ports = try Self.freePorts(count)
        endpoints = ports.map { .tcp(host: "127.0.0.1", port: $0) }
        processes = ports.map { _ in Locked(nil) }
        do {
            for (index, port) in ports.enumerated() {
                let child = try ChildProcess("/usr/bin/env", [
                    "redis-server", "--port", String(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                    "--cluster-config-file", "\(directory)/nodes-\(port).conf", "--cluster-node-timeout", String(nodeTimeout),
                    "--save", "", "--appendonly", "no", "--dir", directory, "--daemonize", "no", "--loglevel", "warning",
                ], standardOutput: .pipe, standardError: .pipe)
                processes[index].withLock { $0 = child }
            }
            let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
            for endpoint in endpoints { try Self.waitForPing(endpoint, until: deadline) }
            let create = try ChildProcess.run(
                "/usr/bin/env", ["redis-cli", "--cluster", "create"] + ports.map { "127.0.0.1:\($0)" }
                    + ["--cluster-replicas", String(replicasPerMaster), "--cluster-yes"], timeout: .seconds(Int(timeout)))
            guard create.status == 0 else {
                throw PrivateRedis.StartFailure(description: "redis-cli --cluster create: \(create.standardOutput.suffix(500)) \(create.standardError.suffix(500))")
            }
            try waitUntilOK(until: deadline)
        } catch {
            stop()
            throw error
        }
    }

    deinit { stop() }

    /// Stops every node (SIGKILL) and removes the directory. Idempotent.
    public func stop() {
        for process in processes { process.killProcess() }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Waits until every node says `cluster_state:ok`, maps every slot, and lists every master
    /// with its replicas.
    ///
    /// - Throws: `PrivateRedis.StartFailure` past `deadline`.
    public func waitUntilOK(until deadline: ContinuousClock.Instant) throws {
        while true {
            let ready = endpoints.allSatisfy { endpoint in
                let probe = RedisConnection(endpoint: endpoint, timeout: 500)
                guard let info = try? probe.command("CLUSTER", "INFO").string, info.contains("cluster_state:ok"),
                      let slots = try? probe.command("CLUSTER", "SLOTS"),
                      let map = try? RedisSlotMap(clusterSlots: slots, from: endpoint) else { return false }
                return map.coversEverySlot && map.shards.count == masters && map.shards.allSatisfy { $0.replicas.count == replicasPerMaster }
            }
            if ready { return }
            guard ContinuousClock.now < deadline else {
                throw PrivateRedis.StartFailure(description: "the cluster in \(directory) was not ok in time")
            }
            usleep(50_000)
        }
    }

    private static func waitForPing(_ endpoint: RedisEndpoint, until deadline: ContinuousClock.Instant) throws {
        let probe = RedisConnection(endpoint: endpoint, timeout: 500)
        while (try? probe.command("PING")) != .status("PONG") {
            guard ContinuousClock.now < deadline else { throw PrivateRedis.StartFailure(description: "\(endpoint) did not answer PING in time") }
            usleep(20_000)
        }
    }

    /// `count` loopback ports that are free, each with its cluster bus port (+10,000) free too.
    private static func freePorts(_ count: Int) throws -> [Int] {
        var ports: [Int] = []
        var candidate = 20_000 + Int(getpid() % 5000) * 2
        while ports.count < count, candidate < 30_000 {
            if PrivateCluster.bindLoopback(port: candidate) != nil, PrivateCluster.bindLoopback(port: candidate + 10_000) != nil { ports.append(candidate) }
            candidate += 1
        }
        guard ports.count == count else { throw PrivateRedis.StartFailure(description: "no \(count) free loopback ports in 20000…29999") }
        return ports
    }
}
