// realtime-demo: the project's main job. An embedded reference server on loopback, one
// BirdRealtime client subscribed to an end-to-end encrypted channel and a presence channel
// (authorised by the in-process "backend", `AuthorizationSigner`, for every new connection id)
// and signed in, and in a room (its token from the backend's `RealtimeBackend`), a steady
// stream of published events on both, and four
// faults from the realtime-connection-lifecycle seed — a 4201 close (immediate retry), a
// socket dropped without a close frame (backoff), a server restart, and a 4009 termination
// (failed, then the app calls connect()). It prints a timeline and a summary, and exits 1 if
// an event published while the client was subscribed was lost or delivered twice, or if a
// room event was lost, duplicated or delivered out of order (the room replays what was
// published while the client was away).

import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SystemSupport
import Realtime
import RealtimeCluster
import RealtimeBackend
import RealtimeProtocol
import RealtimeServer
import Reconnect

/// Writes one line to standard output at once (unbuffered, so a pipe sees the timeline live).
@Sendable func say(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

let usage = """
    usage: realtime-demo [--port P] [--single-node]

    Runs the realtime demo on 127.0.0.1 (an ephemeral port unless --port is given), then its
    room on two server nodes over a private redis-server behind nginx (not with --single-node),
    and exits 0 when no event published while the client was subscribed was lost or duplicated
    and no room event was lost, duplicated or out of order.
    """

// A node of the demo's cluster (part 2): the demo starts two of itself this way, as
// `realtime-server --redis …` would run.
if CommandLine.arguments.dropFirst().first == "--serve-node" {
    do {
        let options = try RealtimeServerOptions(arguments: Array(CommandLine.arguments.dropFirst(2)))
        let prefix = "node \(options.node ?? "?"): "
        let node = try ClusterNode.start(options: options, log: { line in FileHandle.standardError.write(Data((prefix + line + "\n").utf8)) },
                                         warn: { line in FileHandle.standardError.write(Data((prefix + line + "\n").utf8)) })
        FileHandle.standardOutput.write(Data("port \(node.port)\n".utf8))
        signal(SIGTERM, SIG_DFL)
        while true { sleep(3600) }
    } catch {
        FileHandle.standardError.write(Data("realtime-demo --serve-node: \(error)\n".utf8))
        exit(2)
    }
}

var requestedPort: UInt16 = 0
var singleNode = false
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--port":
        guard let text = arguments.popFirst(), let port = UInt16(text) else {
            FileHandle.standardError.write(Data("realtime-demo: --port needs a number 0–65535\n".utf8))
            exit(2)
        }
        requestedPort = port
    case "--single-node":
        singleNode = true
    case "-h", "--help":
        say(usage)
        exit(0)
    default:
        FileHandle.standardError.write(Data("realtime-demo: unknown argument \(argument)\n\(usage)\n".utf8))
        exit(2)
    }
}

let app = RealtimeApp(id: "demo", key: "demo-key", secret: "demo-secret", activityTimeout: 120)
let channelName = "private-encrypted-demo-prices"
let presenceName = "presence-demo"
/// The app backend's signer: authorisations, the user signin and the channel's encryption.
let signer = try AuthorizationSigner(key: app.key, secret: app.secret, encryptionMasterKey: Array(repeating: 0x42, count: 32))
let start = ContinuousClock.now

/// One timeline line: seconds since start, then the text.
@Sendable func log(_ text: String) {
    let elapsed = (ContinuousClock.now - start).seconds
    say(String(format: "%7.3f s  ", elapsed) + text)
}

func fail(_ text: String) -> Never {
    log("FAILED: \(text)")
    runningCluster.withLock { $0?.stop() }
    exit(1)
}

/// The rooms' history store. A restarted server gets the same one, as a node of a cluster finds
/// its shared store (Redis) again: what was published before and after the restart is replayed.
let roomStore = InMemoryRoomStore()
let roomName = "orders:demo"

func startServer(port: UInt16, restart: Bool = false) -> RealtimeServer {
    var options = RealtimeServerOptions(host: "127.0.0.1", port: port, apps: [app])
    options.quiet = true
    // A restarted server may find its port still held for a moment: retry briefly then only.
    var lastError: (any Error)?
    for _ in 0..<(restart ? 50 : 1) {
        do {
            return try RealtimeServer(options: options) { $0.roomStore = roomStore }
        } catch {
            lastError = error
            usleep(100_000)
        }
    }
    fail(lastError.map { "\($0)" } ?? "cannot listen on 127.0.0.1:\(port)")
}

/// What the client received and what the server handed to it.
struct Tally {
    var published = 0
    /// Sequence numbers the server queued to the client's connection.
    var deliveredToClient: Set<Int> = []
    var received: Set<Int> = []
    var duplicates = 0
    var receivedSinceReport = 0
}

let tally = Locked(Tally())

/// What the room delivered.
struct RoomTally {
    var published = 0
    var received: Set<UInt64> = []
    var deliveries = 0
    var replayed = 0
    var duplicates = 0
    var outOfOrder = 0
    var lastID: UInt64 = 0
    var authRequests = 0
}

let roomTally = Locked(RoomTally())
/// The app's backend for rooms: declares the rule, answers the batched auth request.
let backend = RealtimeBackend(appKey: app.key, appSecret: app.secret)
try backend.room("orders:{id}", history: 1000)
let declaredRule = backend.rule(for: roomName)?.rule.rule
let server = Locked(startServer(port: requestedPort))
let port = server.withLock { $0.port }
log("server listening on ws://127.0.0.1:\(port)/app/\(app.key)")
log("client: full-jitter backoff, base 1 s, cap 5 s (default cap 30 s, lowered to keep the demo short); a connection up 1 s is healthy (default 5 s)")

let delivery = DispatchQueue(label: "realtime-demo.delivery")
var options = try BirdRealtime.Options(url: "ws://127.0.0.1:\(port)/app/\(app.key)")
options.deliveryQueue = delivery
// The seed's cap is 30 s (the client's default). With it, a restart that costs a few failed
// attempts could leave the client waiting up to 30 s; a 5 s cap keeps the demo under 30 s.
options.backoff = ExponentialBackoff(base: .seconds(1), cap: .seconds(5))
// Faults come every 1.5–2 s here. Under the default 5 s no connection would count as healthy,
// so the 4201 and 4200 below would be retried on the backoff instead of at once (the guard
// against servers that close every connection right after its handshake).
options.stableConnectionDuration = .seconds(1)
// The backend, in process: a real app would POST to its auth endpoint (options.authEndpoint).
options.authorizer = { request in
    let member = request.channelName == presenceName ? PresenceMember(userID: "demo-user", userInfo: .object(["name": .string("Demo")])) : nil
    let answer = try signer.authorizeChannel(socketID: request.socketID, channel: request.channelName, member: member)
    delivery.async { log("backend: authorised \(request.channelName) for socket \(request.socketID)") }
    return answer
}
options.userAuthenticator = { socketID in
    delivery.async { log("backend: signed in demo-user for socket \(socketID)") }
    return try signer.authenticateUser(socketID: socketID, userData: #"{"id":"demo-user"}"#)
}
options.roomAuthorizer = { rooms in
    roomTally.withLock { $0.authRequests += 1 }
    delivery.async { log("backend: room tokens for \(rooms) (one request)") }
    return await backend.authorizeRooms(rooms, user: "demo-user")
}
let bird = BirdRealtime(options: options)

// The tokens are kept in globals: a registration lasts until cancel(), and a dropped token is
// memory LeakSanitizer finds unreachable at exit.
let stateToken = bird.onConnectionStateChange { previous, current in
    var line = "state \(previous) -> \(current)"
    if current == .connected, let id = bird.connection.connectionId { line += "  (socket \(id))" }
    log(line)
}
let errorToken = bird.onError { error in log("error \(error)") }
let signinErrorToken = bird.onSigninError { error in log("signin error \(error)") }
let reconnectLog = bird.reconnector.onEvent { event in
    // Logged on the delivery queue, so the lines keep their order with state changes.
    delivery.async { logReconnect(event) }
}

@Sendable func logReconnect(_ event: ReconnectEvent) {
    switch event {
    case .scheduled(let attempt, let delay):
        // Waits of at most 100 ms are the reconnector's minimum between attempts (after
        // immediate retries), not a backoff draw.
        let why = delay > .milliseconds(100) ? "full jitter" : "minimum spacing between attempts"
        log(String(format: "backoff: attempt %d in %.3f s", attempt, delay.seconds) + " (\(why))")
    case .attemptStarted(let attempt, let trigger):
        log("reconnect attempt \(attempt) (\(trigger.rawValue))")
    default:
        break
    }
}

bird.signin()
let channel = bird.subscribe(channelName)
channel.bind(ProtocolNamespace.bird.event(.subscriptionSucceeded)) { _ in log("subscribed to \(channelName)") }
channel.bind(ProtocolNamespace.bird.event(.subscriptionError)) { event in log("subscription error on \(channelName): \(event.data ?? "")") }
let presence = bird.subscribe(presenceName)
presence.bind(ProtocolNamespace.bird.event(.subscriptionSucceeded)) { _ in
    log("subscribed to \(presenceName): members \(presence.members.map(\.userID)), me \(presence.me?.userID ?? "?")")
}
channel.bind("price") { event in
    guard let seq = (try? event.decodeData([String: Int].self))?["seq"] else {
        log("error: an event without a sequence number: \(event.data ?? "")")
        return
    }
    tally.withLock { tally in
        if !tally.received.insert(seq).inserted { tally.duplicates += 1 }
        tally.receivedSinceReport += 1
    }
}

let room = bird.join(roomName)
room.bind("joined") { data, _ in
    let recovered = data["recovered"]?.bool.map { $0 ? ", recovered" : ", NOT recovered" } ?? ""
    let replayed = roomTally.withLock { $0.replayed }
    log("room \(roomName) joined at id \(Int(data["id"]?.number ?? 0))\(recovered) (replayed so far: \(replayed))")
}
room.bind("error") { data, _ in log("room \(roomName) error \(data["code"]?.string ?? "?"): \(data["message"]?.string ?? "")") }
room.bind("tick") { _, meta in
    roomTally.withLock { tally in
        tally.deliveries += 1
        if meta.replayed { tally.replayed += 1 }
        if !tally.received.insert(meta.id).inserted { tally.duplicates += 1 }
        if meta.id < tally.lastID { tally.outOfOrder += 1 }
        tally.lastID = max(tally.lastID, meta.id)
    }
}

/// Waits until `condition` holds (checked every 10 ms) or fails the demo after `timeout`.
func wait(_ what: String, timeout: Duration = .seconds(12), until condition: () -> Bool) {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now > deadline { fail("timed out waiting for \(what)") }
        usleep(10_000)
    }
}

func waitSubscribed() {
    wait("the subscriptions") { bird.connectionState == .connected && channel.subscribed && presence.subscribed && room.state == .joined }
}

// The publisher: one event every 40 ms, numbered; the server says whether it reached the
// client's connection (channels do not replay what was published while it was away).
let publishing = Locked(true)
/// The room's events are published throughout the faults (the room replays what the client
/// missed), except while the server is down: the app's server cannot publish then.
let serverUp = Locked(true)
/// The publisher's timer (a function, so that its handler is not isolated to the main actor
/// of this file's top-level code: it runs on its own queue).
func makePublisher() -> any DispatchSourceTimer {
    let publisher = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "realtime-demo.publisher"))
    publisher.schedule(deadline: .now(), repeating: .milliseconds(40))
    @Sendable func publishPrice() {
        let seq = tally.withLock { tally -> Int in
            tally.published += 1
            return tally.published
        }
        // Sealed for the channel: the server relays ciphertext it cannot read.
    guard let sealed = try? signer.encrypt(data: "{\"seq\":\(seq)}", channel: channelName) else { return }
    let queued = server.withLock { $0.hub.publish(appID: app.id, channels: [channelName], event: "price", data: sealed) }
        if queued > 0 { tally.withLock { _ = $0.deliveredToClient.insert(seq) } }
    }
    publisher.setEventHandler {
        if publishing.withLock({ $0 }) { publishPrice() }
        guard serverUp.withLock({ $0 }) else { return }
        // With the rule the backend declares, as an app server's publish carries it
        // (`RealtimeBackend.roomEventBody`): a restarted server keeps history by it before
        // any member's token tells it again.
        let kept = try? server.withLock { try $0.hub.publishRoom(appID: app.id, room: roomName, event: "tick", data: #"{"at":"now"}"#, rule: declaredRule) }
        if kept != nil { roomTally.withLock { $0.published += 1 } }
    }
    return publisher
}

let publisher = makePublisher()

/// Prints how many events arrived since the last report.
func report() {
    let (count, total) = tally.withLock { tally -> (Int, Int) in
        defer { tally.receivedSinceReport = 0 }
        return (tally.receivedSinceReport, tally.received.count)
    }
    log("received \(count) events (\(total) in all)")
}

/// Runs a fault: publishing pauses for 120 ms first so that every event already handed to the
/// connection has arrived (a drop loses what is in flight, and that is not the client's loss).
func inject(_ name: String, _ fault: () -> Void) {
    publishing.withLock { $0 = false }
    usleep(120_000)
    report()
    log("FAULT: \(name)")
    fault()
    publishing.withLock { $0 = true }
}

func socketID() -> String {
    guard let id = bird.connection.connectionId else { fail("no connection id while connected") }
    return id
}

bird.connect()
waitSubscribed()
publisher.resume()
usleep(2_000_000)

inject("the server closes the connection with 4201 (reconnect now)") {
    _ = server.withLock { $0.hub.close(appID: app.id, socketID: socketID(), code: 4201, reason: "demo: the server closes with 4201") }
}
waitSubscribed()
usleep(1_500_000)

inject("the socket is dropped without a close frame (1006, backoff)") {
    _ = server.withLock { $0.hub.drop(appID: app.id, socketID: socketID()) }
}
waitSubscribed()
usleep(1_500_000)

inject("the server restarts (clients closed with 4200, then 1.5 s down; its room store is kept)") {
    serverUp.withLock { $0 = false }
    server.withLock { $0.shutdown() }
}
usleep(1_500_000)
server.withLock { $0 = startServer(port: UInt16(port), restart: true) }
serverUp.withLock { $0 = true }
log("server restarted on port \(port)")
waitSubscribed()
usleep(1_500_000)

inject("the backend terminates the connection (4009: failed, no retry)") {
    _ = server.withLock { $0.hub.terminate(appID: app.id, socketID: socketID()) }
}
wait("the failed state") { bird.connectionState == .failed }
usleep(1_000_000)
log("app: connect() after failed")
bird.connect()
waitSubscribed()
usleep(1_500_000)

publishing.withLock { $0 = false }
serverUp.withLock { $0 = false }
usleep(300_000)
report()
let roomPublished = roomTally.withLock { $0.published }
wait("the room's last events") { roomTally.withLock { $0.received.count } >= roomPublished }
bird.disconnect()
delivery.sync {}
publisher.cancel()
reconnectLog.cancel()

let summary = tally.withLock { $0 }
let rooms = roomTally.withLock { $0 }
// Ids grow by one per kept event from 1 (one store throughout): every id up to the count published must have arrived.
let roomsLost = rooms.published - rooms.received.filter { $0 >= 1 && $0 <= UInt64(rooms.published) }.count
let lost = summary.deliveredToClient.subtracting(summary.received).count
let unexpected = summary.received.subtracting(summary.deliveredToClient).count
let away = summary.published - summary.deliveredToClient.count
say("")
say("published \(summary.published), received \(summary.received.count), lost \(lost), duplicated \(summary.duplicates)")
say("(\(away) published while the client was away were not delivered: channels do not replay)")
say("rooms: published \(rooms.published), received \(rooms.received.count) (replayed \(rooms.replayed)), lost \(roomsLost), duplicated \(rooms.duplicates), out of order \(rooms.outOfOrder)")
say("(room tokens: \(rooms.authRequests) auth request(s); reconnects reused the kept token, the connect() after failed rejoined with it too)")
server.withLock { $0.shutdown() }
if unexpected > 0 { fail("\(unexpected) events arrived that the server never queued") }
let roomsClean = roomsLost == 0 && rooms.duplicates == 0 && rooms.outOfOrder == 0 && rooms.replayed > 0
let clusterClean = singleNode || runOnTwoNodes()
// Whenever the demo exits non-zero it says why, in one line at the end.
var failures: [String] = []
if lost > 0 || summary.duplicates > 0 {
    failures.append("the channel lost \(lost) and duplicated \(summary.duplicates) of the events the server delivered to the client")
}
if !roomsClean {
    failures.append("the room lost \(roomsLost), duplicated \(rooms.duplicates), reordered \(rooms.outOfOrder) and replayed \(rooms.replayed) events (none replayed is a failure too)")
}
if !clusterClean { failures.append("the two-node run failed (its lines above say how)") }
if !failures.isEmpty { fail(failures.joined(separator: "; ")) }
exit(0)
