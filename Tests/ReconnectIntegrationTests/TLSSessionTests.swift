import Dispatch
import Foundation
import Glibc
import LineStream
import Spawn
import SystemSupport
import TestSupport
import Testing
@testable import xmpp_client

/// `TLSSession` over a real `TCPConnection` against a real third-party peer, OpenSSL's own
/// `openssl s_server` (`-rev` answers each line reversed), with certificates made at test time;
/// and `XMPPClientStream`'s STARTTLS against scripted servers that break RFC 6120 section 5.
@Suite(.serialized) struct TLSSessionTests {
    /// `openssl s_server` on a free loopback port with `pair`, killed at the end.
    final class OpenSSLServer: Sendable {
        let port: UInt16
        private let process: ChildProcess

        init(_ pair: TestCertificates.Pair) throws {
            port = try TestSockets.freePort()
            process = try ChildProcess(
                TestCertificates.opensslPath,
                ["s_server", "-accept", "127.0.0.1:\(port)", "-cert", pair.certificate, "-key", pair.key, "-rev", "-quiet", "-naccept", "4"],
                standardInput: .pipe, standardOutput: .nullDevice, standardError: .nullDevice
            )
            let deadline = ContinuousClock.now + .seconds(10)
            while !TestSockets.accepts(port: port) {
                guard ContinuousClock.now < deadline, process.isRunning else { throw SocketFailure(operation: "openssl s_server start", errno: 0) }
                usleep(20_000)
            }
        }

        deinit {
            process.signal(SIGKILL)
            process.waitUntilExit()
        }
    }

    /// A TLS client over one TCP connection, recording what happens.
    final class Client: Sendable {
        let session: TLSSession
        let established = Recorder<String>()
        let plaintext = Recorder<UInt8>()
        let failures = Recorder<TLSError>()
        private let queue = DispatchQueue(label: "TLSSessionTests.Client")
        private let current = Locked<TCPConnection?>(nil)

        init(port: UInt16, caFile: String, serverName: String = "localhost") throws {
            session = try TLSSession(context: TLSContext(caFile: caFile), serverName: serverName)
            let (session, established, plaintext, failures, current) = (session, established, plaintext, failures, current)
            queue.sync {
                let connection = TCPConnection(host: "127.0.0.1", port: port, queue: queue) { event in
                    guard let tcp = current.withLock({ $0 }) else { return }
                    do throws(TLSError) {
                        switch event {
                        case .connected:
                            tcp.send(try session.start())
                        case .received(let bytes):
                            let output = try session.receive(bytes)
                            tcp.send(output.ciphertext)
                            if output.handshakeCompleted { established.record(session.protocolVersion ?? "?") }
                            for byte in output.plaintext { plaintext.record(byte) }
                        case .closed:
                            break
                        }
                    } catch {
                        failures.record(error)
                        tcp.close()
                    }
                }
                current.withLock { $0 = connection }
                connection.start()
            }
        }

        func send(_ text: String) throws {
            let sealed = try session.seal(Array(text.utf8))
            queue.sync { current.withLock { $0 }?.send(sealed) }
        }

        deinit {
            queue.sync { current.withLock { $0 }?.close() }
        }
    }

    @Test("a handshake with openssl s_server verifies its certificate, negotiates TLS 1.3 and carries data both ways")
    func roundTrip() async throws {
        let authority = try TestCertificates()
        let server = try OpenSSLServer(try authority.server("localhost"))
        let client = try Client(port: server.port, caFile: authority.caFile)
        #expect(await client.established.wait { $0 == ["TLSv1.3"] })
        #expect(client.session.isEstablished)
        #expect(client.session.cipherSuite?.hasPrefix("TLS_") == true)
        try client.send("hello, tls\n")
        #expect(await client.plaintext.wait { String(decoding: $0, as: UTF8.self) == "slt ,olleh\n" })
        #expect(client.failures.values.isEmpty)
    }

    @Test("a certificate from a CA the client does not trust is rejected with the verifier's reason")
    func untrustedCA() async throws {
        let authority = try TestCertificates()
        let stranger = try TestCertificates(name: "Stranger CA")
        let server = try OpenSSLServer(try authority.server("localhost"))
        let client = try Client(port: server.port, caFile: stranger.caFile)
        #expect(await client.failures.wait { $0 == [.certificateRejected(reason: "unable to get local issuer certificate")] })
        #expect(client.established.values.isEmpty)
        #expect(throws: TLSError.notEstablished) { try client.send("never") }
    }

    @Test("a trusted certificate for another name is rejected (RFC 6125): hostname mismatch")
    func otherName() async throws {
        let authority = try TestCertificates()
        let server = try OpenSSLServer(try authority.server("example.org"))
        let client = try Client(port: server.port, caFile: authority.caFile)
        #expect(await client.failures.wait { $0 == [.certificateRejected(reason: "hostname mismatch")] })
        #expect(client.established.values.isEmpty)
    }

    @Test("a peer that does not speak TLS fails the handshake with a typed error")
    func notTLS() async throws {
        let authority = try TestCertificates()
        let server = try ScriptedServer(sending: Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".utf8))
        let client = try Client(port: server.port, caFile: authority.caFile)
        #expect(await client.failures.wait { failures in
            if case .handshakeFailed? = failures.first { true } else { false }
        })
        #expect(client.established.values.isEmpty)
    }

    @Test("a CA file that is missing or not PEM cannot make a context")
    func unusableCAFile() throws {
        #expect { try TLSContext(caFile: "/nonexistent/ca.pem") } throws: { error in
            if case TLSError.trustStoreUnusable(path: "/nonexistent/ca.pem", _) = error { true } else { false }
        }
        let authority = try TestCertificates()
        let garbage = authority.directory + "/garbage.pem"
        try "not a certificate\n".write(toFile: garbage, atomically: true, encoding: .utf8)
        #expect { try TLSContext(caFile: garbage) } throws: { error in
            if case TLSError.trustStoreUnusable = error { true } else { false }
        }
    }

    // MARK: - STARTTLS against scripted servers

    static let startTLSFeatures = XMPPClientStreamTests.header
        + "<stream:features><starttls xmlns='urn:ietf:params:xml:ns:xmpp-tls'><required/></starttls></stream:features>"

    /// A server that offers STARTTLS, waits for `<starttls/>`, then sends `answer` in one write.
    static func startTLSServer(answer: String) throws -> ScriptedServer {
        try ScriptedServer { fd in
            TestSockets.write(fd, Array(startTLSFeatures.utf8))
            var received: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            while !String(decoding: received, as: UTF8.self).contains("<starttls") {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                guard count > 0 else { return }
                received += buffer[..<count]
            }
            TestSockets.write(fd, Array(answer.utf8))
            while buffer.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, $0.count, 0) }) > 0 {}
        }
    }

    private func tlsProbe(_ server: ScriptedServer) throws -> (XMPPClientStreamTests.Probe, TestCertificates) {
        let authority = try TestCertificates()
        let probe = try XMPPClientStreamTests.Probe(server, tls: TLSContext(caFile: authority.caFile))
        return (probe, authority)
    }

    @Test("clear text after <proceed/> is an injection (CVE-2011-0411): the stream ends and the injected stanza is never delivered")
    func injectionAfterProceed() async throws {
        let server = try Self.startTLSServer(answer: "<proceed xmlns='urn:ietf:params:xml:ns:xmpp-tls'/><message><body>injected</body></message>")
        let (probe, _) = try tlsProbe(server)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .disconnected))
        #expect(probe.events.kinds == [.willConnect, .opened, .disconnected])
        // Both parts come in one read on loopback; were they split, the rest would meet TLS.
        switch probe.lastError {
        case .unexpected(let what)? where what.contains("after <proceed/>"): break
        case .tls(.handshakeFailed)?: break
        default: Issue.record("expected the injection refused, got \(String(describing: probe.lastError))")
        }
        #expect(probe.stanzas.values.isEmpty)
    }

    @Test("a STARTTLS failure from the server ends the stream with startTLSFailed")
    func startTLSFailure() async throws {
        let server = try Self.startTLSServer(answer: "<failure xmlns='urn:ietf:params:xml:ns:xmpp-tls'/></stream:stream>")
        let (probe, _) = try tlsProbe(server)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .disconnected))
        #expect(probe.lastError == .startTLSFailed)
    }
}
