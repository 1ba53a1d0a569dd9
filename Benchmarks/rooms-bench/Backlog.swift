import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Realtime
import RealtimeBackend
import RealtimeProtocol
import RealtimeServer
import class Spawn.ChildProcess
import SystemSupport

/// (6) A member resuming a backlog (issue 34, "Streamed catch-up"): the Swift client joins a room
/// that keeps `count` events, disconnects, `count` events are published (the signed HTTP API,
/// 100 a batch), then it connects again. Measured: connect → the last replayed event handed to
/// its handler; the server's peak RSS during the resume above its RSS with the member away and
/// the events kept (`realtime-server` in its own process; its `VmHWM` reset through
/// `/proc/PID/clear_refs`); this process's (the client's) peak above its RSS before. Checked:
/// every event once, in id order, replayed, then a live event after them.
struct BacklogResume {
    var serverPath: String
    var app: RealtimeApp
    var count = 100_000

    /// One row per measurement, as `record` takes them.
    func run() throws -> [(String, String, String)] {
        let child = try ChildProcess(serverPath, ["--host", "127.0.0.1", "--port", "0", "--app-id", app.id, "--app-key", app.key, "--app-secret", app.secret, "--memory", "--quiet"],
                                     standardError: .inherit)
        defer { _ = child.signal(SIGTERM) }
        let line = try child.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("port ") }
        guard let port = line.split(separator: " ").last.flatMap({ Int($0) }) else { throw BacklogFailure("no port from realtime-server") }
        let pid = child.processIdentifier
        let backend = RealtimeBackend(appKey: app.key, appSecret: app.secret)
        try backend.room("backlog:{n}", history: RoomRule.maxHistory)
        let room = "backlog:1"

        var options = BirdRealtime.Options(appKey: app.key, host: "127.0.0.1", port: port)
        options.watchesReachability = false
        options.deliveryQueue = DispatchQueue(label: "bench.backlog.delivery")
        options.roomAuthorizer = { rooms in await backend.authorizeRooms(rooms, user: "bench") }
        let bird = BirdRealtime(options: options)
        let joined = bird.join(room)
        let seen = Locked(Seen())
        joined.bind("tick") { _, meta in seen.withLock { $0.take(meta) } }
        bird.connect()
        try wait("joined") { joined.state == .joined }
        bird.disconnect()
        try wait("away") { joined.state == .joining }

        progress("backlog: publishing \(count) events…")
        try publish(room: room, port: port, backend: backend)
        usleep(500_000)
        let serverIdle = Self.memory(pid, "VmRSS")
        Self.resetPeak(pid)
        let clientBefore = Self.memory(getpid(), "VmRSS")
        Self.resetPeak(getpid())

        progress("backlog: resuming \(count) missed events…")
        let began = ContinuousClock.now
        bird.connect()
        try wait("the last replayed event", seconds: 120, detail: { "\(seen.withLock { $0.received }) of \(count)" }) { seen.withLock { $0.received >= count } }
        let elapsed = seen.withLock { $0.lastAt ?? .now } - began
        let serverPeak = Self.memory(pid, "VmHWM") - serverIdle
        let clientPeak = Self.memory(getpid(), "VmHWM") - clientBefore
        try wait("joined after the replay") { joined.state == .joined }
        try publish(room: room, port: port, backend: backend, events: 1)
        try wait("the live event") { seen.withLock { $0.received >= count + 1 } }
        let final = seen.withLock { $0 }
        bird.disconnect()
        guard final.outOfOrder == 0, final.replayed == count, !final.lastReplayed else {
            throw BacklogFailure("\(final.received) received, \(final.replayed) replayed, \(final.outOfOrder) out of order or twice, last replayed: \(final.lastReplayed)")
        }
        let mebibyte = Double(1 << 20)
        return [
            ("resume of \(count) missed events (history \(count)): connect → the last replayed event handed to `bind`", String(format: "%.2f s", Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18), "≤ 2 s"),
            ("the same: the server's peak RSS above its RSS with the events kept and the member away", String(format: "%.1f MiB", Double(serverPeak) / mebibyte), "≤ 16 MiB"),
            ("the same: the client's peak RSS above its RSS before it connected", String(format: "%.1f MiB", Double(clientPeak) / mebibyte), "≤ 64 MiB"),
        ]
    }

    /// What the handler saw.
    struct Seen {
        var received = 0
        var replayed = 0
        var last: UInt64 = 0
        var outOfOrder = 0
        var lastReplayed = false
        var lastAt: ContinuousClock.Instant?

        mutating func take(_ meta: RoomEventMeta) {
            if last != 0, meta.id != last + 1 { outOfOrder += 1 }
            last = meta.id
            received += 1
            if meta.replayed { replayed += 1 }
            lastReplayed = meta.replayed
            lastAt = .now
        }
    }

    /// Publishes `events` (all of `count` by default) through `batch_room_events`, 100 a
    /// request, each with the room's rule.
    private func publish(room: String, port: Int, backend: RealtimeBackend, events: Int? = nil) throws {
        let total = events ?? count
        let rule = try RealtimeMessage.jsonText(RoomRule(history: RoomRule.maxHistory))
        var sent = 0
        while sent < total {
            let batch = (sent..<min(total, sent + 100)).map { #"{"name":"tick","room":"\#(room)","data":{"seq":\#($0),"p":1.5},"rule":\#(rule)}"# }
            let body = Array(#"{"batch":[\#(batch.joined(separator: ","))]}"#.utf8)
            let path = "/apps/\(app.id)/batch_room_events"
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(port)\(path)?\(backend.signedQuery(method: "POST", path: path, body: body))")!, timeoutInterval: 10)
            request.httpMethod = "POST"
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
            request.httpBody = Data(body)
            let status = Locked(0)
            let done = DispatchSemaphore(value: 0)
            URLSession.shared.dataTask(with: request) { _, response, _ in
                status.withLock { $0 = (response as? HTTPURLResponse)?.statusCode ?? 0 }
                done.signal()
            }.resume()
            done.wait()
            guard status.withLock({ $0 }) == 200 else { throw BacklogFailure("a batch was answered \(status.withLock { $0 })") }
            sent += batch.count
        }
    }

    private func wait(_ what: String, seconds: Int = 20, detail: () -> String = { "" }, _ condition: () -> Bool) throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw BacklogFailure("timed out waiting for \(what) \(detail())") }
            usleep(500)
        }
    }

    /// A `/proc/PID/status` field in bytes (`VmRSS`, `VmHWM`).
    static func memory(_ pid: pid_t, _ field: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(field + ":") }),
              let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
        return kilobytes * 1024
    }

    /// Resets a process's peak RSS (`VmHWM`) to its RSS now (proc(5), `clear_refs` value 5).
    static func resetPeak(_ pid: pid_t) {
        try? "5".write(toFile: "/proc/\(pid)/clear_refs", atomically: false, encoding: .utf8)
    }
}

struct BacklogFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}
