import Foundation
import SystemSupport
import class Spawn.ChildProcess
import Testing
import WebSocket

/// A throw-away CA and a server certificate for 127.0.0.1 and localhost, made with the
/// `openssl` command in a temporary directory that goes with this object.
final class TestCertificates: Sendable {
    let directory: String
    var caFile: String { directory + "/ca.pem" }
    var server: WebSocketServer.TLSConfiguration {
        .init(certificateChainFile: directory + "/server.pem", privateKeyFile: directory + "/server.key")
    }

    /// - Parameter subjectAltName: the names the server certificate is valid for.
    init(subjectAltName: String = "IP:127.0.0.1, DNS:localhost") throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ws-tls-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try """
        basicConstraints = CA:FALSE
        keyUsage = critical, digitalSignature, keyEncipherment
        extendedKeyUsage = serverAuth
        subjectAltName = \(subjectAltName)
        """.write(toFile: directory + "/server.ext", atomically: true, encoding: .utf8)
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
        try Self.openssl(["req", "-x509"] + ec + [
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=WebSocketTests CA",
            "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
        ], in: directory)
        try Self.openssl(["req"] + ec + ["-keyout", "server.key", "-out", "server.csr", "-subj", "/CN=127.0.0.1"], in: directory)
        try Self.openssl([
            "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", "server.pem", "-days", "2", "-extfile", "server.ext",
        ], in: directory)
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    private static func openssl(_ arguments: [String], in directory: String) throws {
        let result = try ChildProcess.run("/usr/bin/env", ["openssl"] + arguments, workingDirectory: directory)
        guard result.termination == .exited(0) else {
            throw RawTCP.Failure(description: "openssl \(arguments.first ?? "") failed: \(result.standardError)")
        }
    }
}

@Suite("wss with a CA made at run time")
struct TLSTests {
    @Test("a client trusting the test CA opens wss, echoes and closes with a code")
    func secureEcho() async throws {
        let certificates = try await offPool { try TestCertificates() }
        let fixture = try ServerFixture(tls: certificates.server, onRequest: { _ in HTTPServerResponse(text: "secure") })
        #expect(fixture.server.url().hasPrefix("wss://127.0.0.1:"))
        let clientContext = try WebSocketContext(options: .init(certificateAuthorityFile: certificates.caFile))
        let client = try Client(clientContext, url: fixture.server.url(path: "/app/KEY"))
        #expect(await client.log.opened())
        try client.connection.send(text: "over TLS")
        #expect(await client.log.wait { $0.contains(.text("over TLS")) } != nil)
        try client.connection.close(code: .goingAway, reason: "bye")
        let accepted = try #require(await fixture.connection())
        #expect(await accepted.log.terminal() == .closed(code: .goingAway, reason: "bye"))
        clientContext.shutdown()
        fixture.context.shutdown()
    }

    @Test("a client without the test CA refuses the server's certificate")
    func untrustedCertificate() async throws {
        let certificates = try await offPool { try TestCertificates() }
        let fixture = try ServerFixture(tls: certificates.server)
        let clientContext = try WebSocketContext()
        let client = try Client(clientContext, url: fixture.server.url())
        guard case .failed(.connectFailed) = await client.log.terminal() else {
            Issue.record("expected a TLS failure, got \(client.log.events)")
            return
        }
        #expect(fixture.acceptedCount == 0)
        clientContext.shutdown()
        fixture.context.shutdown()
    }

    @Test("the certificate is checked against the host in the URL")
    func hostnameChecked() async throws {
        let certificates = try await offPool { try TestCertificates(subjectAltName: "DNS:elsewhere.invalid") }
        let fixture = try ServerFixture(tls: certificates.server)
        let clientContext = try WebSocketContext(options: .init(certificateAuthorityFile: certificates.caFile))
        let client = try Client(clientContext, url: fixture.server.url())
        guard case .failed(.connectFailed) = await client.log.terminal() else {
            Issue.record("expected a failure for a host not in the certificate, got \(client.log.events)")
            return
        }
        #expect(fixture.acceptedCount == 0)
        clientContext.shutdown()
        fixture.context.shutdown()
    }

    @Test("localhost resolves and matches the certificate's DNS name")
    func localhostName() async throws {
        let certificates = try await offPool { try TestCertificates() }
        let fixture = try ServerFixture(tls: certificates.server)
        let clientContext = try WebSocketContext(options: .init(certificateAuthorityFile: certificates.caFile))
        let client = try Client(clientContext, url: "wss://localhost:\(fixture.server.port)/")
        #expect(await client.log.opened())
        clientContext.shutdown()
        fixture.context.shutdown()
    }

    @Test("wss handshakes succeed while other contexts are being created (lws 4.1 global TLS index)")
    func handshakesSurviveNewContexts() async throws {
        let certificates = try await offPool { try TestCertificates() }
        let fixture = try ServerFixture(tls: certificates.server)
        let clientContext = try WebSocketContext(options: .init(certificateAuthorityFile: certificates.caFile))
        let churning = Locked(true)
        let churnEnded = EventLog()
        let churn = Thread {
            while churning.withLock({ $0 }) {
                (try? WebSocketContext())?.shutdown()
            }
            churnEnded.record(.open)
        }
        churn.start()
        defer { churning.withLock { $0 = false } }
        for _ in 0..<200 {
            let client = try Client(clientContext, url: fixture.server.url())
            #expect(await client.log.opened())
            client.connection.abort()
        }
        churning.withLock { $0 = false }
        // A context still being created when the process exits races OpenSSL's atexit cleanup.
        #expect(await churnEnded.wait(for: 1) { $0 == .open } != nil)
        clientContext.shutdown()
        fixture.context.shutdown()
    }
}
