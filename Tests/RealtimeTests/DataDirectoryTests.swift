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
    static func startServer(port: Int, folder: String) async throws -> (ChildProcess, Int) {
        let server = try ChildProcess(BuiltProduct.path("realtime-server"), [
            "--host", "127.0.0.1", "--port", String(port), "--app-id", app.id, "--app-key", app.key, "--app-secret", app.secret,
            "--data", folder, "--quiet",
        ])
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
}
