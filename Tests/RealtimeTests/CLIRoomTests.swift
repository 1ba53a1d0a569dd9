import Foundation
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import ReconnectTesting
import Redis
import Spawn
import SystemSupport
import Testing

/// `realtime join` and `realtime history` as child processes, their tokens from the
/// room-backend sample's HTTP auth route (a real JSON POST with the `--header` given).
@Suite("The realtime CLI in rooms", .serialized)
struct CLIRoomTests {
    static let app = RealtimeApp(id: "cli-rooms", key: "cli-rooms-key", secret: "cli-rooms-secret", activityTimeout: 1)

    static var backendExecutable: String {
        URL(fileURLWithPath: CLITests.executable).deletingLastPathComponent().appendingPathComponent("room-backend").path
    }

    /// The room-backend sample on a free port: its process and auth route.
    static func startBackend() async throws -> (process: ChildProcess, route: String) {
        let backend = try ChildProcess(backendExecutable, [
            "--app-id", app.id, "--app-key", app.key, "--app-secret", app.secret, "--port", "0",
            "--room", "order:{id},history=1000", "--room", "chat:{id},presence", "--room", "quiet:{id}",
        ])
        func port() -> String? { backend.outputLines.first { $0.hasPrefix("port ") }.map { String($0.dropFirst(5)) } }
        await eventually("the backend's port", timeout: .seconds(30), context: { "\(backend.outputLines) \(backend.errorLines)" }) {
            backend.outputLines.contains { $0.hasPrefix("port ") }
        }
        return (backend, "http://127.0.0.1:\(try #require(port()))/rooms/auth")
    }

    static func rooms(_ process: ChildProcess) -> [[String: JSONValue]] {
        CLITests.records(process).filter { ["room", "member", "room-state", "room-error", "page"].contains($0["kind"]?.string ?? "") }
    }

    @Test("join --json prints room events with kind, room, event, data and meta; member and state lines; a --subscribe channel's events; history prints a page; no_history exits 1")
    func joinAndHistory() async throws {
        let server = try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: [Self.app]))
        defer { server.shutdown(grace: .zero) }
        let (backend, route) = try await Self.startBackend()
        defer { _ = backend.signal(SIGTERM) }
        let url = server.url(appKey: Self.app.key)
        let client = try ChildProcess(CLITests.executable, ["join", url, "order:1", "chat:2", "--auth-endpoint", route, "--header", "X-User: ann",
                                                                "--subscribe", "ticker", "--json"])
        defer { _ = client.signal(SIGKILL) }
        let joined = await eventually("both joined", timeout: .seconds(30), context: { "\(client.outputLines) \(client.errorLines)" }) {
            Self.rooms(client).filter { $0["event"]?.string == "joined" }.count == 2
        }
        try #require(joined)
        let chatJoined = try #require(Self.rooms(client).first { $0["room"]?.string == "chat:2" && $0["event"]?.string == "joined" })
        #expect(chatJoined["kind"]?.string == "room-state")
        #expect(chatJoined["data"]?["members"]?[0]?["id"]?.string == "ann", "the header reached the auth route: the member is ann")

        for n in 1...3 { _ = try server.hub.publishRoom(appID: Self.app.id, room: "order:1", event: "updated", data: #"{"n":\#(n)}"#) }
        await eventually("the events", timeout: .seconds(30), context: { "\(client.outputLines)" }) {
            Self.rooms(client).filter { $0["kind"]?.string == "room" }.count == 3
        }
        let events = Self.rooms(client).filter { $0["kind"]?.string == "room" }
        #expect(events.map { $0["meta"]?["id"]?.number } == [1, 2, 3])
        let first = try #require(events.first)
        #expect(first["room"]?.string == "order:1" && first["event"]?.string == "updated" && first["data"]?["n"]?.number == 1)
        #expect(first["meta"]?["at"]?.number != nil && first["meta"]?["from"] == .null && first["meta"]?["replayed"]?.bool == false)

        @Sendable func channelEvents() -> [[String: JSONValue]] { CLITests.records(client).filter { $0["kind"]?.string == "event" && $0["channel"]?.string == "ticker" } }
        await eventually("subscribed to the channel", timeout: .seconds(30), context: { "\(client.outputLines)" }) {
            channelEvents().contains { $0["event"]?.string == "bird:subscription_succeeded" }
        }
        #expect(server.hub.publish(appID: Self.app.id, channels: ["ticker"], event: "tick", data: #"{"t":1}"#) == 1)
        await eventually("the channel's event", timeout: .seconds(30), context: { "\(client.outputLines)" }) {
            channelEvents().contains { $0["event"]?.string == "tick" && $0["data"]?.string == #"{"t":1}"# }
        }

        let page = try await ChildProcess.runDetached(CLITests.executable, ["history", url, "order:1", "--auth-endpoint", route, "--header", "X-User: bob",
                                                                "--before", "3", "--limit", "1", "--json"], timeout: .seconds(30))
        #expect(page.termination == .exited(0), "\(page.standardError)")
        let lines = page.standardOutput.split(separator: "\n").compactMap { try? JSONDecoder().decode([String: JSONValue].self, from: Data($0.utf8)) }
        #expect(lines.map { $0["kind"]?.string } == ["room", "page"])
        #expect(lines.first?["meta"]?["id"]?.number == 2 && lines.last?["more"]?.bool == true)

        let none = try await ChildProcess.runDetached(CLITests.executable, ["history", url, "quiet:1", "--auth-endpoint", route, "--header", "X-User: bob"], timeout: .seconds(30))
        #expect(none.termination == .exited(1) && none.standardError.contains("no_history"), "\(none.standardError)")
    }

    @Test("connect and join exit 1 when the connection fails (4001, an unknown app key), after printing why")
    func failedExits() async throws {
        let server = try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: [Self.app]))
        defer { server.shutdown(grace: .zero) }
        let url = "ws://127.0.0.1:\(server.port)/app/no-such-key"
        for arguments in [["connect", url], ["join", url, "order:1", "--auth-endpoint", "http://127.0.0.1:9/rooms/auth"]] {
            let result = try await ChildProcess.runDetached(CLITests.executable, arguments, timeout: .seconds(30))
            #expect(result.termination == .exited(1), "\(arguments): \(result.standardOutput) \(result.standardError)")
            #expect(result.standardOutput.contains("-> failed") && result.standardOutput.contains("4001"), "\(result.standardOutput)")
            #expect(result.standardError.contains("the connection failed"))
        }
    }

    @Test("a process frozen (SIGSTOP) past the server's timeouts and resumed rejoins and replays what it missed within 2 s")
    func frozenProcess() async throws {
        let server = try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: [Self.app])) { $0.pongTimeout = .seconds(1) }
        defer { server.shutdown(grace: .zero) }
        let (backend, route) = try await Self.startBackend()
        defer { _ = backend.signal(SIGTERM) }
        let client = try ChildProcess(CLITests.executable, ["join", server.url(appKey: Self.app.key), "order:9", "--auth-endpoint", route, "--header", "X-User: ann", "--json"])
        defer { _ = client.signal(SIGKILL) }
        try #require(await eventually("joined", timeout: .seconds(30), context: { "\(client.outputLines)" }) {
            Self.rooms(client).contains { $0["event"]?.string == "joined" }
        })
        for n in 1...5 { _ = try server.hub.publishRoom(appID: Self.app.id, room: "order:9", event: "updated", data: #"{"n":\#(n)}"#) }
        try #require(await eventually("live events", timeout: .seconds(30)) { Self.rooms(client).filter { $0["kind"]?.string == "room" }.count == 5 })

        #expect(client.signal(SIGSTOP))
        // The server pings after 1 s of silence and gives up 1 s later: the member is gone.
        try #require(await eventually("the server dropped the frozen client", timeout: .seconds(30)) {
            server.hub.roomMembers(appID: Self.app.id, room: "order:9").connections == 0
        })
        for n in 6...25 { _ = try server.hub.publishRoom(appID: Self.app.id, room: "order:9", event: "updated", data: #"{"n":\#(n)}"#) }
        let resumed = ContinuousClock.now
        #expect(client.signal(SIGCONT))
        let replayed = await eventually("the replay", timeout: .seconds(30), context: { "\(client.outputLines)" }) {
            Self.rooms(client).filter { $0["kind"]?.string == "room" }.count == 25
        }
        let elapsed = ContinuousClock.now - resumed
        try #require(replayed)
        #expect(elapsed <= .seconds(2), "joined again and replayed \(elapsed) after resuming")
        let events = Self.rooms(client).filter { $0["kind"]?.string == "room" }
        #expect(events.map { $0["meta"]?["id"]?.number } == (1...25).map { Double($0) })
        #expect(events.suffix(20).allSatisfy { $0["meta"]?["replayed"]?.bool == true })
    }

    /// How long a `join --state` process stays dead before it starts again.
    enum Away: String, CaseIterable, CustomTestStringConvertible, Sendable {
        /// 5 s of real time.
        case fiveSeconds = "5 s"
        /// 2 minutes by the server's wall clock (the clock it keeps events and checks tokens
        /// by, moved on while no process runs): past what Ably and Socket.IO keep a
        /// connection's state, within the room's 30-minute span.
        case twoMinutes = "2 minutes by the server's clock"
        /// Started again against the other node of two that share a private Redis (a node
        /// move: the load balancer sends the new process elsewhere).
        case otherNode = "on the other node of two over Redis"
        var testDescription: String { rawValue }
    }

    @Test("join --state: killed with SIGKILL while events are published and started again 5 s, or 2 minutes, later, or on another node: every event is printed across both runs, in order, the missed ones replayed, only the killed run's last 100 ms perhaps again; the file holds the last position", .timeLimit(.minutes(2)), arguments: Away.allCases)
    func savedPositionsSurviveSIGKILL(away: Away) async throws {
        // The server's wall clock, ahead of the real one by `shift` milliseconds.
        let shift = Locked<Int64>(0)
        let redis = away == .otherNode ? try PrivateRedis() : nil
        defer { redis?.stop() }
        let servers = try (0..<(redis == nil ? 1 : 2)).map { _ in
            try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: [Self.app])) { configuration in
                configuration.wallClock = { Int64(Date().timeIntervalSince1970 * 1000) + shift.withLock { $0 } }
                if let redis {
                    configuration.roomStore = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
                    configuration.fanout = RedisFanout(endpoint: redis.endpoint)
                }
            }
        }
        defer { for server in servers { server.shutdown(grace: .zero) } }
        try #require(await eventually("the nodes' bus", timeout: .seconds(30)) { redis == nil || servers.allSatisfy { $0.hub.isFanoutHealthy } })
        let server = servers[0]
        let (backend, route) = try await Self.startBackend()
        defer { _ = backend.signal(SIGTERM) }
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("cli-state-\(getpid()).json").path
        defer { try? FileManager.default.removeItem(atPath: state) }
        let arguments = { (node: RealtimeServer) in
            ["join", node.url(appKey: Self.app.key), "order:77", "--auth-endpoint", route, "--header", "X-User: ann", "--state", state, "--json"]
        }
        let first = try ChildProcess(CLITests.executable, arguments(server))
        defer { _ = first.signal(SIGKILL) }
        try #require(await eventually("joined", timeout: .seconds(30), context: { "\(first.outputLines) \(first.errorLines)" }) {
            Self.rooms(first).contains { $0["event"]?.string == "joined" }
        })
        // Published every 10 ms throughout: the kill lands between events the first run printed,
        // held back or never got.
        let publisher = Task.detached {
            for n in 1...150 {
                _ = try server.hub.publishRoom(appID: Self.app.id, room: "order:77", event: "updated", data: #"{"n":\#(n)}"#)
                try await Task.sleep(for: .milliseconds(10))
            }
        }
        try #require(await eventually("some events in the first run", timeout: .seconds(30)) { Self.rooms(first).filter { $0["kind"]?.string == "room" }.count >= 20 })
        #expect(first.signal(SIGKILL))
        switch away {
        case .fiveSeconds: try await Task.sleep(for: .seconds(5))
        case .twoMinutes:
            shift.withLock { $0 += 120_000 }
            try await Task.sleep(for: .milliseconds(300))
        case .otherNode: try await Task.sleep(for: .milliseconds(300))
        }
        let second = try ChildProcess(CLITests.executable, arguments(servers[servers.count - 1]))
        defer { _ = second.signal(SIGKILL) }
        try await publisher.value
        let done = await eventually("the last event in the second run", timeout: .seconds(30), context: { "\(second.outputLines) \(second.errorLines)" }) {
            Self.rooms(second).contains { $0["kind"]?.string == "room" && $0["data"]?["n"]?.number == 150 }
        }
        try #require(done)
        let before = Self.rooms(first).filter { $0["kind"]?.string == "room" }.compactMap { $0["meta"]?["id"]?.number }
        let after = Self.rooms(second).filter { $0["kind"]?.string == "room" }
        let afterIDs = after.compactMap { $0["meta"]?["id"]?.number }
        // At least once: the second run may print again the first one's last events (printed,
        // their position not yet saved when the kill came), only right at its start.
        let again = afterIDs.prefix { $0 <= (before.last ?? 0) }
        #expect(Array(again) == Array(before.suffix(again.count)), "printed again: \(again), the first run's last: \(before.suffix(again.count))")
        #expect(again.count <= 30, "\(again.count) printed again: more than 100 ms of events")
        #expect(before + afterIDs.dropFirst(again.count) == (1...150).map(Double.init), "printed by the first run \(before.count), by the second \(afterIDs.count) (\(again.count) again): every id, in order")
        let replayed = after.prefix { $0["meta"]?["replayed"]?.bool == true }.count
        #expect(replayed > 0, "the events published while no process ran came back replayed")
        #expect(after.dropFirst(replayed).allSatisfy { $0["meta"]?["replayed"]?.bool != true }, "then live")
        #expect(second.signal(SIGTERM))
        _ = await eventually("the second run exited", timeout: .seconds(10)) { !second.isRunning }
        let saved = try JSONDecoder().decode([String: RoomPosition].self, from: Data(contentsOf: URL(fileURLWithPath: state)))
        #expect(saved["order:77"]?.id == 150, "the file after a SIGTERM holds the last id: \(saved)")
    }
}
