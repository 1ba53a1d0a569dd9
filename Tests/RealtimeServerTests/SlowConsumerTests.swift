import Foundation
import Glibc
import RealtimeProtocol
import RealtimeServer
import TestSupport
import Testing

/// A client that subscribes and then never reads: past the server's 4 MiB backlog it is
/// dropped, reset rather than left to the kernel with its unsent megabytes, and forgotten.
@Suite struct SlowConsumerTests {
    /// A WebSocket client on a raw blocking socket with a 4 KiB receive buffer.
    struct RawClient {
        let fd: Int32

        init(port: Int) throws {
            fd = try TestSockets.connectedSocket(port: UInt16(port)) { fd in
                var size: Int32 = 4096
                setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            }
            TestSockets.write(fd, Array(("GET /app/\(ServerFixture.app.key) HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8))
        }

        /// Sends one masked text frame (RFC 6455 §5.3), shorter than 126 bytes.
        func send(_ text: String) {
            let payload = Array(text.utf8)
            precondition(payload.count < 126)
            let mask: [UInt8] = [1, 2, 3, 4]
            TestSockets.write(fd, [0x81, 0x80 | UInt8(payload.count)] + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] })
        }

        /// Reads until the connection ends; the errno that ended it (0 for an orderly end).
        func drain() -> Int32 {
            var timeout = timeval(tv_sec: 10, tv_usec: 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var buffer = [UInt8](repeating: 0, count: 65_536)
            while true {
                let count = recv(fd, &buffer, buffer.count, 0)
                if count > 0 { continue }
                return count == 0 ? 0 : errno
            }
        }
    }

    @Test("a subscriber that never reads is dropped past its backlog, reset (ECONNRESET, not a slow FIN), and forgotten; others keep receiving")
    func neverReads() async throws {
        let fixture = try ServerFixture()
        let good = try fixture.connect()
        #expect(good.message("bird:connection_established") != nil)
        good.send(#"{"event":"bird:subscribe","data":{"channel":"news"}}"#)
        #expect(good.message("bird_internal:subscription_succeeded") != nil)
        let stalled = try RawClient(port: fixture.server.port)
        defer { close(stalled.fd) }
        try await Task.sleep(for: .milliseconds(300))
        stalled.send(#"{"event":"bird:subscribe","data":{"channel":"news"}}"#)
        let deadline = ContinuousClock.now + .seconds(10)
        while fixture.server.hub.channels(appID: "1")["news"] != 2, ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(fixture.server.hub.channels(appID: "1")["news"] == 2)

        // 9 KB events until the stalled client's backlog passes 4 MiB (about 460 of them).
        let data = #"{"fill":""# + String(repeating: "y", count: 9000) + #""}"#
        var published = 0
        var largestQueue = 0
        while fixture.server.hub.metrics.slowConsumersDropped.load(ordering: .relaxed) == 0, published < 5_000 {
            fixture.server.hub.publish(appID: "1", channels: ["news"], event: "bulk", data: data)
            published += 1
            // Paced by the good subscriber, so that only the stalled one falls behind.
            if published % 20 == 0 {
                try #require(good.message("bulk", count: published, timeout: .seconds(10)) != nil)
                let line = fixture.server.hub.metricsText().split(separator: "\n").first { $0.hasPrefix("realtime_send_queue_largest_bytes ") }
                largestQueue = max(largestQueue, line.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0)
            }
        }
        #expect(largestQueue > 1 << 20, "/metrics showed the stalled client's queue grow: \(largestQueue) bytes")
        #expect(fixture.server.hub.metrics.slowConsumersDropped.load(ordering: .relaxed) == 1, "after \(published) events")
        let forgotten = ContinuousClock.now + .seconds(10)
        // The hub hears of the close through the connection's last event, after the service
        // thread has let the socket go: wait for both.
        while fixture.server.openConnectionCount > 1 || fixture.server.hub.connectionCount > 1, ContinuousClock.now < forgotten {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(fixture.server.openConnectionCount == 1, "only the good client is left")
        #expect(fixture.server.hub.connectionCount == 1)
        #expect(stalled.drain() == ECONNRESET, "reset: the kernel dropped what was unsent")
        #expect(good.message("bulk", count: published, timeout: .seconds(30)) != nil, "the good subscriber got all \(published)")
    }
}
