// hostile-bench: the held-back scenarios of issues 47 and 48, each a hostile load beside a good client,
// against a release `realtime-server` (built beside this executable) on loopback.
// Run: swift build -c release && swift run -c release hostile-bench [webhooks] [rooms] [resumers] [readers] [pagers] [freeze] [consoles]
// (no argument: all of them). Prints a table; BENCHMARKS.md keeps the runs.
import Dispatch
import Foundation
import Glibc
import SystemSupport
import RealtimeProtocol
import class Spawn.ChildProcess
import WebSocket

let appKey = "hostile-key", appSecret = "hostile-secret"
let asked = Set(CommandLine.arguments.dropFirst())
func wanted(_ scenario: String) -> Bool { asked.isEmpty || asked.contains(scenario) }

nonisolated(unsafe) var running: [ChildProcess] = []
func fail(_ message: String) -> Never {
    FileHandle.standardError.write(Data("hostile-bench: \(message)\n".utf8))
    for process in running { _ = process.signal(SIGTERM) }
    exit(1)
}
func progress(_ message: String) { FileHandle.standardError.write(Data("\(message)\n".utf8)) }

nonisolated(unsafe) var rows: [(String, String, String)] = []
func record(_ name: String, _ value: String, _ target: String) {
    rows.append((name, value, target))
    progress("  \(name): \(value)")
}
func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

var limit = rlimit()
getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
limit.rlim_cur = limit.rlim_max
setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)

let serverPath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("realtime-server").path
guard FileManager.default.isExecutableFile(atPath: serverPath) else { fail("build realtime-server too (swift build -c release)") }

/// A release `realtime-server` on a free loopback port, with `arguments` added.
func startServer(_ arguments: [String]) -> (ChildProcess, Int) {
    guard let server = try? ChildProcess(serverPath, ["--port", "0", "--app-id", "1", "--app-key", appKey, "--app-secret", appSecret,
                                                      "--max-connections", "100000"] + (arguments.contains { $0.hasPrefix("--redis") } ? [] : ["--memory"]) + (ProcessInfo.processInfo.environment["HOSTILE_VERBOSE"] == nil ? ["--quiet"] : []) + arguments, standardError: .inherit)
    else { fail("cannot start \(serverPath)") }
    running.append(server)
    let line = (try? server.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("port ") }) ?? ""
    guard let port = line.split(separator: " ").last.flatMap({ Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) else { fail("no port from realtime-server") }
    return (server, port)
}

/// The process's resident memory (`VmRSS`), in bytes.
func residentBytes(_ process: ChildProcess) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
    return kilobytes * 1024
}

/// The process's CPU time so far (user + system, from `/proc/PID/stat`), in seconds.
func cpuSeconds(_ process: ChildProcess) -> Double {
    guard let stat = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/stat", encoding: .utf8),
          let close = stat.lastIndex(of: ")") else { return 0 }
    let fields = stat[stat.index(after: close)...].split(separator: " ")
    guard fields.count > 13, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

var options = WebSocketContext.Options()
options.timeout = .seconds(30)
// A history page of 100 events of 10 KB is over the default 1 MiB.
options.maxMessageSize = 8 << 20
let context = try WebSocketContext(options: options)

/// A good client: pings the server every 10 ms and times each round trip.
final class GoodClient: Sendable {
    let pongs = DispatchSemaphore(value: 0)
    let connection: WebSocketConnection

    init(port: Int) throws {
        let pongs = self.pongs
        connection = try context.connect(url: "ws://127.0.0.1:\(port)/app/\(appKey)") { event in
            if case .text(let text) = event, text.contains("bird:pong") { pongs.signal() }
        }
        Thread.sleep(forTimeInterval: 0.3)
    }

    /// Round trips for `seconds`, 10 ms apart, sorted.
    func roundTrips(for seconds: Double) -> [Duration] {
        var times: [Duration] = []
        let end = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
        while ContinuousClock.now < end {
            let sent = ContinuousClock.now
            try? connection.send(text: #"{"event":"bird:ping","data":{}}"#)
            guard pongs.wait(timeout: .now() + 10) == .success else { fail("a ping went unanswered for 10 s") }
            times.append(ContinuousClock.now - sent)
            Thread.sleep(forTimeInterval: 0.01)
        }
        return times.sorted()
    }
}

/// Sends `frames(n)` for n = 0, 1, 2 … on `connection` from a thread of its own, `burst` of
/// them every `interval` seconds, while `running` holds; then closes the connection, counts
/// what it sent into `sent` and signals `done`.
func sendLoop(_ connection: WebSocketConnection, burst: Int, every interval: Double, running: Locked<Bool>, sent: Locked<Int>,
              done: DispatchSemaphore, frames: @escaping @Sendable (Int) -> [String]) {
    Thread.detachNewThread {
        var index = 0
        while running.withLock({ $0 }) {
            for _ in 0..<burst {
                for frame in frames(index) { try? connection.send(text: frame) }
                index += 1
            }
            sent.withLock { $0 += burst }
            Thread.sleep(forTimeInterval: interval)
        }
        try? connection.close()
        done.signal()
    }
}

/// `"max X ms, N of M over 100 ms, median Y ms"` for sorted round trips.
func summary(_ times: [Duration]) -> String {
    let over = times.filter { $0 > .milliseconds(100) }.count
    return String(format: "max %.1f ms, %d of %d over 100 ms, median %.2f ms",
                  milliseconds(times.last ?? .zero), over, times.count, milliseconds(times[times.count / 2]))
}

if wanted("webhooks") { webhookChurn() }
if wanted("rooms") { roomsAtTheCap() }
if wanted("resumers") { nonReadingResumers() }
if wanted("readers") { replayReaders() }
if wanted("pagers") { historyPagers() }
if wanted("freeze") { frozenShard() }
if wanted("consoles") { openConsoles() }

print("| measurement | result | target |")
print("|---|---|---|")
for (name, value, target) in rows { print("| \(name) | \(value) | \(target) |") }
for process in running { _ = process.signal(SIGTERM) }
