// chaos-run: rooms losing nothing under a schedule of faults (issue 14, part 3).
//
// A two-node cluster (this executable's --serve-node, as `realtime-server --redis` runs) over a
// private Redis that keeps its data (append-only file, fsync before each answer), nginx in
// front, and the room-backend sample, all in the remote namespace of a NetworkLab; four
// `realtime join` processes in its local namespace, two over each of two veth links, each in
// two of three rooms and on one public channel; the app's server publishing through the HTTP
// API at a steady rate. Then faults, one after another, from: a node killed and restarted, a
// node moved away from (SIGTERM, 4200), Redis killed and restarted, 4201 and 4200 closes, link
// flaps, carrier loss, a client frozen with SIGSTOP past the server's timeouts, a client killed
// with SIGKILL and started again with its saved positions (`--state`). After each, it
// waits until every client is connected (and in its rooms again if it was dropped) with every
// event kept so far and the next one (the recovery time, from the fault's end), and in the end
// prints a table: faults by kind with their worst recovery, events published, received and
// replayed, and what was lost, duplicated or reordered, all of which must be 0 (exit 1
// otherwise). Needs root (network namespaces), redis-server and nginx (`scripts/setup
// --cluster`); `scripts/chaos` builds it in release and runs it. With --redis-cluster the nodes
// run on a private Redis Cluster (3 masters, 3 replicas) instead, and shard masters are killed
// and failed over in place of the Redis restarts.

import Dispatch
import Foundation
import Glibc
import NetworkLab
import RealtimeBackend
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import Spawn
import SystemSupport

if CommandLine.arguments.dropFirst().first == "--serve-node" {
    ServeNode.run(Array(CommandLine.arguments.dropFirst(2)))
}

let usage = """
    usage: chaos-run [--faults N] [--seed S] [--kind KIND]... [--redis-cluster] [--verbose]

    Runs N faults (13 of each kind by default: 117 over 9 kinds) against four realtime clients in
    rooms on a two-node cluster, then prints the table. --seed repeats a schedule (its targets and
    durations); the run prints the seed it used. --kind keeps only some kinds (node-kill,
    node-move, redis-restart, close-4201, close-4200, link-flap, carrier-loss, client-freeze,
    client-restart; with --redis-cluster, shard-kill and shard-failover in place of
    redis-restart). --redis-cluster runs the nodes on a private Redis Cluster of 3 masters and 3
    replicas (130 faults by default over its 10 kinds).
    --verbose prints the clients' state, error and reconnect lines as they come. Needs root,
    redis-server and nginx.
    """

var faultCount: Int?
var onRedisCluster = false
var onlyKinds: [FaultKind] = []
var verbose = false
var seed = UInt64(UInt32(truncatingIfNeeded: Int(Date().timeIntervalSince1970 * 1000)))
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--faults":
        guard let text = arguments.popFirst(), let count = Int(text), (1...10_000).contains(count) else {
            FileHandle.standardError.write(Data("chaos-run: --faults needs 1…10000\n".utf8))
            exit(2)
        }
        faultCount = count
    case "--redis-cluster":
        onRedisCluster = true
    case "--seed":
        guard let text = arguments.popFirst(), let value = UInt64(text) else {
            FileHandle.standardError.write(Data("chaos-run: --seed needs a number\n".utf8))
            exit(2)
        }
        seed = value
    case "--kind":
        guard let text = arguments.popFirst(), let kind = FaultKind.allCases.first(where: { $0.name == text }) else {
            FileHandle.standardError.write(Data("chaos-run: --kind needs one of \(FaultKind.allCases.map(\.name).joined(separator: ", "))\n".utf8))
            exit(2)
        }
        if !onlyKinds.contains(kind) { onlyKinds.append(kind) }
    case "--verbose":
        verbose = true
    case "-h", "--help":
        print(usage)
        exit(0)
    default:
        FileHandle.standardError.write(Data("chaos-run: unknown argument \(argument)\n\(usage)\n".utf8))
        exit(2)
    }
}

/// Writes one line to standard output at once.
@Sendable func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let start = ContinuousClock.now

/// One timeline line: seconds since the start, then the text.
@Sendable func log(_ text: String) {
    say(String(format: "%8.3f s  ", (ContinuousClock.now - start).seconds) + text)
}

/// What must be stopped before the process exits, last registered first.
let cleanups = Locked<[@Sendable () -> Void]>([])

@Sendable func cleanUp() {
    let actions = cleanups.withLock { actions in defer { actions = [] }; return actions }
    for action in actions.reversed() { action() }
}

func fail(_ text: String) -> Never {
    log("FAILED: \(text)")
    cleanUp()
    exit(1)
}

// Ctrl-C stops every process and removes the namespaces (the children have their own process
// groups: the terminal's SIGINT does not reach them).
let signalQueue = DispatchQueue(label: "chaos-run.signals")
let signalSources = [SIGINT, SIGTERM].map { number in
    signal(number, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: number, queue: signalQueue)
    source.setEventHandler {
        log("interrupted: stopping everything")
        cleanUp()
        exit(130)
    }
    source.resume()
    return source
}

if let reason = NetworkLab.unavailableReason { fail("network namespaces are not available: \(reason) (run as root)") }
let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
let buildDirectory = URL(fileURLWithPath: executable).deletingLastPathComponent()
let realtimePath = buildDirectory.appendingPathComponent("realtime").path
let roomBackendPath = buildDirectory.appendingPathComponent("room-backend").path
for path in [realtimePath, roomBackendPath] where !FileManager.default.isExecutableFile(atPath: path) {
    fail("\(path) is missing: build the realtime and room-backend products beside chaos-run (scripts/chaos does)")
}
guard let ipPath = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"].first(where: FileManager.default.isExecutableFile(atPath:)) else {
    fail("iproute2's ip is missing")
}

// MARK: - The bed

let lab: NetworkLab
do { lab = try NetworkLab() } catch { fail("cannot create the namespaces: \(error)") }
cleanups.withLock { $0.append { lab.close() } }
/// The two client links: `vethN` in the local namespace, `peerN` in the remote one.
let subnets = ["192.0.2", "198.51.100"]
do {
    for (index, subnet) in subnets.enumerated() {
        try lab.addVethLink("veth\(index)", peer: "peer\(index)")
        try lab.local.addAddress("\(subnet).2/24", to: "veth\(index)")
        try lab.remote.addAddress("\(subnet).1/24", to: "peer\(index)")
    }
} catch {
    fail("cannot set the links up: \(error)")
}
let inRemote = [ipPath, "netns", "exec", lab.remote.name]
let inLocal = [ipPath, "netns", "exec", lab.local.name]

let app = RealtimeApp(id: "chaos", key: "chaos-key", secret: "chaos-secret")
/// The server's activity timeout (seconds): a client silent this long is pinged, and closed
/// with 4201 if it does not answer within `ServeNode.pongTimeout`.
let activityTimeout = 2
let kindsAvailable = FaultKind.available(onRedisCluster: onRedisCluster)
if let refused = onlyKinds.first(where: { !kindsAvailable.contains($0) }) {
    fail("--kind \(refused.name) is not a fault of this run (\(onRedisCluster ? "on a Redis Cluster" : "on one Redis"))")
}
let faultTotal = faultCount ?? 13 * kindsAvailable.count
/// With --redis-cluster: the Redis Cluster, its nodes in the remote namespace (started from its
/// thread, they live there), on its loopback.
let redisCluster: PrivateRedisCluster?
do {
    redisCluster = onRedisCluster ? try lab.remote.run { try PrivateRedisCluster() } : nil
} catch {
    fail("cannot start the Redis Cluster: \(error)")
}
if let redisCluster { cleanups.withLock { $0.append { redisCluster.stop() } } }
let cluster: PrivateCluster
do {
    cluster = try PrivateCluster(nodes: 2, app: app, serverExecutable: executable, serverArguments: ["--serve-node"], loadBalancer: true,
                                 extraArguments: ["--activity-timeout", String(activityTimeout)], launcher: inRemote,
                                 balancerAddress: "0.0.0.0", persistentRedis: true, redisCluster: redisCluster?.endpoints)
} catch {
    fail("cannot start the cluster: \(error) (scripts/setup --cluster installs redis-server and nginx-light)")
}
cleanups.withLock { $0.append { cluster.stop() } }
guard let balancerPort = cluster.balancerPort else { fail("the cluster has no load balancer") }

let roomPattern = "chaos:{id}"
let history = 1000
let backendProcess: ChildProcess
do {
    backendProcess = try ChildProcess(inRemote[0], Array(inRemote.dropFirst()) + [
        roomBackendPath, "--app-id", app.id, "--app-key", app.key, "--app-secret", app.secret,
        "--room", "\(roomPattern),history=\(history)", "--host", "0.0.0.0", "--port", "0",
    ])
} catch {
    fail("cannot start room-backend: \(error)")
}
cleanups.withLock { $0.append { backendProcess.signal(SIGKILL) } }
guard let portLine = try? backendProcess.waitForLine(timeout: .seconds(30), where: { $0.hasPrefix("port ") }),
      let backendPort = Int(portLine.dropFirst(5)) else {
    fail("room-backend did not start: \(backendProcess.errorLines.suffix(5))")
}
let engine = redisCluster.map { "a Redis Cluster of 3 masters and 3 replicas (\($0.endpoints.map(\.description).joined(separator: ", ")))" } ?? "Redis with an append-only file"
log("cluster: nodes \(cluster.nodes.map { "\($0.name) :\($0.port)" }.joined(separator: ", ")), nginx :\(balancerPort), room-backend :\(backendPort), \(engine), in namespace \(lab.remote.name)")

let rooms = ["chaos:1", "chaos:2", "chaos:3"]
let channel = "chaos-ticker"
let echo: (@Sendable (String) -> Void)? = verbose ? { @Sendable line in log(line) } : nil
let clients: [ChaosClient]
/// The clients' `--state` files.
let stateFolder = FileManager.default.temporaryDirectory.appendingPathComponent("chaos-run-\(getpid())").path
do { try FileManager.default.createDirectory(atPath: stateFolder, withIntermediateDirectories: true) } catch { fail("cannot make \(stateFolder): \(error)") }
cleanups.withLock { $0.append { try? FileManager.default.removeItem(atPath: stateFolder) } }
do {
    clients = try (0..<4).map { index in
        let link = index / 2
        let host = "\(subnets[link]).1"
        return try ChaosClient(name: "c\(index)", rooms: [rooms[index % 3], rooms[(index + 1) % 3]], channel: channel, link: link,
                               url: "ws://\(host):\(balancerPort)/app/\(app.key)", authEndpoint: "http://\(host):\(backendPort)/rooms/auth",
                               command: inLocal + [realtimePath], stateFile: stateFolder + "/c\(index).json", echo: echo)
    }
} catch {
    fail("cannot start the clients: \(error)")
}
cleanups.withLock { $0.append { clients.forEach { $0.stop() } } }
for client in clients {
    log("client \(client.name): link veth\(client.link) (\(subnets[client.link]).2), rooms \(client.rooms.joined(separator: ", ")), channel \(channel)")
}

/// Waits until `condition` holds, polling every 5 ms; returns how long it took, or nil after `timeout`.
func waitFor(timeout: Duration, _ condition: () -> Bool) -> Duration? {
    let began = ContinuousClock.now
    while !condition() {
        if ContinuousClock.now - began > timeout { return nil }
        usleep(5_000)
    }
    return ContinuousClock.now - began
}

let allJoined = waitFor(timeout: .seconds(60)) {
    clients.allSatisfy { client in client.rooms.allSatisfy { (client.snapshot.rooms[$0]?.joins ?? 0) > 0 } }
}
if allJoined == nil {
    fail("the clients did not join their rooms within 60 s:\n    " + clients.map { "\($0.name): \($0.lastLines)" }.joined(separator: "\n    "))
}

let backend = RealtimeBackend(appKey: app.key, appSecret: app.secret)
do { try backend.room(roomPattern, history: history) } catch { fail("the rule: \(error)") }
let publisher = Publisher(api: "http://127.0.0.1:\(balancerPort)", app: app, backend: backend, rooms: rooms, channel: channel)
do { try lab.remote.run { publisher.start() } } catch { fail("cannot start the publisher: \(error)") }
cleanups.withLock { $0.append { publisher.stop() } }
log("publishing: one event to each room every \(Int(Publisher.tick.seconds * 1000)) ms, one to the channel every \(Int(Publisher.tick.seconds * 5000)) ms")
usleep(2_000_000)

// MARK: - The faults

var generator = SplitMix64(seed: seed)
let kinds = schedule(count: faultTotal, of: onlyKinds.isEmpty ? kindsAvailable : onlyKinds, using: &generator)
log("\(faultTotal) faults, seed \(seed)")
/// A connection up this long counts as healthy for the client (`stableConnectionDuration`'s
/// default, 5 s); a fault waits for it, so that every client is back to its normal reconnect
/// rules (immediate retries, backoff reset) before the next one.
let stableFor: Duration = .seconds(5)
/// The longest wait for every client to have every event after a fault.
let recoveryTimeout: Duration = .seconds(60)
var results: [FaultResult] = []
var freezesEndedByServer = 0

/// The Redis Cluster's slot map as its nodes say now (read in the remote namespace).
func shardMap(_ redisCluster: PrivateRedisCluster) -> RedisSlotMap {
    let map = try? lab.remote.run { () throws -> RedisSlotMap? in
        let connection = RedisClusterConnection(seeds: redisCluster.endpoints, timeout: 500)
        try connection.refreshSlotMap()
        return connection.slotMap
    }
    guard let map = map ?? nil else { fail("no node of the Redis Cluster answers CLUSTER SLOTS") }
    return map
}

/// Starts the nodes that are down and gives nginx time to try them again (`fail_timeout` 1 s).
func restartStoppedNodes() {
    let stopped = cluster.nodes.filter { !$0.isRunning }
    guard !stopped.isEmpty else { return }
    for node in stopped {
        do { try node.start() } catch { fail("cannot restart node \(node.name): \(error)") }
    }
    usleep(1_200_000)
}

for (index, kind) in kinds.enumerated() {
    restartStoppedNodes()
    if waitFor(timeout: .seconds(40), { clients.allSatisfy { ($0.connectedFor ?? .zero) >= stableFor } }) == nil {
        log("note: not every client had a connection up \(stableFor) within 40 s; the fault goes ahead")
    }
    let detail: String
    var frozen: (client: ChaosClient, connects: Int)?
    var restarted: (client: ChaosClient, processes: Int)?
    /// A shard fault's old master and the replica that took over.
    var shardChange: (master: RedisEndpoint, replica: RedisEndpoint)?
    /// The clients on the node a node fault or close is for: each must be closed with the
    /// fault's code and reconnect.
    var onTargetNode: [Int] = []
    /// The close code those clients must see.
    var expectedCode = 0
    /// Whether the node stopped by itself on SIGTERM (a node move), within the grace.
    var stoppedGracefully = true
    let marks = clients.map(\.mark)
    let busLosses = cluster.nodes.map { node in node.logLines.filter { $0.contains("cluster bus lost") }.count }
    switch kind {
    case .nodeKill, .nodeMove, .close4201, .close4200:
        // The node most clients are on (nginx does not rebalance: after a move they may all be
        // on one), found by their socket ids in its log; a random one of a tie.
        let onNode = cluster.nodes.map { node in
            let lines = node.logLines
            return marks.indices.filter { index in
                marks[index].socketID.map { socket in lines.contains { $0.contains("connected \(socket) ") } } ?? false
            }
        }
        let most = onNode.map(\.count).max() ?? 0
        let candidates = cluster.nodes.indices.filter { onNode[$0].count == most }
        let chosen = candidates[Int.random(in: 0..<candidates.count, using: &generator)]
        let node = cluster.nodes[chosen]
        detail = "node \(node.name), \(most) client(s)"
        onTargetNode = onNode[chosen]
        switch kind {
        case .nodeKill:
            expectedCode = 1006
            node.kill()
        case .nodeMove:
            expectedCode = 4200
            stoppedGracefully = node.terminate(grace: .seconds(5))
        case .close4201:
            expectedCode = 4201
            node.signal(SIGUSR1)
        default:
            expectedCode = 4200
            node.signal(SIGUSR2)
        }
    case .redisRestart:
        guard let redis = cluster.redis else { fail("a Redis restart without a Redis") }
        detail = "pid \(redis.processIdentifier)"
        do { try redis.restart() } catch { fail("Redis did not come back: \(error)") }
    case .shardKill, .shardFailover:
        guard let redisCluster else { fail("a shard fault without a Redis Cluster") }
        let map = shardMap(redisCluster)
        let shard = map.shards[Int.random(in: 0..<map.shards.count, using: &generator)]
        guard let replica = shard.replicas.first else { fail("shard \(shard.master) has no replica") }
        detail = "master \(shard.master), replica \(replica)"
        shardChange = (shard.master, replica)
        do {
            if kind == .shardKill {
                try lab.remote.run { try redisCluster.killAfterReplication(shard.master) }
            } else {
                let reply = try lab.remote.run { try RedisConnection(endpoint: replica).command("CLUSTER", "FAILOVER") }
                guard reply == .status("OK") else { fail("CLUSTER FAILOVER on \(replica): \(reply)") }
            }
        } catch {
            fail("\(kind.rawValue) on \(shard.master): \(error)")
        }
        // The replica serves the slots once promoted (after the node timeout, for a kill).
        if waitFor(timeout: .seconds(30), { shardMap(redisCluster).shards.contains { $0.master == replica } }) == nil {
            fail("\(replica) was not promoted within 30 s")
        }
    case .linkFlap, .carrierLoss:
        let link = Int.random(in: 0..<subnets.count, using: &generator)
        let down = Double(Int.random(in: 1000...4000, using: &generator)) / 1000
        detail = String(format: "veth%d, %.3f s", link, down)
        do {
            if kind == .linkFlap { try lab.local.setLink("veth\(link)", up: false) } else { try lab.setCarrier(of: "veth\(link)", present: false) }
            usleep(UInt32(down * 1_000_000))
            if kind == .linkFlap { try lab.local.setLink("veth\(link)", up: true) } else { try lab.setCarrier(of: "veth\(link)", present: true) }
        } catch {
            fail("cannot change veth\(link): \(error)")
        }
    case .clientFreeze:
        let client = clients[Int.random(in: 0..<clients.count, using: &generator)]
        detail = "client \(client.name)"
        frozen = (client, client.snapshot.connects)
        client.signal(SIGSTOP)
        usleep(8_000_000)
        client.signal(SIGCONT)
    case .clientRestart:
        let client = clients[Int.random(in: 0..<clients.count, using: &generator)]
        let down = Double(Int.random(in: 500...3000, using: &generator)) / 1000
        detail = String(format: "client %@, %.3f s down", client.name, down)
        restarted = (client, client.processesStarted)
        do { try client.restart(after: .milliseconds(Int(down * 1000))) } catch { fail("cannot start client \(client.name) again: \(error)") }
    }
    // Recovered: every client connected, in its rooms again if its connection went down, with
    // every event kept up to now and the next one (published after the fault: it is live again,
    // not only replayed).
    let targets = publisher.snapshot.keptUpTo.mapValues { $0 + 1 }
    let recovery = waitFor(timeout: recoveryTimeout) {
        zip(clients, marks).allSatisfy { client, mark in client.hasRecovered(since: mark, to: targets) }
    }
    if let frozen, frozen.client.snapshot.connects > frozen.connects { freezesEndedByServer += 1 }
    let reconnected = zip(clients, marks).filter { client, mark in client.snapshot.connects > mark.connects }.count
    let tookEffect: Bool
    switch kind {
    case .nodeKill, .nodeMove, .close4201, .close4200:
        // Every client that was on the node closed with the fault's code, and back.
        tookEffect = !onTargetNode.isEmpty && stoppedGracefully && onTargetNode.allSatisfy { index in
            clients[index].snapshot.connects > marks[index].connects && clients[index].closeCodes(since: marks[index]).contains(expectedCode)
        }
    case .redisRestart:
        tookEffect = waitFor(timeout: .seconds(2)) {
            zip(cluster.nodes, busLosses).allSatisfy { node, before in node.logLines.filter { $0.contains("cluster bus lost") }.count > before }
        } != nil
    case .clientFreeze:
        // The server pruned it (no pong within its timeout), and it came back.
        tookEffect = frozen.map { frozen in
            let socket = marks[clients.firstIndex { $0 === frozen.client } ?? 0].socketID ?? "?"
            return frozen.client.snapshot.connects > frozen.connects
                && cluster.nodes.contains { node in node.logLines.contains { $0.contains("pruned \(socket) ") } }
        } ?? false
    case .clientRestart:
        // A new process, connected and in its rooms again (`hasRecovered`).
        tookEffect = restarted.map { restarted in
            let index = clients.firstIndex { $0 === restarted.client } ?? 0
            return restarted.client.processesStarted > restarted.processes && restarted.client.snapshot.connects > marks[index].connects && recovery != nil
        } ?? false
    case .linkFlap, .carrierLoss:
        tookEffect = true
    case .shardKill, .shardFailover:
        // The replica serves the slots, and each node lost the old master's shard (a kill) or
        // follows the new master (both).
        // A node with no subscription on the shard sees a coordinated failover at its next
        // look at the map (`RedisShardedSubscriber.mapCheckInterval`, 5 s).
        tookEffect = shardChange.map { change in
            guard let redisCluster else { return false }
            return waitFor(timeout: .seconds(10)) {
                cluster.nodes.allSatisfy { node in
                    node.logLines.contains { $0.contains("shard \(change.replica) ready") || (kind == .shardKill && $0.contains("shard \(change.master) lost")) }
                }
            } != nil && shardMap(redisCluster).shards.contains { $0.master == change.replica }
        } ?? false
    }
    // The old master back as a replica, and every shard with its replica, before the next fault.
    if let redisCluster, let change = shardChange {
        do {
            try lab.remote.run {
                try redisCluster.start(change.master)
                try redisCluster.waitUntilOK(until: .now + .seconds(30))
            }
        } catch {
            fail("the Redis Cluster did not come back whole: \(error)")
        }
    }
    results.append(FaultResult(kind: kind, detail: detail, recovery: recovery, reconnected: reconnected, tookEffect: tookEffect))
    var outcome = recovery.map { String(format: "recovered in %.3f s", $0.seconds) } ?? "NOT recovered within \(recoveryTimeout)"
    outcome += ", \(reconnected) client(s) reconnected" + (tookEffect ? "" : ", WITHOUT EFFECT")
    log("fault \(index + 1)/\(faultTotal): \(kind.rawValue) (\(detail)): \(outcome)")
    for client in clients where !client.isRunning { fail("client \(client.name) exited:\n    \(client.lastLines)") }
}
restartStoppedNodes()

// MARK: - The end

publisher.stop()
// One last event per room, so that the last id of each is known (an event kept while its
// answer was lost to a fault has an id below it).
var finalTargets: [String: UInt64] = [:]
for room in rooms {
    var kept: UInt64?
    for attempt in 0..<20 where kept == nil {
        if attempt > 0 { usleep(250_000) }
        kept = try? lab.remote.run { publisher.publish(room: room, number: 0) }
    }
    guard let kept else { fail("the last event of \(room) was not kept after 20 attempts") }
    finalTargets[room] = kept
}
if waitFor(timeout: recoveryTimeout, { clients.allSatisfy { $0.hasCaughtUp(to: finalTargets) } }) == nil {
    log("not every client has every event within \(recoveryTimeout) of the last one: counting what is missing as lost")
}
let tally = publisher.snapshot
let records = clients.map { ($0, $0.snapshot) }
cleanUp()

var expected = 0, received = 0, replayed = 0, lost = 0, duplicated = 0, printedAgain = 0, reordered = 0, rejoins = 0, notRecovered = 0, channelReceived = 0
var unparsed = 0
var epochs: Set<String> = []
var roomErrors: [String] = []
for (client, record) in records {
    channelReceived += record.channelEvents
    unparsed += record.unparsed
    for room in client.rooms {
        let entry = record.rooms[room] ?? ChaosClient.RoomRecord()
        let target = finalTargets[room] ?? 0
        expected += Int(target)
        received += entry.count
        replayed += entry.replayed
        duplicated += entry.duplicated
        printedAgain += entry.printedAgain
        reordered += entry.reordered
        rejoins += max(0, entry.joins - 1)
        notRecovered += entry.notRecovered
        epochs.formUnion(entry.epochs.map { "\(room) \($0)" })
        lost += Int(target) - entry.delivered.filter { $0 <= target }.count
        roomErrors += entry.errors.map { "\(client.name) \(room): \($0)" }
    }
}

func seconds(_ duration: Duration?) -> String { duration.map { String(format: "%.3f s", $0.seconds) } ?? "—" }
func median(_ values: [Duration]) -> Duration? { values.isEmpty ? nil : values.sorted()[values.count / 2] }

say("")
say("chaos run: \(faultTotal) faults in \(String(format: "%.0f", (ContinuousClock.now - start).seconds)) s, seed \(seed); 4 clients (2 per link), 3 rooms (2 per client), 1 channel; 2 nodes over \(redisCluster == nil ? "Redis" : "a Redis Cluster (3 masters, 3 replicas)") behind nginx")
say("")
say("| fault | count | clients reconnected | without effect | worst recovery | median recovery | not recovered |")
say("|---|---:|---:|---:|---:|---:|---:|")
func row(_ label: String, _ faults: [FaultResult]) {
    let times = faults.compactMap(\.recovery)
    say("| \(label) | \(faults.count) | \(faults.map(\.reconnected).reduce(0, +)) | \(faults.filter { !$0.tookEffect }.count) | "
        + "\(seconds(times.max())) | \(seconds(median(times))) | \(faults.count - times.count) |")
}
for kind in FaultKind.allCases where results.contains(where: { $0.kind == kind }) { row(kind.rawValue, results.filter { $0.kind == kind }) }
row("**all**", results)
let allTimes = results.compactMap(\.recovery)
say("")
say("| room events | |")
say("|---|---:|")
let keptInAll = Int(finalTargets.values.reduce(0, +))
say("| published (the API answered with the id kept) | \(tally.roomKept) |")
say("| publish requests refused or unanswered (a node or Redis down) | \(tally.roomFailed) |")
say("| kept (the rooms' last ids, summed) | \(keptInAll) |")
say("| kept though its answer was lost to a fault | \(keptInAll - tally.roomKept) |")
say("| to deliver (each client, each of its rooms) | \(expected) |")
say("| received | \(received) |")
say("| replayed | \(replayed) |")
say("| lost | \(lost) |")
say("| duplicated | \(duplicated) |")
say("| printed again by a restarted client, at its start (at least once across a SIGKILL: not counted as duplicated) | \(printedAgain) |")
say("| reordered | \(reordered) |")
say("| rejoins | \(rejoins) |")
say("| rejoins not recovered | \(notRecovered) |")
say("| client lines that did not parse (or a room event without a valid id) | \(unparsed) |")
say("| epochs seen per room | \(epochs.count) over \(rooms.count) rooms |")
say("")
say("channel events (no history, not replayed): published \(tally.channelSent) (\(tally.channelFailed) refused or unanswered), received \(channelReceived) by \(clients.count) clients")
let freezes = results.filter { $0.kind == .clientFreeze }.count
say("freezes after which the client reconnected: \(freezesEndedByServer) of \(freezes) (each fault's effect checks that the server pruned it)")
if !roomErrors.isEmpty { say("room errors (retried by the client): \(Dictionary(grouping: roomErrors) { $0.split(separator: ":").last.map(String.init) ?? $0 }.mapValues(\.count))") }

let clean = lost == 0 && duplicated == 0 && reordered == 0 && notRecovered == 0 && replayed > 0 && epochs.count == rooms.count && unparsed == 0
    && allTimes.count == results.count && results.allSatisfy(\.tookEffect)
say(clean ? "PASS: every fault took effect and recovered; nothing lost, duplicated or reordered" : "FAIL: see the table")
exit(clean ? 0 : 1)
