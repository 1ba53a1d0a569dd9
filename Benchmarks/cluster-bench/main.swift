// cluster-bench: rooms on two server nodes over one private redis-server (RealtimeCluster):
// publish → delivery across nodes at 1,000 events/s, delivered events/s to 1,000 members over
// two nodes against the same on one in-memory node, and what Redis spends per published event;
// then (e) two nodes on one Redis against two nodes on a Redis Cluster of three masters
// (PrivateRedisCluster): publishes and deliveries a second, p99 delivery, CPU per event in each
// Redis process, and the projection to more shards.
// Servers and clients are embedded in this process (RealtimeServer, the WebSocket module's
// clients) on loopback; Redis is a PrivateRedis (unix socket, no persistence).
// Run: swift run -c release cluster-bench [--threads N]
import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import RealtimeBackend
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport
import WebSocket

func progress(_ message: String) { FileHandle.standardError.write(Data("\(message)\n".utf8)) }
func fail(_ message: String) -> Never {
    progress("cluster-bench: \(message)")
    exit(1)
}

// A thousand clients and their servers' sockets: the soft descriptor limit raised to the hard one.
DescriptorLimit.raiseSoftLimit()

let app = RealtimeApp(id: "1", key: "bench-key", secret: "bench-secret", maxConnections: 100_000)
var contextOptions = WebSocketContext.Options()
contextOptions.timeout = .seconds(30)
let context = try WebSocketContext(options: contextOptions)
let origin = ContinuousClock.now

func nanoseconds(_ duration: Duration) -> Int64 { duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000 }
func milliseconds(_ duration: Duration) -> Double { Double(nanoseconds(duration)) / 1e6 }
func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * p).rounded(.up)) - 1))]
}

func joinFrame(_ room: String, user: String) -> String {
    let claims = RoomClaims(subject: user, room: room, expiresAt: Int(Date().timeIntervalSince1970) + 3600, rule: RoomRule(history: 1000))
    let token = (try? JSONWebToken.sign(claims, secret: app.secret)) ?? ""
    return (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomJoin), payload: RoomJoinRequest(room: room, token: token)).text) ?? ""
}

/// A raw WebSocket member: counts kept events and, for stamped ones, their latency.
final class Member: Sendable {
    struct State {
        var handshake = false
        var joined = false
        var kept = 0
        var latencies: [Double] = []
    }
    let state = Locked(State())
    let signal = DispatchSemaphore(value: 0)
    let connection = Locked<WebSocketConnection?>(nil)

    init(port: Int, room: String, user: String, recordLatency: Bool) throws {
        let connection = try context.connect(url: "ws://127.0.0.1:\(port)/app/\(app.key)") { [state, signal] event in
            guard case .text(let text) = event else { return }
            let now = ContinuousClock.now - origin
            state.withLock { state in
                if text.contains("connection_established") {
                    state.handshake = true
                } else if text.contains(#"\"event\":\"joined\""#) {
                    state.joined = true
                } else if text.contains(#"\"meta\":{"#) {
                    state.kept += 1
                    if recordLatency, let range = text.range(of: "t="), let sent = Int64(text[range.upperBound...].prefix { $0.isNumber }) {
                        state.latencies.append(Double(nanoseconds(now) - sent) / 1e6)
                    }
                }
            }
            signal.signal()
        }
        self.connection.withLock { $0 = connection }
        guard wait(seconds: 30, { $0.handshake }) else { fail("no handshake") }
        try? connection.send(text: joinFrame(room, user: user))
        guard wait(seconds: 30, { $0.joined }) else { fail("no joined") }
    }

    func wait(seconds: Int, _ condition: (State) -> Bool) -> Bool {
        let deadline = DispatchTime.now() + .seconds(seconds)
        while !state.withLock({ condition($0) }) {
            if signal.wait(timeout: deadline) == .timedOut { return state.withLock { condition($0) } }
        }
        return true
    }

    func close() { try? connection.withLock { $0 }?.close() }
}

/// `--threads N`: each node's service loops (the server's default, one per core, without it).
let threadsAsked = CommandLine.arguments.firstIndex(of: "--threads").flatMap { index in
    CommandLine.arguments.indices.contains(index + 1) ? Int(CommandLine.arguments[index + 1]) : nil
}
let nodeOptions: RealtimeServerOptions = {
    var options = RealtimeServerOptions(port: 0, apps: [app])
    if let threadsAsked { options.threads = threadsAsked }
    return options
}()

func node(redis: PrivateRedis?, cluster: PrivateRedisCluster? = nil) throws -> RealtimeServer {
    let store: RedisRoomStore
    let fanout: RedisFanout
    if let cluster {
        store = RedisRoomStore(redis: RedisClusterConnection(seeds: cluster.endpoints))
        fanout = RedisFanout(cluster: cluster.endpoints)
    } else if let redis {
        store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
        fanout = RedisFanout(endpoint: redis.endpoint)
    } else {
        return try RealtimeServer(options: nodeOptions)
    }
    return try RealtimeServer(options: nodeOptions, configure: {
        $0.roomStore = store
        $0.fanout = fanout
    })
}

func waitReady(_ nodes: [RealtimeServer]) {
    let deadline = ContinuousClock.now + .seconds(10)
    while !nodes.allSatisfy(\.hub.isFanoutHealthy) {
        guard ContinuousClock.now < deadline else { fail("the cluster bus is not ready") }
        usleep(10_000)
    }
}

/// Publishes `count` stamped events through `hub` at `rate` a second (paced by deadlines).
func publish(_ hub: RealtimeHub, room: String, count: Int, rate: Int) {
    let start = ContinuousClock.now
    for index in 0..<count {
        let due = start + .nanoseconds(Int64(index) * 1_000_000_000 / Int64(rate))
        let wait = due - ContinuousClock.now
        if wait > .zero { usleep(UInt32(nanoseconds(wait) / 1000)) }
        let stamp = nanoseconds(ContinuousClock.now - origin)
        do {
            _ = try hub.publishRoom(appID: app.id, room: room, event: "tick", data: #"{"s":"t=\#(stamp)"}"#)
        } catch {
            fail("publish: \(error)")
        }
    }
}

var rows: [(String, String, String)] = []

// (a) Publish on node A, members on node B (and on A), 1,000 events/s for 5 s.
do {
    progress("(a) latency across nodes at 1,000 events/s")
    let redis = try PrivateRedis()
    defer { redis.stop() }
    let nodes = try [node(redis: redis), node(redis: redis)]
    defer { nodes.forEach { $0.shutdown(grace: .zero) } }
    waitReady(nodes)
    let onB = try (0..<10).map { try Member(port: nodes[1].port, room: "lat:1", user: "b\($0)", recordLatency: true) }
    let onA = try (0..<10).map { try Member(port: nodes[0].port, room: "lat:1", user: "a\($0)", recordLatency: true) }
    usleep(300_000)
    let events = 5000
    publish(nodes[0].hub, room: "lat:1", count: events, rate: 1000)
    for member in onA + onB { guard member.wait(seconds: 30, { $0.kept >= events }) else { fail("a member missed events") } }
    let across = onB.flatMap { $0.state.withLock { $0.latencies } }.sorted()
    let local = onA.flatMap { $0.state.withLock { $0.latencies } }.sorted()
    rows.append(("(a) publish on A → member on B, 1,000 events/s, p50 / p99 (5,000 events × 10 members)",
                 String(format: "%.2f / %.2f ms", percentile(across, 0.5), percentile(across, 0.99)), "p99 ≤ 10 ms"))
    rows.append(("(a) the same, members on A (through Redis too), p50 / p99",
                 String(format: "%.2f / %.2f ms", percentile(local, 0.5), percentile(local, 0.99)), "—"))
    (onA + onB).forEach { $0.close() }
}

/// Delivered events a second to `members` spread over `nodes`: `events` published back to back
/// through the first node, timed from the first publish to the last delivery.
func throughput(nodes: [RealtimeServer], members count: Int, events: Int, room: String) throws -> Double {
    var members: [Member] = []
    for index in 0..<count {
        members.append(try Member(port: nodes[index % nodes.count].port, room: room, user: "u\(index)", recordLatency: false))
    }
    usleep(300_000)
    let start = ContinuousClock.now
    publish(nodes[0].hub, room: room, count: events, rate: 1_000_000)
    for member in members { guard member.wait(seconds: 60, { $0.kept >= events }) else { fail("a member missed events") } }
    let elapsed = ContinuousClock.now - start
    members.forEach { $0.close() }
    return Double(count * events) / (Double(nanoseconds(elapsed)) / 1e9)
}

// (b) 1,000 members over two nodes against one in-memory node.
var single = 0.0
var clustered = 0.0
do {
    progress("(b) one in-memory node, 1,000 members")
    let alone = try node(redis: nil)
    single = try throughput(nodes: [alone], members: 1000, events: 200, room: "fan:1")
    alone.shutdown(grace: .zero)
    progress("(b) two nodes on Redis, 1,000 members")
    let redis = try PrivateRedis()
    defer { redis.stop() }
    let nodes = try [node(redis: redis), node(redis: redis)]
    defer { nodes.forEach { $0.shutdown(grace: .zero) } }
    waitReady(nodes)
    clustered = try throughput(nodes: nodes, members: 1000, events: 200, room: "fan:2")
}
rows.append(("(b) delivered events/s, 1,000 members in one room, one in-memory node (200 events)", String(format: "%.0f", single), "—"))
rows.append(("(b) the same, 500 members on each of two nodes over Redis", String(format: "%.0f (%.0f %%)", clustered, clustered / single * 100), "≥ 50 %"))

// (c) What Redis spends per published room event: commands, bytes in, memory kept.
do {
    progress("(c) Redis cost per event")
    let redis = try PrivateRedis()
    defer { redis.stop() }
    let nodes = try [node(redis: redis), node(redis: redis)]
    defer { nodes.forEach { $0.shutdown(grace: .zero) } }
    waitReady(nodes)
    let members = try [Member(port: nodes[0].port, room: "cost:1", user: "a", recordLatency: false),
                       Member(port: nodes[1].port, room: "cost:1", user: "b", recordLatency: false)]
    let probe = RedisConnection(endpoint: redis.endpoint)
    func info(_ section: String) -> [String: String] {
        guard let text = (try? probe.command("INFO", section))?.string else { return [:] }
        var values: [String: String] = [:]
        for line in text.split(separator: "\r\n") {
            let parts = line.split(separator: ":", maxSplits: 1)
            if parts.count == 2 { values[String(parts[0])] = String(parts[1]) }
        }
        return values
    }
    /// Commands executed so far: all of them (a script's own calls included), or one kind's.
    func calls(_ command: String? = nil) -> Int {
        info("commandstats").filter { command == nil || $0.key == "cmdstat_\(command!)" }.values.reduce(0) { total, value in
            total + (value.split(separator: ",").first { $0.hasPrefix("calls=") }.flatMap { Int($0.dropFirst(6)) } ?? 0)
        }
    }
    usleep(2_500_000) // past the first quiet-room checks, so they are not counted as the events'
    let events = 1000
    let callsBefore = calls()
    let tripsBefore = calls("evalsha")
    let statsBefore = info("stats")
    let memoryBefore = Int(info("memory")["used_memory"] ?? "0") ?? 0
    let start = ContinuousClock.now
    publish(nodes[0].hub, room: "cost:1", count: events, rate: 1000)
    for member in members { guard member.wait(seconds: 30, { $0.kept >= events }) else { fail("a member missed events") } }
    let elapsed = ContinuousClock.now - start
    let callsAfter = calls()
    let tripsAfter = calls("evalsha")
    let statsAfter = info("stats")
    let memoryAfter = Int(info("memory")["used_memory"] ?? "0") ?? 0
    func delta(_ key: String) -> Int { (Int(statsAfter[key] ?? "0") ?? 0) - (Int(statsBefore[key] ?? "0") ?? 0) }
    // INFO itself is a command: the five calls before the "after" snapshots are not the events'.
    let perEvent = Double(callsAfter - callsBefore - 5) / Double(events)
    rows.append(("(c) round trips from the nodes per published event (EVALSHA: the append script, the quiet-room checks; \(String(format: "%.1f", Double(nanoseconds(elapsed)) / 1e9)) s)",
                 String(format: "%.3f", Double(tripsAfter - tripsBefore) / Double(events)), "—"))
    rows.append(("(c) commands Redis executes per published event (the script's own XADD, trim, HSET, PUBLISH… counted)",
                 String(format: "%.2f", perEvent), "—"))
    rows.append(("(c) bytes Redis read / wrote per event (net input / output; 2 nodes following the room)",
                 "\(delta("total_net_input_bytes") / events) / \(delta("total_net_output_bytes") / events)", "—"))
    rows.append(("(c) Redis memory per kept event (used_memory delta / 1,000 events of ~30 bytes of data)",
                 "\((memoryAfter - memoryBefore) / events) bytes", "—"))
    members.forEach { $0.close() }
}

// (d) Room publishes through a node's signed HTTP API, 8 publishers each waiting for its answer
// before the next, for 3 s: one in-memory node against one node on Redis, with a member in
// the room on each (issue 31: the node waits on Redis on its room lane, not its event loop).
/// The app's server, publishing as `RealtimeBackend` signs it (each event declares the rule).
let backend = RealtimeBackend(appKey: app.key, appSecret: app.secret)
try backend.room("api:{n}", history: 100)

/// One signed `POST /apps/{id}/room_events` to `port`: its HTTP status (0 without an answer).
func postRoomEvent(port: Int, room: String) -> Int {
    guard let request = try? backend.roomEventRequest(server: URL(string: "http://127.0.0.1:\(port)")!, appID: app.id, room: room, event: "tick", data: .object([:])) else {
        fail("cannot build the publish request")
    }
    let status = Locked(0)
    let done = DispatchSemaphore(value: 0)
    URLSession.shared.dataTask(with: request) { _, response, _ in
        status.withLock { $0 = (response as? HTTPURLResponse)?.statusCode ?? 0 }
        done.signal()
    }.resume()
    done.wait()
    return status.withLock { $0 }
}

/// Answered publishes a second through `server`'s HTTP API (`publishers` at once, for `seconds`).
func httpPublishRate(_ server: RealtimeServer, room: String, publishers: Int = 8, seconds: Int = 3) throws -> (rate: Double, failed: Int) {
    let member = try Member(port: server.port, room: room, user: "m", recordLatency: false)
    defer { member.close() }
    let counts = Locked((ok: 0, failed: 0))
    let start = ContinuousClock.now
    let deadline = start + .seconds(seconds)
    DispatchQueue.concurrentPerform(iterations: publishers) { _ in
        while ContinuousClock.now < deadline {
            let ok = postRoomEvent(port: server.port, room: room) == 200
            counts.withLock { if ok { $0.ok += 1 } else { $0.failed += 1 } }
        }
    }
    let elapsed = ContinuousClock.now - start
    let (ok, failed) = counts.withLock { ($0.ok, $0.failed) }
    guard member.wait(seconds: 30, { $0.kept >= ok }) else { fail("the member missed published events") }
    return (Double(ok) / (Double(nanoseconds(elapsed)) / 1e9), failed)
}

do {
    progress("(d) HTTP API room publishes: one in-memory node")
    let alone = try node(redis: nil)
    let memory = try httpPublishRate(alone, room: "api:1")
    alone.shutdown(grace: .zero)
    progress("(d) HTTP API room publishes: one node on Redis")
    let redis = try PrivateRedis()
    defer { redis.stop() }
    let clustered = try node(redis: redis)
    defer { clustered.shutdown(grace: .zero) }
    waitReady([clustered])
    let onRedis = try httpPublishRate(clustered, room: "api:2")
    rows.append(("(d) room publishes answered per second through the HTTP API, 8 publishers, one in-memory node (failed)", String(format: "%.0f (%d)", memory.rate, memory.failed), "—"))
    rows.append(("(d) the same, one node on Redis (share of the in-memory row; failed)", String(format: "%.0f (%.0f %%; %d)", onRedis.rate, onRedis.rate / memory.rate * 100, onRedis.failed), "≥ 80 %"))
}

// (e) Two nodes on one Redis against two nodes on a Redis Cluster of three masters (no
// replicas: the comparison is the sharding's), 30 rooms with a member on each node: a paced run
// (2,000 events/s through both nodes for 3 s) for delivery latency, then a saturating one (8
// publishers, 4 per node, back to back for 3 s) for throughput and each Redis process's CPU.

do {
    progress("(e) two nodes on one Redis")
    let redis = try PrivateRedis()
    let nodes = try [node(redis: redis), node(redis: redis)]
    waitReady(nodes)
    let one = try engineRun(nodes, redisProcesses: [redis.processIdentifier], label: "one")
    nodes.forEach { $0.shutdown(grace: .zero) }
    redis.stop()
    progress("(e) two nodes on a Redis Cluster of 3 masters")
    let cluster = try PrivateRedisCluster(masters: 3, replicasPerMaster: 0)
    defer { cluster.stop() }
    let clusterNodes = try [node(redis: nil, cluster: cluster), node(redis: nil, cluster: cluster)]
    defer { clusterNodes.forEach { $0.shutdown(grace: .zero) } }
    waitReady(clusterNodes)
    let sharded = try engineRun(clusterNodes, redisProcesses: cluster.processIdentifiers, label: "three")
    rows.append(("(e) delivery p50 / p99, 2,000 events/s over 30 rooms, a member on each of two nodes: one Redis",
                 String(format: "%.2f / %.2f ms", one.p50, one.p99), "—"))
    rows.append(("(e) the same on a Redis Cluster of 3 masters", String(format: "%.2f / %.2f ms", sharded.p50, sharded.p99), "—"))
    rows.append(("(e) room publishes / deliveries a second, 8 publishers back to back (3 s): one Redis",
                 String(format: "%.0f / %.0f", one.publishes, one.deliveries), "—"))
    rows.append(("(e) the same on a Redis Cluster of 3 masters", String(format: "%.0f / %.0f", sharded.publishes, sharded.deliveries), "—"))
    rows.append(("(e) Redis CPU per published event (2 deliveries), one Redis", String(format: "%.1f µs", one.cpuPerEvent.first ?? 0), "—"))
    rows.append(("(e) the same, each master of the cluster", sharded.cpuPerEvent.map { String(format: "%.1f µs", $0) }.joined(separator: " / "), "—"))
    // A shard's Redis bounds its rooms' publishes at one core: a second of CPU over its cost per
    // event; N shards with the rooms spread carry N times that.
    let perShard = sharded.cpuPerEvent.reduce(0, +)
    if perShard > 0, let single = one.cpuPerEvent.first, single > 0 {
        rows.append(("(e) Redis-bound publishes a second (one core per Redis process): one Redis", String(format: "%.0f", 1e6 / single), "—"))
        for shards in [3, 6, 12] {
            rows.append(("(e) projected, \(shards) shards (rooms spread evenly, a core each)", String(format: "%.0f", Double(shards) * 1e6 / perShard), "—"))
        }
    }
}

print("| measurement | result | target |")
print("|---|---|---|")
for (name, result, target) in rows { print("| \(name) | \(result) | \(target) |") }
context.shutdown()
exit(0)
