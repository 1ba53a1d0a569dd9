import Dispatch
import Glibc
import LineStream
import SystemSupport
import TestSupport
import Testing
@testable import xmpp_client

/// What a hostile server cannot make the XMPP stream do: buffer its answers without end (a
/// server that sends pings and never reads) or wait forever for a silent handshake.
@Suite struct XMPPStreamBoundsTests {
    /// Writes `bytes` on a blocking socket; false once the peer is gone.
    private static func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return false }
            offset += count
        }
        return true
    }

    @Test("a TCPConnection whose peer never reads is closed with sendBufferFull once its outbox passes the bound")
    func outboxBound() async throws {
        let server = try ScriptedServer { fd in
            // Never reads: sleeps until the client goes away.
            var buffer = [UInt8](repeating: 0, count: 1)
            while recv(fd, &buffer, 1, Int32(MSG_PEEK)) > 0 { usleep(50_000) }
        }
        let queue = DispatchQueue(label: "XMPPStreamBoundsTests.outbox")
        let closed = Recorder<TCPConnectionError>()
        let holder = Locked<TCPConnection?>(nil)
        queue.sync {
            let connection = TCPConnection(host: "127.0.0.1", port: server.port, queue: queue, maximumOutboxBytes: 64 << 10) { event in
                guard case .connected = event else {
                    if case .closed(let error) = event { closed.record(error) }
                    return
                }
                // 64 MiB in 64 KiB writes: the kernel's buffers fill, then the outbox.
                let chunk = [UInt8](repeating: 0x61, count: 64 << 10)
                for _ in 0..<1024 { holder.withLock { $0 }?.send(chunk) }
            }
            holder.withLock { $0 = connection }
            connection.start()
        }
        #expect(await closed.wait { $0 == [.sendBufferFull(limit: 64 << 10)] })
        queue.sync { #expect(holder.withLock { $0 }?.isConnected == false) }
        // The handler holds `holder`, which holds the connection: let it go.
        queue.sync { holder.withLock { $0 = nil } }
    }

    @Test("pings from a server that never reads the answers (each id 1,000 apostrophes, six bytes each when escaped) end the session with sendBufferFull, not unbounded memory")
    func pingFloodWithoutReading() async throws {
        let ping = Array("<iq type=\"get\" id=\"\(String(repeating: "'", count: 1000))\"><ping xmlns='urn:xmpp:ping'/></iq>".utf8)
        let server = try ScriptedServer { fd in
            guard Self.write(fd, Array(XMPPClientStreamTests.session.utf8)) else { return }
            // At most 64 MiB of pings: the client's answers are six times larger.
            for _ in 0..<(64 << 20) / ping.count {
                guard Self.write(fd, ping) else { return }
            }
        }
        let probe = try XMPPClientStreamTests.Probe(server)
        probe.stream.connect()
        #expect(await probe.events.wait(for: .ready))
        #expect(await probe.events.wait(for: .disconnected, timeout: .seconds(30)))
        #expect(probe.lastError == .connection(.sendBufferFull(limit: TCPConnection.defaultMaximumOutboxBytes), stage: .ready))
    }

    @Test("a server that accepts and says nothing: the attempt ends after connectTimeout, plain or direct TLS", arguments: [false, true])
    func silentServer(directTLS: Bool) async throws {
        let server = try ScriptedServer { fd in
            var buffer = [UInt8](repeating: 0, count: 4096)
            while recv(fd, &buffer, buffer.count, 0) > 0 {}
        }
        let authority = try TestCertificates()
        let stream = try XMPPClientStream(
            host: "127.0.0.1", port: server.port, jid: "alice@localhost", password: "x", resource: "r",
            tls: directTLS ? TLSContext(caFile: authority.caFile) : nil, directTLSPort: server.port
        )
        stream.connectTimeout = .milliseconds(300)
        let events = Recorder<StreamRecord>()
        let token = stream.reconnectEvents.observe { events.record(StreamRecord($0)) }
        defer { token.cancel() }
        stream.connect(using: directTLS ? .directTLS : .standard)
        #expect(await events.wait(for: .disconnected, timeout: .seconds(5)))
        #expect(events.kinds == [.willConnect, .disconnected])
        let stage: XMPPStreamError.Stage = directTLS ? .securing : .negotiating
        #expect(events.lastDisconnectError as? XMPPStreamError == .connectTimedOut(timeout: .milliseconds(300), stage: stage))
    }
}
