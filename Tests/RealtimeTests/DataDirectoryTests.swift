import Foundation
import RealtimeBackend
import RealtimeProtocol
import RealtimeServer
import ReconnectTesting
import Spawn
import TestSupport
import Testing

/// `realtime-server --data DIR` (issue 34, "a single node that restarts keeps its rooms"): the
/// server binary killed with SIGKILL while an app publishes, started again on the same folder;
/// a member (the `realtime join` CLI, alive through it all) rejoins from the same epoch and gets
/// every kept event once, in order, with nothing told lost.
@Suite("realtime-server --data DIR", .serialized)
struct DataDirectoryTests {
    static let app = CLIRoomTests.app

    /// `realtime-server` on `port` (0: a free one) keeping its rooms in `folder`; its port.
    /// `byDefault`: no storage option, the folder given as `$XDG_STATE_HOME`, as a user who never
    /// heard of `--data` runs it.
    static func startServer(port: Int, folder: String, byDefault: Bool = false) async throws -> (ChildProcess, Int) {
        let server = try ChildProcess(BuiltProduct.path("realtime-server"), [
            "--host", "127.0.0.1", "--port", String(port), "--app-id", app.id, "--app-key", app.key, "--app-secret", app.secret,
        ] + (byDefault ? [] : ["--data", folder]) + ["--quiet"], environment: byDefault ? ["XDG_STATE_HOME": folder] : [:])
        @Sendable func bound() -> Int? { server.outputLines.first { $0.hasPrefix("port ") }.flatMap { Int($0.dropFirst(5)) } }
        await eventually("the server's port", timeout: .seconds(20), context: { "\(server.outputLines) \(server.errorLines)" }) { bound() != nil || !server.isRunning }
        return (server, try #require(bound(), "\(server.errorLines)"))
    }

    @Test("killed with SIGKILL while publishing and started again: the member rejoins from the same epoch and gets every kept event once, in order", .timeLimit(.minutes(2)))
    func sigkillKeepsRooms() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("realtime-data-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var (server, port) = try await Self.startServer(port: 0, folder: folder)
        defer { _ = server.signal(SIGKILL) }
        let (backendProcess, route) = try await CLIRoomTests.startBackend()
        defer { _ = backendProcess.signal(SIGTERM) }
        let member = try ChildProcess(CLITests.executable, [
            "join", "ws://127.0.0.1:\(port)/app/\(Self.app.key)", "order:9", "--auth-endpoint", route, "--header", "X-User: ann", "--json",
        ])
        defer { _ = member.signal(SIGKILL) }
        @Sendable func lines(_ kind: String) -> [[String: JSONValue]] { CLIRoomTests.rooms(member).filter { $0["kind"]?.string == kind } }
        try #require(await eventually("joined", timeout: .seconds(30), context: { "\(member.outputLines) \(member.errorLines)" }) {
            lines("room-state").contains { $0["event"]?.string == "joined" }
        })
        let backend = RealtimeBackend(appKey: Self.app.key, appSecret: Self.app.secret)
        try backend.room("order:{id}", history: 1000)
        let api = try #require(URL(string: "http://127.0.0.1:\(port)"))
        // Publishes n until the server answers 200 (a refused connection while it is down is
        // tried again); the acknowledged ones.
        func publish(_ n: Int) async throws -> Bool {
            let request = try backend.roomEventRequest(server: api, appID: Self.app.id, room: "order:9", event: "updated", data: .object(["n": .number(Double(n))]))
            return (try? await HTTPRequests.send(request))?.status == 200
        }
        var acknowledged: [Int] = []
        for n in 1...40 { if try await publish(n) { acknowledged.append(n) } }
        // Killed between two publishes, while the member is still receiving.
        #expect(server.signal(SIGKILL))
        _ = try server.waitUntilExit(timeout: .seconds(10))
        for n in 41...60 { if try await publish(n) { acknowledged.append(n) } }
        #expect(acknowledged == Array(1...40), "nothing is acknowledged while the server is down")
        for attempt in 0..<50 {
            do {
                (server, _) = try await Self.startServer(port: port, folder: folder)
                if server.isRunning { break }
            } catch where attempt < 49 {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        // Published after the restart, before and while the member rejoins.
        for n in 61...100 { if try await publish(n) { acknowledged.append(n) } }
        #expect(acknowledged == Array(1...40) + Array(61...100))
        let arrived = await eventually("every event", timeout: .seconds(30), context: { "\(lines("room").count) \(lines("room-error"))" }) {
            lines("room").contains { $0["data"]?["n"]?.number == 100 }
        }
        try #require(arrived)
        try await Task.sleep(for: .milliseconds(300)) // anything late or twice would arrive now
        let events = lines("room")
        #expect(events.compactMap { $0["meta"]?["id"]?.number } == (1...80).map(Double.init), "every kept id once, in order")
        #expect(events.compactMap { $0["data"]?["n"]?.number.map(Int.init) } == acknowledged)
        #expect(lines("room-error").isEmpty, "nothing told lost: \(lines("room-error"))")
        let epochs = Set(lines("room-state").filter { $0["event"]?.string == "joined" }.compactMap { $0["data"]?["epoch"]?.string })
        #expect(epochs.count == 1, "the same epoch before and after the restart: \(epochs)")
        #expect(lines("room-state").filter { $0["event"]?.string == "joined" }.count >= 2, "the member rejoined")
    }

    @Test("with no storage option (the default folder): a `join --state` member killed, the server restarted, events published meanwhile; started again, the member gets every event once, in order, the missed ones replayed, in the same epoch", .timeLimit(.minutes(2)))
    func durableByDefault() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("realtime-state-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var (server, port) = try await Self.startServer(port: 0, folder: folder, byDefault: true)
        defer { _ = server.signal(SIGKILL) }
        let (backendProcess, route) = try await CLIRoomTests.startBackend()
        defer { _ = backendProcess.signal(SIGTERM) }
        let stateFile = (folder as NSString).appendingPathComponent("member.json")
        func startMember() throws -> ChildProcess {
            try ChildProcess(CLITests.executable, [
                "join", "ws://127.0.0.1:\(port)/app/\(Self.app.key)", "order:7", "--auth-endpoint", route, "--header", "X-User: ann",
                "--state", stateFile, "--json",
            ])
        }
        let backend = RealtimeBackend(appKey: Self.app.key, appSecret: Self.app.secret)
        try backend.room("order:{id}", history: 1000)
        let api = try #require(URL(string: "http://127.0.0.1:\(port)"))
        func publish(_ numbers: ClosedRange<Int>) async throws {
            for n in numbers {
                let request = try backend.roomEventRequest(server: api, appID: Self.app.id, room: "order:7", event: "updated", data: .object(["n": .number(Double(n))]))
                let status = try await HTTPRequests.send(request).status
                try #require(status == 200, "event \(n): \(status)")
            }
        }
        @Sendable func lines(_ member: ChildProcess, _ kind: String) -> [[String: JSONValue]] {
            CLIRoomTests.rooms(member).filter { $0["kind"]?.string == kind }
        }
        @Sendable func numbers(_ member: ChildProcess) -> [Int] { lines(member, "room").compactMap { $0["data"]?["n"]?.number.map(Int.init) } }

        let first = try startMember()
        defer { _ = first.signal(SIGKILL) }
        try #require(await eventually("joined", timeout: .seconds(30), context: { "\(first.outputLines) \(first.errorLines)" }) {
            lines(first, "room-state").contains { $0["event"]?.string == "joined" }
        })
        try await publish(1...20)
        try #require(await eventually("the first 20", timeout: .seconds(20)) { numbers(first).last == 20 })
        // Past the journal's 100 ms, so its file holds the last printed position.
        try await Task.sleep(for: .milliseconds(400))
        #expect(first.signal(SIGKILL))
        _ = try first.waitUntilExit(timeout: .seconds(10))
        try await publish(21...30)
        #expect(server.signal(SIGTERM))
        _ = try server.waitUntilExit(timeout: .seconds(10))
        for attempt in 0..<50 {
            do {
                (server, _) = try await Self.startServer(port: port, folder: folder, byDefault: true)
                if server.isRunning { break }
            } catch where attempt < 49 {
                try await Task.sleep(for: .milliseconds(100))
            }
        }
        #expect(FileManager.default.fileExists(atPath: (folder as NSString).appendingPathComponent("realtime-server/rooms.sqlite3")),
                "the rooms are in the default folder, $XDG_STATE_HOME/realtime-server")
        try await publish(31...40)
        let second = try startMember()
        defer { _ = second.signal(SIGKILL) }
        try #require(await eventually("rejoined", timeout: .seconds(30), context: { "\(second.outputLines) \(second.errorLines)" }) {
            lines(second, "room-state").contains { $0["event"]?.string == "joined" }
        })
        try await publish(41...50)
        try #require(await eventually("every event", timeout: .seconds(30), context: { "\(numbers(second)) \(lines(second, "room-error"))" }) {
            numbers(second).last == 50
        })
        try await Task.sleep(for: .milliseconds(300)) // anything late or twice would arrive now
        #expect(numbers(first) + numbers(second) == Array(1...50), "every event once, in order, across the member's kill and the server's restart")
        let ids = (lines(first, "room") + lines(second, "room")).compactMap { $0["meta"]?["id"]?.number.map(Int.init) }
        #expect(ids == Array(1...50))
        #expect(lines(second, "room").prefix(20).allSatisfy { $0["meta"]?["replayed"]?.bool == true }, "the missed ones replayed")
        #expect(lines(first, "room-error").isEmpty && lines(second, "room-error").isEmpty)
        let epochs = Set((lines(first, "room-state") + lines(second, "room-state")).filter { $0["event"]?.string == "joined" }.compactMap { $0["data"]?["epoch"]?.string })
        #expect(epochs.count == 1, "the same epoch before and after the restart: \(epochs)")
    }

    @Test("a default folder that cannot be used stops the server with the reason and the options that choose another", .timeLimit(.minutes(1)))
    func unusableDefaultFolder() throws {
        // Not even root can make a folder under /proc.
        let result = try ChildProcess.run(BuiltProduct.path("realtime-server"), [
            "--port", "0", "--app-id", Self.app.id, "--app-key", Self.app.key, "--app-secret", Self.app.secret,
        ], environment: ["XDG_STATE_HOME": "/proc/realtime-test"], timeout: .seconds(30))
        #expect(result.termination == .exited(2))
        #expect(result.standardError.contains("the default data folder (choose one with --data DIR, or --memory)"), "\(result.standardError)")
        #expect(result.standardError.contains("/proc/realtime-test/realtime-server"), "the folder is named: \(result.standardError)")
    }
}
