import Glibc
import LineStream
import Reachability
import Reconnect
import SampleSupport
import TestSupport
import Testing
@testable import xmpp_client

/// `XMPPClientStream` over TLS against a real Prosody that requires encryption, with a
/// certificate made at test time: STARTTLS (RFC 6120 section 5) and direct TLS (XEP-0368,
/// XMPPFramework's "old school" secure connect) each survive `kill -9` and a restart and come
/// back the way they first connected; a certificate from a CA the client does not trust is a
/// refusal, never a reconnect loop.
@Suite(.serialized, .prosody) struct ProsodyTLSTests {
    private static let password = "correct horse"

    private struct Setup {
        let authority: TestCertificates
        let server: ProsodyServer
    }

    private func makeServer() throws -> Setup {
        let authority = try TestCertificates()
        let server = try ProsodyServer(tls: authority)
        try server.register("alice", password: Self.password)
        try server.start()
        return Setup(authority: authority, server: server)
    }

    private func makeStream(_ server: ProsodyServer, caFile: String) throws -> XMPPClientStream {
        try XMPPClientStream(
            host: "127.0.0.1", port: server.port, jid: "alice@\(server.domain)", password: Self.password, resource: "tls",
            tls: TLSContext(caFile: caFile), directTLSPort: try #require(server.directTLSPort)
        )
    }

    /// How many times `kind` was reported.
    private func count(_ kind: StreamRecord.Kind, in fixture: ReconnectFixture<XMPPClientStream>) -> Int {
        fixture.streamEvents.kinds.filter { $0 == kind }.count
    }

    @Test("each way of connecting reaches ready over TLS, and after kill -9 and a restart reconnects the same way", arguments: [ConnectMethod.standard, .directTLS])
    func reconnectsTheSameWay(method: ConnectMethod) async throws {
        let setup = try makeServer()
        let fixture = ReconnectFixture(try makeStream(setup.server, caFile: setup.authority.caFile))
        fixture.stream.connect(using: method)
        try #require(await fixture.streamEvents.wait(for: .ready), "not ready: \(fixture.streamEvents.values)\n\(setup.server.log)")
        #expect(fixture.streamEvents.kinds == [.willConnect, .opened, .ready])
        #expect(fixture.stream.connectMethod == method)
        #expect(fixture.stream.lastConnectMethod == method)
        #expect(fixture.stream.tlsProtocolVersion == "TLSv1.3")
        #expect(fixture.stream.boundJID == "alice@localhost/tls")

        setup.server.kill()
        #expect(await fixture.events.wait { events in
            if case .accidentalDisconnect? = events.first { true } else { false }
        })
        #expect(fixture.stream.tlsProtocolVersion == nil)
        try setup.server.start()
        #expect(await fixture.events.waitForSuccess(timeout: .seconds(15)), "\(fixture.streamEvents.values)\n\(setup.server.log)")
        #expect(count(.ready, in: fixture) == 2)
        #expect(fixture.stream.connectMethod == method)
        #expect(fixture.stream.tlsProtocolVersion == "TLSv1.3")
        #expect(fixture.stream.boundJID == "alice@localhost/tls")
        // One `opened` per session that reached the server, even with STARTTLS's two headers.
        #expect(count(.opened, in: fixture) == count(.ready, in: fixture))

        // Still a working session: Prosody answers the XMPP ping over the new TLS session.
        fixture.stream.pingTimeout = .seconds(2)
        let before = fixture.streamEvents.values.count
        fixture.stream.verifyConnection()
        #expect(await !fixture.streamEvents.wait(for: .disconnected, after: before, timeout: .milliseconds(2500)))
        #expect(fixture.stream.isReady)
    }

    @Test("a CA that did not sign the server's certificate is refused on the first connect, either way: no attempt follows", arguments: [ConnectMethod.standard, .directTLS])
    func wrongCAFirstConnect(method: ConnectMethod) async throws {
        let setup = try makeServer()
        let stranger = try TestCertificates(name: "Stranger CA")
        let fixture = ReconnectFixture(try makeStream(setup.server, caFile: stranger.caFile))
        fixture.stream.connect(using: method)
        #expect(await fixture.streamEvents.wait(for: .disconnected))
        // STARTTLS reads the plain stream header before TLS; direct TLS fails before any XML.
        let opened: [StreamRecord.Kind] = method == .standard ? [.opened] : []
        #expect(fixture.streamEvents.kinds == [.willConnect] + opened + [.refused("certificate-rejected"), .disconnected])
        #expect(fixture.streamEvents.lastDisconnectError as? XMPPStreamError == .tls(.certificateRejected(reason: "unable to get local issuer certificate")))
        #expect(await !fixture.events.waitForAttempt(timeout: .seconds(1)))
        #expect(!fixture.reconnector.isReconnecting)
    }

    @Test("Prosody restarted with a certificate from another CA: the reconnect is refused once and not retried")
    func certificateChangedOnRestart() async throws {
        let setup = try makeServer()
        let fixture = ReconnectFixture(try makeStream(setup.server, caFile: setup.authority.caFile))
        fixture.stream.connect(using: .directTLS)
        try #require(await fixture.streamEvents.wait(for: .ready), "not ready: \(fixture.streamEvents.values)\n\(setup.server.log)")

        setup.server.kill()
        #expect(await fixture.events.wait { events in
            if case .accidentalDisconnect? = events.first { true } else { false }
        })
        let impostor = try TestCertificates(name: "Impostor CA")
        try setup.server.useCertificate(signedBy: impostor)
        try setup.server.start()
        #expect(await fixture.events.wait(timeout: .seconds(15), for: { $0 == .refused(reason: "certificate-rejected") }))
        let attempts = fixture.events.attemptsStarted
        #expect(await !fixture.events.waitForAttempt(after: fixture.events.values.count, timeout: .seconds(1)))
        #expect(fixture.events.attemptsStarted == attempts)
        #expect(!fixture.reconnector.isReconnecting)
        #expect(!fixture.stream.isReady)
    }

    @Test("a TLS stream meeting a server without STARTTLS never goes on in clear text: refused starttls-not-offered")
    func noStartTLSOffered() async throws {
        let authority = try TestCertificates()
        let plain = try ProsodyServer()
        try plain.register("alice", password: Self.password)
        try plain.start()
        let stream = try XMPPClientStream(
            host: "127.0.0.1", port: plain.port, jid: "alice@localhost", password: Self.password, resource: "tls",
            tls: TLSContext(caFile: authority.caFile)
        )
        let fixture = ReconnectFixture(stream)
        stream.connect()
        #expect(await fixture.streamEvents.wait(for: .disconnected))
        #expect(fixture.streamEvents.kinds == [.willConnect, .opened, .refused("starttls-not-offered"), .disconnected])
        #expect(fixture.streamEvents.lastDisconnectError as? XMPPStreamError == .startTLSNotOffered)
        #expect(await !fixture.events.waitForAttempt(timeout: .milliseconds(500)))
    }

    @Test("direct TLS without a TLSContext is refused as an unsupported connect method")
    func directTLSWithoutContext() async throws {
        let stream = try XMPPClientStream(host: "127.0.0.1", port: 1, jid: "alice@localhost", password: "x", resource: "r")
        let fixture = ReconnectFixture(stream)
        stream.connect(using: .directTLS)
        #expect(await fixture.streamEvents.wait(for: .disconnected))
        #expect(fixture.streamEvents.kinds == [.willConnect, .refused("unsupported-connect-method"), .disconnected])
        #expect(fixture.streamEvents.lastDisconnectError as? XMPPStreamError == .unsupportedConnectMethod(.directTLS))
    }
}
