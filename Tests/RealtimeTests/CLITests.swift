import Foundation
import RealtimeProtocol
import RealtimeServer
import ReconnectTesting
import TestSupport
import Testing
import Spawn

/// The `realtime` CLI (Samples/realtime), run as a child process against an in-process server.
@Suite struct CLITests {
    static let app = RealtimeApp(id: "cli", key: "cli-key", secret: "cli-secret")

    /// Where `swift test` put the test bundle, and so the executables.
    static var executable: String {
        BuiltProduct.path("realtime")
    }

    /// The JSON lines printed so far, parsed.
    static func records(_ process: ChildProcess) -> [[String: JSONValue]] {
        process.outputLines.compactMap { try? JSONDecoder().decode([String: JSONValue].self, from: Data($0.utf8)) }
    }

    func publish(port: Int, secret: String = CLITests.app.secret, data: String) async throws -> ChildProcess.Result {
        try await ChildProcess.runDetached(Self.executable, [
            "publish", "--api", "http://127.0.0.1:\(port)", "--app-id", Self.app.id, "--key", Self.app.key,
            "--secret", secret, "--channel", "news", "--event", "update", "--data", data,
        ], timeout: .seconds(30))
    }

    @Test("connect --json prints states and events as JSON lines; publish posts through the HTTP API; SIGINT disconnects and exits 0")
    func connectAndPublish() async throws {
        let server = try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: [Self.app]))
        defer { server.shutdown(grace: .zero) }
        let client = try ChildProcess(Self.executable, ["connect", server.url(appKey: Self.app.key), "--subscribe", "news", "--json"])
        let subscribed = await eventually("the subscription", timeout: .seconds(30), context: { "\(client.outputLines)" }) {
            Self.records(client).contains { $0["event"]?.string == "bird:subscription_succeeded" && $0["channel"]?.string == "news" }
        }
        try #require(subscribed)
        let connected = try #require(Self.records(client).first { $0["current"]?.string == "connected" })
        #expect(connected["kind"]?.string == "state")
        #expect(connected["previous"]?.string == "connecting")
        #expect(connected["time"]?.string?.hasSuffix("Z") == true)

        let published = try await publish(port: server.port, data: #"{"n":1}"#)
        #expect(published.termination == .exited(0), "\(published.standardError)")
        await eventually("the event", timeout: .seconds(30), context: { "\(client.outputLines)" }) {
            Self.records(client).contains { $0["kind"]?.string == "event" && $0["event"]?.string == "update" && $0["data"]?.string == #"{"n":1}"# }
        }

        let refused = try await publish(port: server.port, secret: "wrong", data: "{}")
        #expect(refused.termination == .exited(1))
        #expect(refused.standardError.contains("401"))

        // The server closes with 4201: the CLI shows the error and the reconnect (on the backoff:
        // the connection was up for less than stableConnectionDuration).
        let socketID = try #require(connected["socket"]?.string)
        #expect(server.hub.close(appID: Self.app.id, socketID: socketID, code: 4201, reason: "test"))
        await eventually("the reconnect", timeout: .seconds(30), context: { "\(client.outputLines)" }) {
            Self.records(client).filter { $0["current"]?.string == "connected" }.count == 2
        }
        #expect(Self.records(client).contains { $0["kind"]?.string == "error" && $0["code"]?.number == 4201 })

        #expect(client.signal(SIGINT))
        let end = try client.waitUntilExit(timeout: .seconds(30))
        #expect(end == .exited(0))
        #expect(Self.records(client).last { $0["kind"]?.string == "state" }?["current"]?.string == "disconnected")
    }

    @Test("bad arguments: exit 1 with one line on stderr")
    func badArguments() throws {
        let both = ["publish", "--api", "http://127.0.0.1:1", "--app-id", "1", "--key", "k", "--secret", "s", "--channel", "c", "--room", "r", "--event", "e", "--data", "{}"]
        for arguments in [["connect", "http://x/app/k"], ["connect"], ["publish", "--api", "http://127.0.0.1:1"], ["bogus"], both] {
            let result = try ChildProcess.run(Self.executable, arguments, timeout: .seconds(30))
            #expect(result.termination == .exited(1), "\(arguments)")
            #expect(result.standardError.hasPrefix("realtime: "), "\(arguments): \(result.standardError)")
        }
    }

    @Test("publish --room keeps an event in each room through the HTTP API's room_events")
    func publishToRooms() throws {
        let server = try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: [Self.app]))
        defer { server.shutdown(grace: .zero) }
        let result = try ChildProcess.run(Self.executable, [
            "publish", "--api", "http://127.0.0.1:\(server.port)", "--app-id", Self.app.id, "--key", Self.app.key,
            "--secret", Self.app.secret, "--room", "order:1", "--room", "order:2", "--event", "updated", "--data", #"{"status":"paid"}"#,
        ], timeout: .seconds(30))
        #expect(result.termination == .exited(0), "\(result.standardError)")
        #expect(result.standardOutput.contains(#""room":"order:2""#))
        for room in ["order:1", "order:2"] {
            #expect(try server.hub.roomHistory(appID: Self.app.id, room: room).events.map(\.data) == [#"{"status":"paid"}"#])
        }
    }
}
