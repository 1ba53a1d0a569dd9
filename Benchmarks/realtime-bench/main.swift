// realtime-bench: the reference server under load, over loopback. The server runs as its own
// process (`realtime-server`, built beside this executable); the load generator is this process,
// with clients from the WebSocket module. Run: swift build -c release && swift run -c release realtime-bench [connections] [--threads N]
// (`--threads` is handed to the server: its service loops; the server's default, one per core, without it).
import CurlHTTP
import Dispatch
import Foundation
import SystemSupport
import RealtimeProtocol
import class Spawn.ChildProcess
import WebSocket

let connectionsWanted = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 10_000
let threadsAsked = CommandLine.arguments.firstIndex(of: "--threads").flatMap { index in
    CommandLine.arguments.indices.contains(index + 1) ? Int(CommandLine.arguments[index + 1]) : nil
}
let appKey = "bench-key", appSecret = "bench-secret"

/// The server process, ended on every way out (`exit` skips `defer` at top level).
nonisolated(unsafe) var serverProcess: ChildProcess?

func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("realtime-bench: \(message)\n".utf8))
    serverProcess?.signal(SIGTERM)
    exit(1)
}
func progress(_ message: String) { FileHandle.standardError.write(Data("\(message)\n".utf8)) }

// Both this process and the server need a file descriptor per connection.
var limit = rlimit()
getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
limit.rlim_cur = limit.rlim_max
setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
guard Int(limit.rlim_cur) > connectionsWanted + 200 else { fail("ulimit -n \(limit.rlim_cur) is too low for \(connectionsWanted) connections") }

// MARK: - The server process

let serverPath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("realtime-server").path
guard FileManager.default.isExecutableFile(atPath: serverPath) else { fail("build realtime-server too (swift build -c release)") }
let server = try ChildProcess(
    serverPath,
    ["--port", "0", "--app-id", "1", "--app-key", appKey, "--app-secret", appSecret, "--max-connections", "100000", "--memory", "--quiet"]
        + (threadsAsked.map { ["--threads", String($0)] } ?? []),
    standardError: .inherit
)
serverProcess = server
let portLine = (try? server.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("port ") }) ?? server.outputLines.joined(separator: "\n")
guard let port = portLine.split(separator: " ").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else { fail("no port from realtime-server: \(portLine)") }

func serverRSS() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(server.processIdentifier)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
    return kilobytes * 1024
}

/// The server process's CPU time so far, user and system (`/proc/<pid>/stat`'s utime and
/// stime, in clock ticks), in seconds.
func serverCPUSeconds() -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(server.processIdentifier)/stat", encoding: .utf8),
          let end = stat.lastIndex(of: ")") else { return 0 }
    // After the command's closing parenthesis: the state is field 3, utime 14 and stime 15.
    let fields = stat[stat.index(after: end)...].split(separator: " ")
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

// MARK: - Clients

/// Where `needle` starts in `text`'s UTF-8 bytes, or nil. Foundation's `contains`
/// bridges to NSString and the generic `firstRange(of:)` resolves metadata per call: either
/// cost the load generator more CPU per delivery than the server spent.
func offset(of needle: String, in text: String) -> Int? {
    var text = text, needle = needle
    return text.withUTF8 { haystack in
        needle.withUTF8 { needle in
            guard !needle.isEmpty, haystack.count >= needle.count else { return nil }
            outer: for start in 0...(haystack.count - needle.count) {
                for index in 0..<needle.count where haystack[start + index] != needle[index] { continue outer }
                return start
            }
            return nil
        }
    }
}
func holds(_ text: String, _ needle: String) -> Bool { offset(of: needle, in: text) != nil }

/// The decimal number after `t=` in `text` (the publisher's timestamp), or nil.
func stampedNanoseconds(_ text: String) -> Int64? {
    guard let start = offset(of: "t=", in: text) else { return nil }
    var value: Int64 = 0, digits = 0
    for byte in text.utf8.dropFirst(start + 2) {
        guard byte >= 0x30, byte <= 0x39 else { break }
        value = value * 10 + Int64(byte - 0x30)
        digits += 1
    }
    return digits > 0 ? value : nil
}

/// One client: counts handshakes and records delivery latencies of timestamped events.
///
/// Handlers only count; `wait` polls the counts every millisecond. A semaphore signalled per
/// delivery woke the waiting thread 200,000 times in the 10,000-subscriber fan-out, on the same
/// two cores as the server being measured.
final class Load: Sendable {
    struct State {
        var established = 0
        var subscribed = 0
        var latencies: [Duration] = []
        var received = 0
        var closed = 0
        var joined = 0
    }
    let state = Locked(State())
    let origin = ContinuousClock.now

    /// Handles a frame; event data `t=<nanoseconds since origin>` gives the latency.
    func handle(_ event: WebSocketEvent, connection: WebSocketConnection) {
        switch event {
        case .text(let text):
            if holds(text, "connection_established") {
                state.withLock { $0.established += 1 }
            } else if holds(text, "subscription_succeeded") {
                state.withLock { $0.subscribed += 1 }
            } else if let sent = stampedNanoseconds(text) {
                let latency = (ContinuousClock.now - origin) - .nanoseconds(sent)
                state.withLock { state in
                    state.latencies.append(latency)
                    state.received += 1
                }
            } else if holds(text, #""event":"s""#) {
                state.withLock { $0.received += 1 }
            } else if holds(text, #"\"event\":\"joined\""#) {
                state.withLock { $0.joined += 1 }
            }
        case .closed, .failed:
            state.withLock { $0.closed += 1 }
        default:
            break
        }
    }

    func stamp() -> String { "t=\((ContinuousClock.now - origin).components.seconds * 1_000_000_000 + (ContinuousClock.now - origin).components.attoseconds / 1_000_000_000)" }

    /// Waits until `condition` holds, for at most `seconds`.
    func wait(seconds: Int, _ condition: (State) -> Bool) -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !state.withLock({ condition($0) }) {
            if ContinuousClock.now >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.001)
        }
        return true
    }
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}
func percentile(_ sorted: [Duration], _ p: Double) -> Duration {
    sorted[min(sorted.count - 1, max(0, Int((Double(sorted.count) * p).rounded(.up)) - 1))]
}

/// Publishes through the signed HTTP API, with libcurl (`CurlHTTP`): URLSession on Linux kept a
/// core busy in its dispatch sources, beside the server being measured.
func publish(_ body: String, path: String = "/apps/1/events") {
    let bytes = Array(body.utf8)
    let parameters = RESTSignature.signedParameters(method: "POST", path: path, body: bytes, key: appKey, secret: appSecret, timestamp: Int(Date().timeIntervalSince1970))
    var components = URLComponents(string: "http://127.0.0.1:\(port)\(path)")!
    components.queryItems = parameters.map { URLQueryItem(name: $0.key, value: $0.value) }
    let answer = CurlHTTP.post(url: components.url!.absoluteString, body: bytes, headers: ["Content-Type: application/json"],
                               timeout: .seconds(30), maxResponseBytes: 4096)
    guard case .success(let reply) = answer, reply.status == 200 else { fail("publish answered \(answer)") }
}

nonisolated(unsafe) var rows: [(String, String, String)] = []
func record(_ name: String, _ value: String, _ target: String) {
    rows.append((name, value, target))
    progress("  \(name): \(value)")
}

var options = WebSocketContext.Options()
options.timeout = .seconds(30)
let context = try WebSocketContext(options: options)
let load = Load()
let url = "ws://127.0.0.1:\(port)/app/\(appKey)"

// (1) Idle connections and memory.
let baseline = serverRSS()
let started = ContinuousClock.now
var connections: [WebSocketConnection] = []
connections.reserveCapacity(connectionsWanted)
let batch = 500
for first in stride(from: 0, to: connectionsWanted, by: batch) {
    for _ in first..<min(first + batch, connectionsWanted) {
        let holder = Locked<WebSocketConnection?>(nil)
        let connection = try context.connect(url: url) { event in
            if let connection = holder.withLock({ $0 }) { load.handle(event, connection: connection) }
        }
        holder.withLock { $0 = connection }
        connections.append(connection)
    }
    let target = min(first + batch, connectionsWanted)
    guard load.wait(seconds: 60, { $0.established >= target }) else { fail("only \(load.state.withLock { $0.established }) handshakes of \(target)") }
}
let establishTime = ContinuousClock.now - started
Thread.sleep(forTimeInterval: 1)
let perConnection = Double(serverRSS() - baseline) / Double(connectionsWanted)
record("idle connections held (\(connectionsWanted) opened in \(String(format: "%.1f", milliseconds(establishTime) / 1000)) s)", "\(load.state.withLock { $0.established }) open, \(load.state.withLock { $0.closed }) closed", "10,000")
record("server memory per idle connection (RSS delta / connections)", String(format: "%.1f KiB", perConnection / 1024), "—")

// (2) Fan-out latency to 1,000 and to all subscribers.
func subscribe(_ slice: ArraySlice<WebSocketConnection>, channel: String) {
    let before = load.state.withLock { $0.subscribed }
    for connection in slice { try? connection.send(text: #"{"event":"bird:subscribe","data":{"channel":"\#(channel)"}}"#) }
    guard load.wait(seconds: 60, { $0.subscribed >= before + slice.count }) else { fail("subscriptions to \(channel) incomplete") }
}
subscribe(connections.prefix(1000), channel: "fan-1k")
subscribe(connections[...], channel: "fan-all")
for (channel, subscribers) in [("fan-1k", 1000), ("fan-all", connectionsWanted)] {
    load.state.withLock { $0.latencies.removeAll() }
    let publishes = 20
    let cpuBefore = serverCPUSeconds()
    for index in 0..<publishes {
        let expected = (index + 1) * subscribers
        publish(#"{"name":"tick","channel":"\#(channel)","data":"\#(load.stamp())"}"#)
        guard load.wait(seconds: 30, { $0.latencies.count >= expected }) else { fail("fan-out to \(channel) lost events") }
    }
    let cpu = serverCPUSeconds() - cpuBefore
    let sorted = load.state.withLock { $0.latencies }.sorted()
    record("fan-out of one event to \(subscribers) subscribers, p50 / p99 (\(publishes) events, \(sorted.count) deliveries)",
           String(format: "%.1f / %.1f ms", milliseconds(percentile(sorted, 0.5)), milliseconds(percentile(sorted, 0.99))),
           subscribers >= 10_000 ? "p99 ≤ 100 ms" : "—")
    // Everything the server did meanwhile (the 20 signed publishes too, a sweep or two), over
    // the deliveries; `send-floor` prints the kernel's floor for the same sends.
    record("server CPU per delivery in that fan-out (user + system, /proc; clock ticks of 10 ms over \(String(format: "%.2f", cpu)) s)",
           String(format: "%.2f µs", cpu * 1e6 / Double(max(1, sorted.count))), subscribers >= 10_000 ? "≤ 1.5 × send-floor" : "—")
}

// (3) Publish-to-receive throughput on one channel with one subscriber.
subscribe(connections.suffix(1), channel: "stream")
let events = 20_000
let receivedBefore = load.state.withLock { $0.received }
let throughputStart = ContinuousClock.now
for first in stride(from: 0, to: events, by: 100) {
    let batchBody = (first..<min(first + 100, events)).map { #"{"name":"s","channel":"stream","data":"\#($0)"}"# }.joined(separator: ",")
    publish(#"{"batch":[\#(batchBody)]}"#, path: "/apps/1/batch_events")
}
guard load.wait(seconds: 120, { $0.received >= receivedBefore + events }) else { fail("throughput run lost events") }
let throughputTime = ContinuousClock.now - throughputStart
record("publish → receive throughput, one channel, one subscriber (\(events) events in batches of 100)",
       String(format: "%.0f events/s", Double(events) / (milliseconds(throughputTime) / 1000)), "—")

// (4) A good client's ping round trip, alone and while one peer floods frames whose 54 KB are
// an object of 5,000 keys (parsed in full by JSONSerialization before; now scanned once).
final class Pinger: Sendable {
    let pongs = DispatchSemaphore(value: 0)
    let closed = Locked(0)
    func handle(_ event: WebSocketEvent) {
        switch event {
        case .text(let text) where holds(text, "bird:pong"): pongs.signal()
        case .closed, .failed: closed.withLock { $0 += 1 }
        default: break
        }
    }
}
func connectPinger(_ pinger: Pinger) throws -> WebSocketConnection {
    let connection = try context.connect(url: url) { pinger.handle($0) }
    Thread.sleep(forTimeInterval: 0.3)
    return connection
}
func roundTrips(_ connection: WebSocketConnection, _ pinger: Pinger, count: Int) -> [Duration] {
    var times: [Duration] = []
    for _ in 0..<count {
        let sent = ContinuousClock.now
        try? connection.send(text: #"{"event":"bird:ping","data":{}}"#)
        guard pinger.pongs.wait(timeout: .now() + 5) == .success else { fail("a ping went unanswered for 5 s") }
        times.append(ContinuousClock.now - sent)
        Thread.sleep(forTimeInterval: 0.01)
    }
    return times.sorted()
}
let good = Pinger()
let goodConnection = try connectPinger(good)
/// The good client's 200 round trips while `flood` runs again and again on a thread of its
/// own, `interval` seconds apart.
func roundTrips(during flood: @escaping @Sendable () -> Void, every interval: TimeInterval) -> [Duration] {
    let flooding = Locked(true)
    let done = DispatchSemaphore(value: 0)
    Thread.detachNewThread {
        while flooding.withLock({ $0 }) {
            flood()
            Thread.sleep(forTimeInterval: interval)
        }
        done.signal()
    }
    let times = roundTrips(goodConnection, good, count: 200)
    flooding.withLock { $0 = false }
    done.wait()
    return times
}
let alone = roundTrips(goodConnection, good, count: 200)
record("a good client's ping round trip alone, median / p99 (200 pings)",
       String(format: "%.2f / %.2f ms", milliseconds(percentile(alone, 0.5)), milliseconds(percentile(alone, 0.99))), "—")
let attacker = Pinger()
let attackerConnection = try connectPinger(attacker)
let keys = "{" + (0..<5_000).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}"
let floodFrame = #"{"event":"bird:ping","pad":\#(keys)}"#
let floodSent = Locked(0)
// 15 frames of 62 KB a second: just under the server's 1 MiB per second read budget.
let flooded = roundTrips(during: {
    try? attackerConnection.send(text: floodFrame)
    floodSent.withLock { $0 += 1 }
}, every: 1.0 / 15)
record("the same while one peer sends \(floodFrame.utf8.count / 1000) KB frames of 5,000 keys at 15/s (\(floodSent.withLock { $0 }) sent, attacker closed: \(attacker.closed.withLock { $0 } > 0))",
       String(format: "%.2f / %.2f ms", milliseconds(percentile(flooded, 0.5)), milliseconds(percentile(flooded, 0.99))), "median ≤ 10 ms")
// (5) The good client's ping while 100 members each send 8 events a second into their room
// (800 a second, each written to the room's 100 members): the service loops parse the sends,
// the room lane keeps them, and every loop writes its members' deliveries.
let floodMembers = Array(connections.prefix(100))
let joinedBefore = load.state.withLock { $0.joined }
let floodRule = RoomRule(history: 100, membersSend: true)
for (index, connection) in floodMembers.enumerated() {
    let claims = RoomClaims(subject: "m\(index)", room: "flood:1", expiresAt: Int(Date().timeIntervalSince1970) + 3600, rule: floodRule)
    guard let token = try? JSONWebToken.sign(claims, secret: appSecret),
          let join = try? RealtimeMessage(event: "bird:room_join", payload: RoomJoinRequest(room: "flood:1", token: token)).text else { fail("cannot make a room token") }
    try? connection.send(text: join)
}
guard load.wait(seconds: 30, { $0.joined >= joinedBefore + floodMembers.count }) else { fail("the flood room's members did not join") }
let roomSend = (try? RealtimeMessage(event: "bird:room_send", payload: RoomSendRequest(room: "flood:1", event: "m", data: #"{"text":"a member's message of about sixty bytes"}"#)).text) ?? ""
let roomSent = Locked(0)
let roomFlooded = roundTrips(during: {
    for connection in floodMembers { try? connection.send(text: roomSend) }
    roomSent.withLock { $0 += floodMembers.count }
}, every: 0.125)
record("the same while 100 members each send 8 room events a second into their room of 100 (\(roomSent.withLock { $0 }) sent; 80,000 deliveries a second)",
       String(format: "%.2f / %.2f ms", milliseconds(percentile(roomFlooded, 0.5)), milliseconds(percentile(roomFlooded, 0.99))), "—")

goodConnection.abort()
attackerConnection.abort()

for connection in connections { connection.abort() }
context.shutdown()
server.signal(SIGTERM)
server.waitUntilExit()

print("service loops: \(threadsAsked.map(String.init) ?? "the server's default (one per core)")\n")
print("| measurement | result | target |")
print("|---|---|---|")
for (name, value, target) in rows { print("| \(name) | \(value) | \(target) |") }
