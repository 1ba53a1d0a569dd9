import Glibc
import Reachability
import Reconnect
import SampleSupport
import Testing
import LineStream

/// A `TCPLineStream` kept alive by a real `Reconnector` (Dispatch timers, netlink
/// reachability for 127.0.0.1) against an in-process `LineServer` that is stopped ("killed")
/// and restarted on the same port.
@Suite struct LineReconnectTests {
    private func connectedFixture(_ server: LineServer, configure: (inout ReconnectConfiguration) -> Void = { _ in }) async throws
        -> ReconnectFixture<TCPLineStream>
    {
        let fixture = ReconnectFixture(TCPLineStream(host: "127.0.0.1", port: server.port), configure: configure)
        #expect(fixture.reconnector.reachabilityError == nil)
        fixture.stream.connect()
        try #require(await fixture.streamEvents.wait(for: .ready))
        return fixture
    }

    @Test("a killed server is reconnected to once it restarts, and lines flow again")
    func killedAndRestarted() async throws {
        let server = LineServer()
        try server.start()
        defer { server.stop() }
        let fixture = try await connectedFixture(server)
        let lines = Recorder<String>()
        let token = fixture.stream.onLine { lines.record($0) }
        defer { token.cancel() }

        server.stop()
        #expect(await fixture.events.wait { events in
            if case .accidentalDisconnect? = events.first { true } else { false }
        })
        // Attempts fail with ECONNREFUSED while the server is down …
        #expect(await fixture.events.wait { events in events.contains { if case .attemptStarted(2, _) = $0 { true } else { false } } })
        #expect(!fixture.stream.isConnected)
        let refused = fixture.streamEvents.values.dropFirst(3).compactMap { $0.error as? TCPLineStreamError }
        #expect(refused.dropFirst().allSatisfy { $0.errno == ECONNREFUSED })

        // … and the first one after the restart succeeds.
        try server.start()
        #expect(await fixture.events.waitForSuccess())
        #expect(fixture.stream.isConnected)
        #expect(!fixture.reconnector.isReconnecting)
        #expect(fixture.stream.send("after restart"))
        #expect(await lines.wait { $0 == ["after restart"] })
        #expect(server.acceptedCount == 2)
    }

    @Test("an intentional disconnect is followed by no attempt")
    func intentionalDisconnect() async throws {
        let server = LineServer()
        try server.start()
        defer { server.stop() }
        let fixture = try await connectedFixture(server)

        fixture.stream.disconnect()
        #expect(await fixture.streamEvents.wait(for: .disconnected))
        // Ten times the retry interval: no attempt, no process.
        #expect(await !fixture.events.waitForAttempt(timeout: .seconds(1)))
        #expect(fixture.events.values.isEmpty)
        #expect(!fixture.reconnector.isReconnecting)
        #expect(server.acceptedCount == 1)
    }

    @Test("disconnect during the reconnect wait stops the process")
    func disconnectWhileReconnecting() async throws {
        let server = LineServer()
        try server.start()
        defer { server.stop() }
        let fixture = try await connectedFixture(server) { $0.reconnectDelay = .seconds(30) }

        server.stop()
        #expect(await fixture.events.wait { $0.contains { if case .scheduled = $0 { true } else { false } } })
        fixture.stream.disconnect()
        #expect(await fixture.events.wait(for: { $0 == .stopped }))
        #expect(!fixture.reconnector.isReconnecting)
        try server.start()
        #expect(await !fixture.events.waitForAttempt(timeout: .seconds(1)))
    }

    @Test("a server that stops answering PING is found dead by verifyConnection and reconnected")
    func deadConnectionIsReplaced() async throws {
        let server = LineServer()
        try server.start()
        defer { server.stop() }
        let fixture = try await connectedFixture(server)
        fixture.stream.pingTimeout = .milliseconds(200)

        server.answersPing = false
        fixture.stream.verifyConnection()
        #expect(await fixture.streamEvents.wait(for: .disconnected))
        #expect(fixture.streamEvents.lastDisconnectError as? TCPLineStreamError == .noPong(timeout: .milliseconds(200)))
        #expect(await fixture.events.waitForSuccess())
        #expect(fixture.stream.isConnected)
        server.answersPing = true
        let lines = Recorder<String>()
        let token = fixture.stream.onLine { lines.record($0) }
        defer { token.cancel() }
        fixture.stream.send("PING")
        #expect(await lines.wait { $0 == ["PONG"] })
        #expect(server.acceptedCount == 2)
    }

    @Test("a hung connect is aborted after attemptTimeout and retried")
    func hungAttemptTimesOut() async throws {
        let server = LineServer()
        try server.start()
        let fixture = try await connectedFixture(server) { $0.attemptTimeout = .milliseconds(300) }
        // The next server on the port will never accept: every SYN is dropped.
        let port = server.port
        server.stop()
        let hung = try HungListener(port: port)
        #expect(await fixture.events.wait { $0.contains(.attemptTimedOut(attempt: 1)) })
        #expect(await fixture.streamEvents.wait { $0.contains { ($0.error as? TCPLineStreamError) == .aborted } })
        #expect(await fixture.events.waitForAttempt(after: fixture.events.values.count, timeout: .seconds(5)))
        withExtendedLifetime(hung) {}
    }
}
