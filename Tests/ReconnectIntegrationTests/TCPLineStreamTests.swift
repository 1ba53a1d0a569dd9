import Glibc
import SystemSupport
import Reachability
import Reconnect
import SampleSupport
import TestSupport
import Testing
import LineStream

/// `TCPLineStream` on its own, against an in-process `LineServer` or a scripted loopback peer:
/// the events it reports, its errors, and bad input.
@Suite struct TCPLineStreamTests {
    /// A stream with its events and lines recorded.
    final class Probe: Sendable {
        let stream: TCPLineStream
        let events = Recorder<StreamRecord>()
        let lines = Recorder<String>()
        private let tokens: [ObservationToken]

        init(_ stream: TCPLineStream) {
            self.stream = stream
            let (events, lines) = (events, lines)
            tokens = [stream.reconnectEvents.observe { events.record(StreamRecord($0)) }, stream.onLine { lines.record($0) }]
        }

        convenience init(host: String = "127.0.0.1", port: UInt16, maximumLineLength: Int = 65_536) {
            self.init(TCPLineStream(host: host, port: port, maximumLineLength: maximumLineLength))
        }

        /// The `TCPLineStreamError` of the last disconnect.
        var lastError: TCPLineStreamError? { events.lastDisconnectError as? TCPLineStreamError }
    }

    @Test("connect reports willConnect, opened, ready; lines are echoed and PING gets PONG")
    func connectsAndEchoes() async throws {
        let server = LineServer()
        try server.start()
        defer { server.stop() }
        let probe = Probe(port: server.port)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .ready))
        #expect(probe.events.kinds == [.willConnect, .opened, .ready])
        #expect(probe.stream.isConnected)
        #expect(probe.stream.send("hello"))
        #expect(probe.stream.send("PING"))
        #expect(await probe.lines.wait { $0.count == 2 })
        #expect(probe.lines.values == ["hello", "PONG"])
    }

    @Test("disconnect reports toldToDisconnect, then disconnected without an error")
    func intentionalDisconnect() async throws {
        let server = LineServer()
        try server.start()
        defer { server.stop() }
        let probe = Probe(port: server.port)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .ready))
        probe.stream.disconnect()
        #expect(await probe.events.wait(for: .disconnected))
        #expect(probe.events.kinds == [.willConnect, .opened, .ready, .toldToDisconnect, .disconnected])
        #expect(probe.events.lastDisconnectError == nil)
        #expect(!probe.stream.send("too late"))
    }

    @Test("a server that goes away gives disconnected with closedByPeer")
    func serverGoesAway() async throws {
        let server = LineServer()
        try server.start()
        let probe = Probe(port: server.port)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .ready))
        server.stop()
        #expect(await probe.events.wait(for: .disconnected))
        #expect(probe.lastError == .connection(.closedByPeer))
    }

    @Test("a closed port ends the attempt with disconnected, keeping ECONNREFUSED")
    func connectionRefused() async throws {
        let probe = Probe(port: try TestSockets.freePort())
        probe.stream.connect()
        #expect(await probe.events.wait(for: .disconnected))
        #expect(probe.events.kinds == [.willConnect, .disconnected])
        #expect(probe.lastError?.errno == ECONNREFUSED)
        #expect(probe.lastError.map { "\($0)".contains("ECONNREFUSED") } == true)
    }

    @Test("an unresolvable host ends the attempt with a typed resolution error, without DNS traffic")
    func unresolvableHost() async throws {
        // An empty label fails inside getaddrinfo before any query is sent.
        let probe = Probe(host: "no..such.host.invalid", port: 7)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .disconnected))
        guard case .connection(.resolutionFailed(let host, let code, _))? = probe.lastError else {
            Issue.record("expected a resolution failure, got \(probe.events.values)")
            return
        }
        #expect(host == "no..such.host.invalid")
        #expect(code != 0)
    }

    @Test("an openSocket hook that throws is a typed failure, not a crash")
    func openSocketThrows() async throws {
        struct NoNamespace: Error {}
        let probe = Probe(TCPLineStream(host: "127.0.0.1", port: 7, openSocket: { _ in throw NoNamespace() }))
        probe.stream.connect()
        #expect(await probe.events.wait(for: .disconnected))
        guard case .connection(.openSocketFailed)? = probe.lastError else {
            Issue.record("expected openSocketFailed, got \(probe.events.values)")
            return
        }
    }

    @Test("abortConnectAttempt closes a hanging connect and reports disconnected with aborted")
    func abortHangingConnect() async throws {
        let hung = try HungListener()
        let probe = Probe(port: hung.port)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .willConnect))
        // The SYN is dropped by the full accept queue: nothing happens until the abort.
        #expect(await !probe.events.wait(for: .disconnected, timeout: .milliseconds(300)))
        probe.stream.abortConnectAttempt()
        #expect(await probe.events.wait(for: .disconnected))
        #expect(probe.lastError == .aborted)
        #expect(!probe.stream.isConnected)
    }

    @Test("verifyConnection on a live connection keeps it")
    func verifyAlive() async throws {
        let server = LineServer()
        try server.start()
        defer { server.stop() }
        let probe = Probe(port: server.port)
        probe.stream.pingTimeout = .seconds(1)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .ready))
        probe.stream.verifyConnection()
        #expect(await probe.lines.wait { $0.contains("PONG") })
        // Past the deadline: the answered ping disconnects nothing.
        #expect(await !probe.events.wait(for: .disconnected, timeout: .milliseconds(1200)))
        #expect(probe.stream.isConnected)
    }

    @Test("verifyConnection against a server that stops answering PING reports disconnected with noPong")
    func verifyDead() async throws {
        let server = LineServer()
        try server.start()
        defer { server.stop() }
        let probe = Probe(port: server.port)
        probe.stream.pingTimeout = .milliseconds(200)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .ready))
        server.answersPing = false
        probe.stream.verifyConnection()
        #expect(await probe.events.wait(for: .disconnected, timeout: .seconds(5)))
        #expect(probe.lastError == .noPong(timeout: .milliseconds(200)))
        #expect(!probe.stream.isConnected)
    }

    @Test("a line longer than the limit disconnects with lineTooLong instead of buffering")
    func lineTooLong() async throws {
        let server = try ScriptedServer(sending: [UInt8](repeating: UInt8(ascii: "x"), count: 1000))
        let probe = Probe(port: server.port, maximumLineLength: 64)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .disconnected))
        #expect(probe.lastError == .lineTooLong(limit: 64))
    }

    @Test("bytes that are not UTF-8 arrive as replacement characters; CRLF and split lines are joined")
    func badBytes() async throws {
        let bytes: [UInt8] = [0xFF, 0xFE, 0x0A] + Array("split li".utf8) + Array("ne\r\n".utf8)
        let server = try ScriptedServer(sending: bytes, chunk: 3)
        let probe = Probe(port: server.port)
        probe.stream.connect()
        #expect(await probe.lines.wait { $0.count == 2 })
        #expect(probe.lines.values == ["\u{FFFD}\u{FFFD}", "split line"])
    }

    @Test("connect while connecting or connected starts no second connection")
    func connectIsIdempotent() async throws {
        let server = LineServer()
        try server.start()
        defer { server.stop() }
        let probe = Probe(port: server.port)
        probe.stream.connect()
        probe.stream.connect()
        #expect(await probe.events.wait(for: .ready))
        probe.stream.connect()
        #expect(await !probe.events.wait(for: .willConnect, after: 3, timeout: .milliseconds(300)))
        #expect(server.acceptedCount == 1)
    }
}
