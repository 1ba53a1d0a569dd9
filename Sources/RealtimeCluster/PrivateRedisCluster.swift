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
    /// `cluster-node-timeout`, in milliseconds.
    public let nodeTimeout: Int
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
        self.nodeTimeout = nodeTimeout
        let count = masters * (1 + replicasPerMaster)
        let ports = try Self.freePorts(count)
        endpoints = ports.map { .tcp(host: "127.0.0.1", port: $0) }
        processes = ports.map { _ in Locked(nil) }
        do {
            for index in ports.indices { try startNode(index) }
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

    /// Starts node `index` on its port and its cluster config file (kept across restarts: the
    /// node comes back with its id, and learns the cluster's changes from the others).
    private func startNode(_ index: Int) throws {
        guard case .tcp(_, let port) = endpoints[index] else { return }
        let child = try ChildProcess("/usr/bin/env", [
            "redis-server", "--port", String(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
            "--cluster-config-file", "\(directory)/nodes-\(port).conf", "--cluster-node-timeout", String(nodeTimeout),
            // A shard that is down stops only its slots (the other shards go on serving).
            "--cluster-require-full-coverage", "no",
            "--save", "", "--appendonly", "no", "--dir", directory, "--daemonize", "no", "--loglevel", "warning",
        ], standardOutput: .pipe, standardError: .pipe)
        processes[index].withLock { $0 = child }
    }

    /// Kills every node (SIGKILL) and starts them all again on their config files: the same
    /// cluster, every key lost (no persistence), as after a power loss. Waits until it is ok.
    ///
    /// - Parameter timeout: how long to wait for the cluster, in seconds.
    /// - Throws: `PrivateRedis.StartFailure` when a node does not start or the cluster is not
    ///   `ok` in time.
    public func restartAll(timeout: Double = 30) throws {
        for process in processes { process.killProcess() }
        for index in endpoints.indices { try startNode(index) }
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        for endpoint in endpoints { try Self.waitForPing(endpoint, until: deadline) }
        try waitUntilOK(until: deadline)
    }

    /// Moves a slot and its keys to another master, as `redis-cli --cluster reshard` does
    /// (Redis Cluster specification, "Live resharding"): the target importing and the source
    /// migrating, the keys moved in batches with `MIGRATE`, then the slot given to the target on
    /// every master. Between the steps it waits `pause`, so traffic meets each of them.
    ///
    /// - Parameters:
    ///   - slot: the slot.
    ///   - target: the master that takes it.
    ///   - pause: the wait between the steps.
    /// - Throws: `PrivateRedis.StartFailure` when the slot has no master or a step is refused;
    ///   `RedisError` when a node does not answer.
    public func migrate(slot: Int, to target: RedisEndpoint, pause: Duration = .zero) throws {
        let targetConnection = RedisConnection(endpoint: target)
        let map = try RedisSlotMap(clusterSlots: try targetConnection.command("CLUSTER", "SLOTS"), from: target)
        guard let source = map.shard(forSlot: slot)?.master, source != target, case .tcp(let host, let port) = target else {
            throw PrivateRedis.StartFailure(description: "slot \(slot) has no master other than \(target)")
        }
        let sourceConnection = RedisConnection(endpoint: source)
        guard let sourceID = try sourceConnection.command("CLUSTER", "MYID").string, let targetID = try targetConnection.command("CLUSTER", "MYID").string else {
            throw PrivateRedis.StartFailure(description: "CLUSTER MYID did not answer")
        }
        func step(_ connection: RedisConnection, _ arguments: String...) throws {
            let reply = try connection.command(arguments)
            if case .error(let message) = reply { throw PrivateRedis.StartFailure(description: "\(arguments.joined(separator: " ")): \(message)") }
        }
        func wait() { if pause > .zero { usleep(UInt32(pause.components.seconds * 1_000_000 + pause.components.attoseconds / 1_000_000_000_000)) } }
        try step(targetConnection, "CLUSTER", "SETSLOT", String(slot), "IMPORTING", sourceID)
        try step(sourceConnection, "CLUSTER", "SETSLOT", String(slot), "MIGRATING", targetID)
        wait()
        while true {
            let keys = try sourceConnection.command("CLUSTER", "GETKEYSINSLOT", String(slot), "100").array?.compactMap(\.string) ?? []
            if keys.isEmpty { break }
            let reply = try sourceConnection.command(["MIGRATE", host, String(port), "", "0", "5000", "KEYS"] + keys)
            if case .error(let message) = reply { throw PrivateRedis.StartFailure(description: "MIGRATE: \(message)") }
        }
        wait()
        // The target first, then the source (which drops the slot), then the other masters.
        try step(targetConnection, "CLUSTER", "SETSLOT", String(slot), "NODE", targetID)
        try step(sourceConnection, "CLUSTER", "SETSLOT", String(slot), "NODE", targetID)
        for shard in map.shards where shard.master != source && shard.master != target {
            try step(RedisConnection(endpoint: shard.master), "CLUSTER", "SETSLOT", String(slot), "NODE", targetID)
        }
    }

    /// Each node's process id, in `endpoints`' order (0 for a node killed and not started
    /// again), for benchmarks that read its CPU time.
    public var processIdentifiers: [pid_t] { processes.map { $0.withLock { $0?.processIdentifier ?? 0 } } }

    /// Kills one node with SIGKILL, as a crash: when it is a master, its replica is promoted
    /// after the node timeout, and its slots are unserved meanwhile.
    ///
    /// - Parameter endpoint: one of `endpoints`.
    public func kill(_ endpoint: RedisEndpoint) {
        guard let index = endpoints.firstIndex(of: endpoint) else { return }
        processes[index].killProcess()
    }

    /// Starts a node that was killed again, on its port and config file: it rejoins the
    /// cluster (a master that was failed over comes back as its old replica's replica).
    ///
    /// - Parameter endpoint: one of `endpoints`.
    /// - Throws: `PrivateRedis.StartFailure` when it does not answer `PING` within 10 s.
    public func start(_ endpoint: RedisEndpoint) throws {
        guard let index = endpoints.firstIndex(of: endpoint), processes[index].withLock({ $0 == nil }) else { return }
        try startNode(index)
        try Self.waitForPing(endpoint, until: .now + .seconds(10))
    }

    /// Kills a master with SIGKILL once its replicas hold every write it took: its clients'
    /// writes paused (`CLIENT PAUSE … WRITE`), then every replica's replication offset waited
    /// for, then the kill. A failover that loses nothing, as opposed to `kill`, whose replica
    /// may lack the last writes (replication is asynchronous).
    ///
    /// - Parameters:
    ///   - master: one of `endpoints`, a master with replicas.
    ///   - timeout: how long the replicas may take to catch up.
    /// - Throws: `PrivateRedis.StartFailure` when they do not catch up in time (the master is
    ///   killed anyway); `RedisError` when a node does not answer.
    public func killAfterReplication(_ master: RedisEndpoint, timeout: Duration = .seconds(5)) throws {
        defer { kill(master) }
        let connection = RedisConnection(endpoint: master)
        _ = try connection.command("CLIENT", "PAUSE", String(Int(timeout.components.seconds) * 1000 + 1000), "WRITE")
        let deadline = ContinuousClock.now + timeout
        while true {
            // `master_repl_offset:N`, and each `slaveK:…,offset=N,…` line.
            let info = try connection.command("INFO", "replication").string ?? ""
            let lines = info.split(whereSeparator: \.isNewline)
            let offset = lines.first { $0.hasPrefix("master_repl_offset:") }.flatMap { Int($0.split(separator: ":")[1]) }
            let replicas = lines.filter { $0.hasPrefix("slave") && $0.contains("offset=") }.compactMap { line in
                line.split(separator: ",").first { $0.hasPrefix("offset=") }.flatMap { Int($0.dropFirst("offset=".count)) }
            }
            if let offset, !replicas.isEmpty, replicas.allSatisfy({ $0 >= offset }) { return }
            guard ContinuousClock.now < deadline else { throw PrivateRedis.StartFailure(description: "the replicas of \(master) did not catch up within \(timeout)") }
            usleep(10_000)
        }
    }

    /// Freezes one node with SIGSTOP (`running: false`) or thaws it with SIGCONT. A frozen
    /// replica still gets what already reached its socket, once thawed: for it to miss its
    /// master's writes, cut its link too (`CLIENT KILL TYPE replica` on the master), and kill
    /// the master before it is thawed.
    ///
    /// - Parameters:
    ///   - endpoint: one of `endpoints`.
    ///   - running: false to freeze, true to thaw.
    public func setRunning(_ endpoint: RedisEndpoint, _ running: Bool) {
        guard let index = endpoints.firstIndex(of: endpoint) else { return }
        processes[index].withLock { child in
            _ = child?.signal(running ? SIGCONT : SIGSTOP, toProcessGroup: false)
        }
    }

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
