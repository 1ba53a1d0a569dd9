// realtime-demo, part 2: the room on two server nodes over a private redis-server, with nginx in
// front (RealtimeCluster's PrivateCluster), and the node the client is on killed with SIGKILL
// twice: each time the client lands on the other node through nginx and its room replays what
// was published meanwhile. It prints "rooms on two nodes: published N, received M (replayed R),
// lost 0, duplicated 0, out of order 0" and reports failure on anything else.

import CurlHTTP
import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Realtime
import RealtimeCluster
import RealtimeServer
import Reconnect
import SystemSupport

/// The running cluster, stopped by `fail` too: its processes must not outlive the demo.
let runningCluster = Locked<PrivateCluster?>(nil)

/// What the room on two nodes delivered, and what the app's server had kept.
struct ClusterTally {
    /// The highest id the HTTP API answered for a published event: every id up to it is kept.
    var keptUpTo: UInt64 = 0
    var published = 0
    var received: Set<UInt64> = []
    var replayed = 0
    var duplicates = 0
    var outOfOrder = 0
    var lastID: UInt64 = 0
}

/// Publishes one room event through nginx (any live node answers), waiting at most 2 s, with
/// libcurl (`CurlHTTP`: its deadline covers the whole request).
///
/// - Returns: the kept id, or nil when no node answered 200.
func publishThroughCluster(_ url: URL, room: String, seq: Int) -> UInt64? {
    guard let request = try? backend.roomEventRequest(server: url, appID: app.id, room: room, event: "tick", data: .object(["seq": .number(Double(seq))])),
          let target = request.url?.absoluteString, let body = request.httpBody else {
        return nil
    }
    let result = CurlHTTP.post(url: target, body: Array(body), headers: ["Content-Type: application/json", "Expect:"],
                               timeout: .seconds(2), maxResponseBytes: 64 * 1024)
    guard case .success(let answer) = result, answer.status == 200,
          let decoded = try? JSONDecoder().decode([String: [[String: JSONValue]]].self, from: Data(answer.body)),
          let id = decoded["events"]?.first?["id"]?.number.flatMap({ UInt64(exactly: $0) }) else { return nil }
    return id
}

/// Runs part 2; returns whether the room's line is clean.
func runOnTwoNodes() -> Bool {
    say("")
    log("part 2: the room on two nodes over a private redis-server, nginx in front")
    let executable = (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0]
    let cluster: PrivateCluster
    do {
        cluster = try PrivateCluster(nodes: 2, app: app, serverExecutable: executable, serverArguments: ["--serve-node"], loadBalancer: true)
    } catch {
        fail("cannot start the cluster: \(error) (scripts/setup --cluster installs redis-server and nginx-light; --single-node skips this part)")
    }
    runningCluster.withLock { $0 = cluster }
    defer {
        cluster.stop()
        runningCluster.withLock { $0 = nil }
    }
    guard let balancer = cluster.balancerPort else { fail("no load balancer") }
    log("cluster: redis-server pid \(cluster.redis?.processIdentifier ?? 0), nodes \(cluster.nodes.map { "\($0.name) on :\($0.port)" }.joined(separator: ", ")), nginx on :\(balancer)")

    let roomName = "orders:cluster"
    let tally = Locked(ClusterTally())
    let queue = DispatchQueue(label: "realtime-demo.cluster.delivery")
    var options: BirdRealtime.Options
    do {
        options = try BirdRealtime.Options(url: "ws://127.0.0.1:\(balancer)/app/\(app.key)")
    } catch {
        fail("\(error)")
    }
    options.deliveryQueue = queue
    options.backoff = ExponentialBackoff(base: .milliseconds(200), cap: .seconds(1))
    // Moves come seconds apart: a connection up 1 s counts as healthy (default 5 s), so a
    // node's 4200 on shutdown is retried at once, as the seed says.
    options.stableConnectionDuration = .seconds(1)
    options.roomAuthorizer = { rooms in await backend.authorizeRooms(rooms, user: "demo-user") }
    let client = BirdRealtime(options: options)
    let room = client.join(roomName)
    room.bind("joined") { data, _ in
        let recovered = data["recovered"]?.bool.map { $0 ? ", recovered" : ", NOT recovered" } ?? ""
        log("room \(roomName) joined at id \(Int(data["id"]?.number ?? 0))\(recovered) (replayed so far: \(tally.withLock { $0.replayed }))")
    }
    room.bind("error") { data, _ in log("room \(roomName) error \(data["code"]?.string ?? "?"): \(data["message"]?.string ?? "")") }
    room.bind("tick") { _, meta in
        tally.withLock { tally in
            if meta.replayed { tally.replayed += 1 }
            if !tally.received.insert(meta.id).inserted { tally.duplicates += 1 }
            if meta.id < tally.lastID { tally.outOfOrder += 1 }
            tally.lastID = max(tally.lastID, meta.id)
        }
    }
    /// The node whose log shows the client's socket id.
    func clientNode() -> PrivateCluster.Node? {
        guard let socketID = client.connection.connectionId else { return nil }
        return cluster.nodes.first { $0.isRunning && $0.logLines.contains { $0.contains("connected \(socketID) ") } }
    }
    client.connect()
    wait("the room on the cluster") { room.state == .joined && clientNode() != nil }
    log("client on node \(clientNode()?.name ?? "?") through nginx")

    // The app's server publishes a tick every 40 ms through nginx, throughout.
    let publishing = Locked(true)
    let publisherDone = DispatchSemaphore(value: 0)
    let apiURL = URL(string: "http://127.0.0.1:\(balancer)")!
    DispatchQueue(label: "realtime-demo.cluster.publisher").async {
        var seq = 0
        while publishing.withLock({ $0 }) {
            seq += 1
            if let id = publishThroughCluster(apiURL, room: roomName, seq: seq) {
                tally.withLock { $0.keptUpTo = max($0.keptUpTo, id); $0.published += 1 }
            }
            usleep(40_000)
        }
        publisherDone.signal()
    }

    usleep(1_500_000)
    for move in 1...2 {
        guard let before = clientNode() else { fail("the client's node is unknown") }
        // The other node must be up for the client to move there.
        for node in cluster.nodes where !node.isRunning {
            do { try node.start() } catch { fail("cannot restart node \(node.name): \(error)") }
            log("node \(node.name) started again on :\(node.port)")
            // nginx tries a node it saw fail again after its fail_timeout (1 s).
            usleep(1_200_000)
        }
        log("FAULT: node \(before.name), the client's, is killed (SIGKILL: no close frame, no goodbye)")
        before.kill()
        wait("the client on another node", timeout: .seconds(15)) { room.state == .joined && clientNode().map { $0 !== before } == true }
        log("client on node \(clientNode()?.name ?? "?") through nginx (move \(move))")
        usleep(1_500_000)
    }
    publishing.withLock { $0 = false }
    publisherDone.wait()
    let keptUpTo = tally.withLock { $0.keptUpTo }
    wait("the room's last events on the cluster") { tally.withLock { $0.received.count } >= Int(keptUpTo) }
    client.disconnect()
    queue.sync {}
    let result = tally.withLock { $0 }
    let lost = Int(result.keptUpTo) - result.received.filter { $0 >= 1 && $0 <= result.keptUpTo }.count
    say("")
    say("rooms on two nodes: published \(result.keptUpTo), received \(result.received.count) (replayed \(result.replayed)), lost \(lost), duplicated \(result.duplicates), out of order \(result.outOfOrder)")
    say("(2 moves: the client's node killed with SIGKILL each time; the client came back through nginx on the other node and replayed from its position)")
    let clean = lost == 0 && result.duplicates == 0 && result.outOfOrder == 0 && result.replayed > 0
    if !clean { log("FAILED: the room on two nodes lost, duplicated or reordered events, or replayed none") }
    return clean
}
