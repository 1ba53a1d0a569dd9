import Glibc
import Reachability
import Reconnect
import SampleSupport
import Testing
@testable import xmpp_client

/// `XMPPClientStream` kept alive by a real `Reconnector`, against a real Prosody that is
/// killed, restarted, paused, and logged into twice. Serialized: each test runs its own
/// Prosody, and timing checks are kinder to a quiet machine.
@Suite(.serialized, .prosody) struct ProsodyReconnectTests {
    private static let password = "correct horse"

    private func makeServer() throws -> ProsodyServer {
        let server = try ProsodyServer()
        try server.register("alice", password: Self.password)
        try server.start()
        return server
    }

    private func makeStream(_ server: ProsodyServer, resource: String = "test", password: String = password) throws -> XMPPClientStream {
        let stream = try XMPPClientStream(host: "127.0.0.1", port: server.port, jid: "alice@\(server.domain)", password: password, resource: resource)
        stream.pingTimeout = .milliseconds(300)
        return stream
    }

    private func readyFixture(_ server: ProsodyServer, resource: String = "test") async throws -> ReconnectFixture<XMPPClientStream> {
        let fixture = ReconnectFixture(try makeStream(server, resource: resource))
        fixture.stream.connect()
        try #require(await fixture.streamEvents.wait(for: .ready), "not ready: \(fixture.streamEvents.values)\n\(server.log)")
        return fixture
    }

    @Test("the stream opens, authenticates with SASL PLAIN, binds its resource and becomes ready")
    func login() async throws {
        let server = try makeServer()
        let fixture = try await readyFixture(server, resource: "phone")
        #expect(fixture.streamEvents.kinds == [.willConnect, .opened, .ready])
        #expect(fixture.stream.boundJID == "alice@localhost/phone")
        #expect(fixture.stream.isReady)
    }

    @Test("Prosody killed: accidental disconnect; restarted: reconnected and ready (authenticated) again")
    func killedAndRestarted() async throws {
        let server = try makeServer()
        let fixture = try await readyFixture(server)

        server.kill()
        #expect(await fixture.events.wait { events in
            if case .accidentalDisconnect? = events.first { true } else { false }
        })
        // The kernel closes a killed process's sockets: a FIN, or a reset if Prosody had not
        // read everything we sent yet.
        // The first disconnect: retries against the dead server may already have followed.
        guard case .connection(let cause, .ready)? = fixture.streamEvents.firstDisconnectError as? XMPPStreamError,
              cause == .closedByPeer || cause.errno == ECONNRESET
        else {
            Issue.record("expected the connection lost during the session, got \(fixture.streamEvents.values)")
            return
        }
        #expect(fixture.stream.boundJID == nil)

        let readyCount = fixture.streamEvents.kinds.filter { $0 == .ready }.count
        try server.start()
        #expect(await fixture.events.waitForSuccess(timeout: .seconds(15)))
        #expect(fixture.streamEvents.kinds.filter { $0 == .ready }.count == readyCount + 1)
        #expect(fixture.stream.boundJID == "alice@localhost/test")
        #expect(!fixture.reconnector.isReconnecting)
    }

    @Test("disconnect() keeps the stream down: no attempt follows")
    func intentionalDisconnect() async throws {
        let server = try makeServer()
        let fixture = try await readyFixture(server)

        fixture.stream.disconnect()
        #expect(await fixture.streamEvents.wait(for: .disconnected))
        #expect(fixture.streamEvents.kinds.suffix(2) == [.toldToDisconnect, .disconnected])
        #expect(fixture.streamEvents.lastDisconnectError == nil)
        #expect(await !fixture.events.waitForAttempt(timeout: .seconds(1)))
        #expect(fixture.events.values.isEmpty)
        #expect(!fixture.stream.isReady)
    }

    @Test("a second login with the same resource ends the first stream with conflict: refused, never retried")
    func conflict() async throws {
        let server = try makeServer()
        let first = try await readyFixture(server, resource: "desk")
        let second = try await readyFixture(server, resource: "desk")

        #expect(await first.streamEvents.wait(for: .refused("conflict")))
        #expect(await first.streamEvents.wait(for: .disconnected))
        guard case .streamError("conflict", _)? = first.streamEvents.lastDisconnectError as? XMPPStreamError else {
            Issue.record("expected a conflict stream error, got \(first.streamEvents.values)")
            return
        }
        #expect(await first.events.wait(for: { $0 == .refused(reason: "conflict") }))
        #expect(await !first.events.waitForAttempt(timeout: .seconds(1)))
        #expect(!first.reconnector.isReconnecting)
        #expect(second.stream.isReady)
        #expect(second.events.values.isEmpty)
    }

    @Test("a wrong password is refused with not-authorized, and the reconnector does not loop")
    func wrongPasswordOnReconnect() async throws {
        let server = try makeServer()
        let fixture = try await readyFixture(server)
        fixture.stream.password = "wrong"

        // A hang detected by the ping (Prosody paused) drops the stream; Prosody is back for
        // the first attempt, which is refused.
        server.pause()
        fixture.stream.verifyConnection()
        let resumed = await fixture.events.wait { events in
            if case .accidentalDisconnect? = events.first { true } else { false }
        }
        server.resume()
        #expect(resumed)
        #expect(fixture.streamEvents.lastDisconnectError as? XMPPStreamError == .noPong(timeout: .milliseconds(300)))
        #expect(await fixture.events.wait(for: { $0 == .refused(reason: "not-authorized") }))
        #expect(fixture.streamEvents.kinds.contains(.refused("not-authorized")))
        #expect(fixture.events.attemptsStarted == 1)
        #expect(await !fixture.events.waitForAttempt(after: fixture.events.values.count, timeout: .seconds(1)))
        #expect(fixture.events.attemptsStarted == 1)
        #expect(!fixture.reconnector.isReconnecting)
    }

    @Test("a wrong password on the app's first connect is refused: opened, refused, disconnected")
    func wrongPasswordFirstConnect() async throws {
        let server = try makeServer()
        let fixture = ReconnectFixture(try makeStream(server, password: "wrong"))
        fixture.stream.connect()
        #expect(await fixture.streamEvents.wait(for: .disconnected))
        #expect(fixture.streamEvents.kinds == [.willConnect, .opened, .refused("not-authorized"), .disconnected])
        guard case .authenticationFailed("not-authorized", _)? = fixture.streamEvents.lastDisconnectError as? XMPPStreamError else {
            Issue.record("expected not-authorized, got \(fixture.streamEvents.values)")
            return
        }
        #expect(await !fixture.events.waitForAttempt(timeout: .milliseconds(500)))
    }

    @Test("verifyConnection: a live Prosody answers the XMPP ping; a paused one is found dead and reconnected to")
    func verifyConnection() async throws {
        let server = try makeServer()
        let fixture = try await readyFixture(server)
        fixture.stream.pingTimeout = .seconds(1)

        fixture.stream.verifyConnection()
        #expect(await !fixture.streamEvents.wait(for: .disconnected, timeout: .milliseconds(1500)))
        #expect(fixture.stream.isReady)

        fixture.stream.pingTimeout = .milliseconds(300)
        server.pause()
        fixture.stream.verifyConnection()
        #expect(await fixture.streamEvents.wait(for: .disconnected))
        server.resume()
        #expect(fixture.streamEvents.lastDisconnectError as? XMPPStreamError == .noPong(timeout: .milliseconds(300)))
        #expect(await fixture.events.waitForSuccess(timeout: .seconds(15)))
        #expect(fixture.stream.isReady)
    }
}
