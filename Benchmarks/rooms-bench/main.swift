// rooms-bench: rooms on the reference server over loopback: resume of 1,000 missed events,
// a history page of 100, publish → delivery with 1,000 members, memory per kept event, and the
// stores a single node may use (in memory, SQLite for --data), and a resume of 100,000 missed
// events through the Swift client with the server in its own process (`--backlog-only`: that alone).
// The server is embedded (RealtimeServer); clients are the WebSocket module's, in this process.
// `--deflate-only`: a replay of 1,000 events over a 1 Mbit/s link, with permessage-deflate and without,
// and the server's memory per compressing connection (Python's websockets as the clients).
// Run: swift build -c release && swift run -c release rooms-bench [--threads N] [--backlog-only | --stores-only | --deflate-only]
import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import class Spawn.ChildProcess
import RealtimeBackend
import SystemSupport
import RealtimeProtocol
import RealtimeServer
import WebSocket

func progress(_ message: String) { FileHandle.standardError.write(Data("\(message)\n".utf8)) }
func fail(_ message: String) -> Never {
    progress("rooms-bench: \(message)")
    exit(1)
}

// A thousand clients and their servers' sockets: the soft descriptor limit raised to the hard one.
DescriptorLimit.raiseSoftLimit()

let app = RealtimeApp(id: "1", key: "bench-key", secret: "bench-secret", maxConnections: 100_000, compression: true)
/// `--threads N`: the servers' service loops (their default, one per core, without it).
let threadsAsked = CommandLine.arguments.firstIndex(of: "--threads").flatMap { index in
    CommandLine.arguments.indices.contains(index + 1) ? Int(CommandLine.arguments[index + 1]) : nil
}
var serverOptions = RealtimeServerOptions(port: 0, apps: [app])
if let threadsAsked { serverOptions.threads = threadsAsked }
let server = try RealtimeServer(options: serverOptions)
let hub = server.hub
var contextOptions = WebSocketContext.Options()
contextOptions.timeout = .seconds(30)
let context = try WebSocketContext(options: contextOptions)
let url = server.url(appKey: app.key)
let origin = ContinuousClock.now

func token(_ room: String, user: String) -> String {
    let claims = RoomClaims(subject: user, room: room, expiresAt: Int(Date().timeIntervalSince1970) + 3600, rule: RoomRule(history: 1000))
    return (try? JSONWebToken.sign(claims, secret: app.secret)) ?? ""
}
func frame(_ event: ProtocolEventName, _ payload: some Encodable) -> String {
    (try? RealtimeMessage(event: ProtocolNamespace.bird.event(event), payload: payload).text) ?? ""
}
func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}
func percentile(_ sorted: [Double], _ p: Double) -> Double {
    sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * p).rounded(.up)) - 1))]
}
func rss() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
    return kilobytes * 1024
}

/// A client that timestamps what it receives: handshakes, `joined`, kept events, pages.
final class Client: Sendable {
    struct State {
        var handshake = false
        var joined = 0
        var kept = 0
        var lastKeptAt: Duration = .zero
        var joinedAt: Duration = .zero
        var pages = 0
        var pageAt: Duration = .zero
        var latencies: [Double] = []
    }
    let state = Locked(State())
    let signal = DispatchSemaphore(value: 0)
    let connection = Locked<WebSocketConnection?>(nil)

    init(url: String = url, context: WebSocketContext = context) throws {
        let connection = try context.connect(url: url) { [state, signal] event in
            guard case .text(let text) = event else { return }
            let now = ContinuousClock.now - origin
            state.withLock { state in
                if text.contains("connection_established") {
                    state.handshake = true
                } else if text.contains("room_history") {
                    state.pages += 1
                    state.pageAt = now
                } else if text.contains(#"\"event\":\"joined\""#) {
                    state.joined += 1
                    state.joinedAt = now
                } else if text.contains(#"\"meta\":{"#) {
                    state.kept += 1
                    state.lastKeptAt = now
                    if let range = text.range(of: "t="), let sent = Int64(text[range.upperBound...].prefix { $0.isNumber }) {
                        state.latencies.append(milliseconds(now - .nanoseconds(sent)))
                    }
                }
            }
            signal.signal()
        }
        self.connection.withLock { $0 = connection }
        guard wait(seconds: 30, { $0.handshake }) else { fail("no handshake") }
    }

    func send(_ text: String) { try? connection.withLock { $0 }?.send(text: text) }
    func close() { try? connection.withLock { $0 }?.close() }

    func wait(seconds: Int, _ condition: (State) -> Bool) -> Bool {
        let deadline = DispatchTime.now() + .seconds(seconds)
        while !state.withLock({ condition($0) }) {
            if signal.wait(timeout: deadline) == .timedOut { return state.withLock { condition($0) } }
        }
        return true
    }
}

/// Publishes `events` stamped events 20 ms apart through `publish` (given the stamp text
/// `t=<nanoseconds since origin>`), waits until every client counted them all, and returns the
/// sorted delivery latencies in milliseconds.
func fanOut(_ clients: [Client], events: Int, _ publish: (String) throws -> Void) throws -> [Double] {
    for _ in 0..<events {
        let stamp = ContinuousClock.now - origin
        try publish("t=\(stamp.components.seconds * 1_000_000_000 + stamp.components.attoseconds / 1_000_000_000)")
        usleep(20_000)
    }
    for client in clients { guard client.wait(seconds: 30, { $0.kept == events }) else { fail("a member missed events") } }
    return clients.flatMap { $0.state.withLock { $0.latencies } }.sorted()
}

nonisolated(unsafe) var rows: [(String, String, String)] = []
func record(_ name: String, _ value: String, _ target: String) {
    rows.append((name, value, target))
    progress("  \(name): \(value)")
}

/// (6) A member resuming 100,000 missed events, the server in its own process (`BacklogResume`).
func backlog() {
    let serverPath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("realtime-server").path
    guard FileManager.default.isExecutableFile(atPath: serverPath) else { fail("build realtime-server too (swift build -c release)") }
    do {
        for (name, value, target) in try BacklogResume(serverPath: serverPath, app: app).run() { record(name, value, target) }
    } catch {
        fail("backlog: \(error)")
    }
}

func deflateOnly() {
    deflateOverSlowLink()
    deflateMemory()
}
for (flag, only) in [("--backlog-only", backlog), ("--stores-only", stores), ("--deflate-only", deflateOnly)] where CommandLine.arguments.contains(flag) {
    only()
    print("| measurement | result | target |")
    print("|---|---|---|")
    for (name, value, target) in rows { print("| \(name) | \(value) | \(target) |") }
    exit(0)
}

// (1) Resume of 1,000 missed events: join with a position 1,000 events back; time from sending
// the join to the last replayed frame and to `joined` (after it).
do {
    progress("resume of 1,000 missed events")
    let room = "resume:1"
    let first = try hub.publishRoom(appID: app.id, room: room, event: "x", data: "{}", rule: RoomRule(history: 1000))
    var replay: [Double] = []
    var joined: [Double] = []
    for round in 0..<20 {
        let base = try hub.publishRoom(appID: app.id, room: room, event: "x", data: "{}").record.id
        for index in 1...1000 { try hub.publishRoom(appID: app.id, room: room, event: "tick", data: #"{"n":\#(index),"text":"an event of a realistic size, about a hundred bytes"}"#) }
        let client = try Client()
        let sent = ContinuousClock.now - origin
        client.send(frame(.roomJoin, RoomJoinRequest(room: room, token: token(room, user: "u\(round)"), since: RoomPosition(epoch: first.epoch, id: base))))
        guard client.wait(seconds: 30, { $0.joined == 1 && $0.kept == 1000 }) else { fail("resume round \(round): \(client.state.withLock { $0.kept }) replayed") }
        client.state.withLock { state in
            replay.append(milliseconds(state.lastKeptAt - sent))
            joined.append(milliseconds(state.joinedAt - sent))
        }
        client.close()
    }
    replay.sort()
    joined.sort()
    record("resume of 1,000 missed events: join sent → last replayed frame, p50 / p99 (20 rounds)",
           String(format: "%.1f / %.1f ms", percentile(replay, 0.5), percentile(replay, 0.99)), "≤ 50 ms")
    record("resume of 1,000 missed events: join sent → joined, p50 (20 rounds)", String(format: "%.1f ms", percentile(joined, 0.5)), "—")
}

// (2) A history page of 100 over the socket: request sent → page received.
do {
    progress("history pages of 100")
    let room = "resume:1"
    let client = try Client()
    client.send(frame(.roomJoin, RoomJoinRequest(room: room, token: token(room, user: "pager"))))
    guard client.wait(seconds: 30, { $0.joined == 1 }) else { fail("no joined for paging") }
    var pages: [Double] = []
    for index in 0..<500 {
        let sent = ContinuousClock.now - origin
        client.send(frame(.roomHistory, RoomHistoryRequest(room: room, request: "p\(index)", limit: 100, before: UInt64(1000 + index))))
        guard client.wait(seconds: 10, { $0.pages == index + 1 }) else { fail("page \(index) not answered") }
        pages.append(milliseconds(client.state.withLock { $0.pageAt } - sent))
    }
    pages.sort()
    record("history page of 100 over the socket: request → page, p50 / p99 (500 pages)",
           String(format: "%.2f / %.2f ms", percentile(pages, 0.5), percentile(pages, 0.99)), "≤ 2 ms")
    client.close()
}

// (3) Publish → delivery with 1,000 members of one room.
do {
    progress("publish → delivery, 1,000 members")
    let room = "crowd:1"
    var clients: [Client] = []
    for index in 0..<1000 {
        let client = try Client()
        client.send(frame(.roomJoin, RoomJoinRequest(room: room, token: token(room, user: "m\(index)"))))
        clients.append(client)
    }
    for client in clients { guard client.wait(seconds: 30, { $0.joined == 1 }) else { fail("a member did not join") } }
    let events = 100
    let latencies = try fanOut(clients, events: events) { stamp in
        try hub.publishRoom(appID: app.id, room: room, event: "tick", data: #"{"t":"\#(stamp)"}"#)
    }
    record("room publish → member delivery, 1,000 members, p50 / p99 (\(events) events, \(latencies.count) deliveries)",
           String(format: "%.1f / %.1f ms", percentile(latencies, 0.5), percentile(latencies, 0.99)), "p99 ≤ 20 ms")

    // The same clients on a public channel, for comparison: the transport's share of the cost.
    for client in clients {
        client.state.withLock { $0.latencies = []; $0.kept = 0 }
        client.send(frame(.subscribe, SubscribeRequest(channel: "crowd")))
    }
    usleep(500_000)
    // `"meta":{` in the data makes the client count it as it counts room events.
    let channelLatencies = try fanOut(clients, events: events) { stamp in
        hub.publish(appID: app.id, channels: ["crowd"], event: "tick", data: #"{"meta":{"t":"\#(stamp)"}}"#)
    }
    record("channel publish → subscriber delivery, the same 1,000 clients, p50 / p99 (for comparison)",
           String(format: "%.1f / %.1f ms", percentile(channelLatencies, 0.5), percentile(channelLatencies, 0.99)), "—")
    for client in clients { client.close() }
}

// (3b) The same fan-out with the server in its own process (`realtime-server`, built beside
// this executable), published through the signed HTTP API, as realtime-bench measures channels.
do {
    let serverPath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("realtime-server").path
    guard FileManager.default.isExecutableFile(atPath: serverPath) else { fail("build realtime-server too (swift build -c release)") }
    progress("publish → delivery, 1,000 members, server in its own process")
    let child = try ChildProcess(serverPath, ["--port", "0", "--app-id", app.id, "--app-key", app.key, "--app-secret", app.secret, "--memory", "--quiet"]
        + (threadsAsked.map { ["--threads", String($0)] } ?? []), standardError: .inherit)
    defer { _ = child.signal(SIGTERM) }
    let line = try child.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("port ") }
    guard let port = line.split(separator: " ").last.flatMap({ Int($0) }) else { fail("no port from realtime-server") }
    let remote = "ws://127.0.0.1:\(port)/app/\(app.key)"
    let room = "crowd:2"
    var clients: [Client] = []
    for index in 0..<1000 {
        let client = try Client(url: remote)
        client.send(frame(.roomJoin, RoomJoinRequest(room: room, token: token(room, user: "m\(index)"))))
        clients.append(client)
    }
    for client in clients { guard client.wait(seconds: 30, { $0.joined == 1 }) else { fail("a member did not join the remote room") } }
    // The app's server publishes as RealtimeBackend signs it (the room's rule declared).
    let backend = RealtimeBackend(appKey: app.key, appSecret: app.secret)
    try backend.room("crowd:{n}", history: 100)
    func publish(_ stamp: String) {
        guard let request = try? backend.roomEventRequest(server: URL(string: "http://127.0.0.1:\(port)")!, appID: app.id, room: room, event: "tick", data: .object(["t": .string(stamp)])) else {
            fail("cannot build the publish request")
        }
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: request) { _, _, _ in done.signal() }.resume()
        done.wait()
    }
    let events = 100
    let latencies = try fanOut(clients, events: events) { stamp in publish(stamp) }
    record("room publish (HTTP API) → member delivery, 1,000 members, server in its own process, p50 / p99 (\(events) events)",
           String(format: "%.1f / %.1f ms", percentile(latencies, 0.5), percentile(latencies, 0.99)), "p99 ≤ 20 ms")
    for client in clients { client.close() }
}

// (4) Memory per kept event: 100 rooms × 1,000 events of about 100 bytes of data, in a store
// of its own; RSS delta over the events kept.
do {
    progress("memory per kept event")
    let store = InMemoryRoomStore()
    let rule = RoomRule(history: 1000)
    // Every event's strings are its own (as events parsed from the wire are), not one shared buffer.
    func data(_ index: Int) -> String { #"{"n":\#(100_000 + index),"status":"paid","text":"an event of a realistic size, about 100 bytes."}"# }
    let before = rss()
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    for room in 0..<100 {
        for index in 0..<1000 { try store.append(app: "1", room: "mem:\(room)", event: "updated-\(index % 10)", data: data(index), from: "user-\(room)-\(index)", rule: rule, at: now) }
    }
    let after = rss()
    record("memory per kept event (100,000 events, \(data(0).utf8.count) bytes of data each; RSS delta / events)",
           "\((after - before) / 100_000) bytes", "—")
    record("the store's own count for the same events (RoomEventRecord.size)", "\(store.bytes / 100_000) bytes", "—")
}

// (5) The stores a single node may use: appends a second (each one the store's whole work for a
// publish: keep, trim to the rule, for SQLite one committed transaction) into 10 rooms with
// history 1,000, and a resume's read of 1,000 events, in memory and in SQLite (`--data`); then
// SQLite's appends into one room that keeps 100,000 events (a publish's trim must not read them all).
func stores() {
    do {
        try storeRows()
    } catch {
        fail("stores: \(error)")
    }
}

func storeRows() throws {
    progress("stores: memory and SQLite")
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("rooms-bench-\(getpid())").path
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(atPath: folder) }
    let stores: [(String, any RoomHistoryStore)] = [
        ("in memory", InMemoryRoomStore()),
        ("SQLite, WAL, synchronous=NORMAL (--data)", try SQLiteRoomStore(path: folder + "/rooms.sqlite3")),
    ]
    let rule = RoomRule(history: 1000)
    let data = #"{"n":100000,"status":"paid","text":"an event of a realistic size, about 100 bytes."}"#
    for (name, store) in stores {
        let appends = 20_000
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let began = ContinuousClock.now
        for index in 0..<appends {
            try store.append(app: "1", room: "store:\(index % 10)", event: "updated", data: data, from: nil, rule: rule, at: now)
        }
        let seconds = milliseconds(ContinuousClock.now - began) / 1000
        let position = try store.position(app: "1", room: "store:0", now: now)
        var reads: [Double] = []
        for _ in 0..<20 {
            let readBegan = ContinuousClock.now
            guard case .events(let events, _) = try store.replay(app: "1", room: "store:0", after: RoomPosition(epoch: position.epoch, id: position.id - 1000),
                                                                now: now, maxBytes: 2 << 20), events.count == 1000 else { fail("the \(name) store's replay") }
            reads.append(milliseconds(ContinuousClock.now - readBegan))
        }
        reads.sort()
        record("\(name): appends a second (\(appends) into 10 rooms with history 1,000)", String(format: "%.0f", Double(appends) / seconds), "—")
        record("\(name): a resume's read of 1,000 events, p50 (20 reads)", String(format: "%.2f ms", percentile(reads, 0.5)), "—")
    }

    // One room that keeps 100,000 events: filled, then 2,000 appends timed (each trims one).
    let big = try SQLiteRoomStore(path: folder + "/big.sqlite3")
    let bigRule = RoomRule(history: 100_000)
    let now = Int64(Date().timeIntervalSince1970 * 1000)
    for _ in 0..<100_000 { try big.append(app: "1", room: "big", event: "updated", data: data, from: nil, rule: bigRule, at: now) }
    let began = ContinuousClock.now
    for _ in 0..<2_000 { try big.append(app: "1", room: "big", event: "updated", data: data, from: nil, rule: bigRule, at: now) }
    let seconds = milliseconds(ContinuousClock.now - began) / 1000
    record("SQLite: appends a second into one room keeping 100,000 events (2,000 appends, each trims the oldest)", String(format: "%.0f", 2_000 / seconds), "—")
}

stores()

backlog()

print("| measurement | result | target |")
print("|---|---|---|")
for (name, value, target) in rows { print("| \(name) | \(value) | \(target) |") }
context.shutdown()
server.shutdown(grace: .zero)
