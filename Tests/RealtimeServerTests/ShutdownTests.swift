import Foundation
import RealtimeProtocol
import RealtimeServer
import TestSupport
import Testing
import WebSocket

/// A graceful shutdown with clients that have a backlog: 200 third-party clients (Python
/// `websockets`) stop reading while events pile up for them, the server shuts down, and each
/// then reads its whole backlog and the 4200 close frame; meanwhile new connections are
/// refused at accept, not told to reconnect at once.
@Suite(.serialized, .enabled(if: PythonPeer.isAvailable, "needs python3 with websockets (scripts/setup installs it)"))
struct ShutdownTests {
    static let app = RealtimeApp(id: "1", key: "app-key", secret: "app-secret", maxConnections: 1000, activityTimeout: 120)

    struct Result: Decodable {
        var closes: [String: Int]
        var events: [Int]
    }

    @Test("200 backlogged clients all read their backlog and the 4200 close; a connect during the shutdown gets no handshake")
    func backloggedClients() async throws {
        let fixture = try ServerFixture(apps: [Self.app])
        let clients = 200
        let events = 40
        let peer = try PythonPeer.start("ws_backlog_clients.py", ["ws://127.0.0.1:\(fixture.server.port)/app/\(Self.app.key)", "news", String(clients)])
        try #require(peer.lines(atLeast: 1, timeout: 60).first == "ready")
        #expect(fixture.server.hub.channels(appID: "1")["news"] == clients)

        // 40 events of 8 KiB each: 320 KiB per client that its 4 KiB receive buffer cannot take.
        let data = #"{"fill":""# + String(repeating: "x", count: 8192) + #""}"#
        for _ in 0..<events { fixture.server.hub.publish(appID: "1", channels: ["news"], event: "bulk", data: data) }

        let done = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            fixture.server.shutdown(grace: .seconds(60))
            done.signal()
        }
        // The hub let go of every client (the 4200 closes are queued behind the backlogs).
        let deadline = ContinuousClock.now + .seconds(10)
        while fixture.server.hub.connectionCount > 0, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(fixture.server.hub.connectionCount == 0)
        #expect(fixture.server.openConnectionCount == clients, "the closing handshakes wait for the backlogs")

        let late = try fixture.connect(key: Self.app.key)
        #expect(late.wait(timeout: .seconds(5)) { events in events.contains { if case .failed = $0 { true } else if case .closed = $0 { true } else { false } } })
        #expect(late.messages.isEmpty, "no handshake during a shutdown")
        #expect(late.closeCode(timeout: .zero) != 4200, "not told to reconnect at once into a server going away")

        try peer.send("read")
        #expect(peer.wait() == 0)
        let result = try JSONDecoder().decode(Result.self, from: Data(try #require(peer.lines(atLeast: 2, timeout: 60).last).utf8))
        #expect(result.closes == ["4200": clients], "every client got the close frame, after its backlog")
        #expect(result.events == Array(repeating: events, count: clients), "nothing lost before the close")
        #expect(done.wait(timeout: .now() + 60) == .success)
        #expect(fixture.server.openConnectionCount == 0)
    }
}
