import Foundation
import Glibc
import Testing
import WebSocket

/// Reads a server's frames (unmasked, RFC 6455 §5.2) from a raw socket, whole.
struct RawFrameReader {
    struct Frame {
        var opcode: UInt8
        var final: Bool
        var payload: [UInt8]
    }

    let socket: Int32
    private var buffer: [UInt8] = []
    private var start = 0

    init(_ socket: Int32) { self.socket = socket }

    /// Sends an opening handshake on `socket` and reads the answer, which must be 101.
    static func upgrade(_ socket: Int32) throws -> RawFrameReader {
        try RawTCP.send(socket, Array(("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").utf8))
        var reader = RawFrameReader(socket)
        let head = try reader.head()
        guard head.hasPrefix("HTTP/1.1 101") else { throw RawTCP.Failure(description: "no upgrade: \(head.prefix(80))") }
        return reader
    }

    /// Reads until `count` bytes are buffered past `start`.
    private mutating func fill(_ count: Int) throws {
        var chunk = [UInt8](repeating: 0, count: 65_536)
        while buffer.count - start < count {
            let read = recv(socket, &chunk, chunk.count, 0)
            guard read > 0 else { throw RawTCP.Failure(description: "recv: \(read), errno \(errno)") }
            if start > 1 << 20 {
                buffer.removeFirst(start)
                start = 0
            }
            buffer.append(contentsOf: chunk[0..<read])
        }
    }

    private mutating func take(_ count: Int) throws -> ArraySlice<UInt8> {
        try fill(count)
        defer { start += count }
        return buffer[start..<(start + count)]
    }

    /// The opening handshake's answer, up to its blank line.
    mutating func head() throws -> String {
        var head: [UInt8] = []
        while !head.suffix(4).elementsEqual("\r\n\r\n".utf8) { head.append(contentsOf: try take(1)) }
        return String(decoding: head, as: UTF8.self)
    }

    mutating func next() throws -> Frame {
        let header = try take(2)
        let first = header[header.startIndex], second = header[header.startIndex + 1]
        guard second & 0x80 == 0 else { throw RawTCP.Failure(description: "a server frame was masked") }
        var length = Int(second & 0x7f)
        if length == 126 {
            length = try take(2).reduce(0) { $0 << 8 | Int($1) }
        } else if length == 127 {
            length = try take(8).reduce(0) { $0 << 8 | Int($1) }
        }
        return Frame(opcode: first & 0x0f, final: first & 0x80 != 0, payload: Array(try take(length)))
    }
}

@Suite("A backlog written while the peer does not read")
struct BacklogOrderTests {
    @Test("12 MB queued to a peer that is not reading arrive whole and in order, then the close frame")
    func backlogKeepsOrder() async throws {
        let fixture = try ServerFixture(echo: false)
        let socket = try RawTCP.connect(port: fixture.server.port)
        defer { close(socket) }
        var reader = try RawFrameReader.upgrade(socket)
        let accepted = try #require(await fixture.connection())

        // Far more than the socket buffers hold: the first frames go straight to the kernel,
        // then lws keeps the rest of a short write and later frames wait in the queue.
        let messages = (0..<3_000).map { index in
            "\(index):" + String(repeating: String(UnicodeScalar(UInt8(97 + index % 26))), count: 4_096)
        }
        for message in messages { try accepted.connection.send(text: message) }
        try accepted.connection.ping([7])
        try accepted.connection.close(code: WebSocketCloseCode(rawValue: 4000), reason: "done")

        var received = 0
        for message in messages {
            let frame = try reader.next()
            guard frame.opcode == 1, frame.final, frame.payload.elementsEqual(message.utf8) else {
                Issue.record("frame \(received) was opcode \(frame.opcode), \(frame.payload.count) bytes starting \(String(decoding: frame.payload.prefix(8), as: UTF8.self))")
                break
            }
            received += 1
        }
        #expect(received == messages.count)
        let ping = try reader.next()
        #expect(ping.opcode == 9 && ping.payload == [7])
        let closing = try reader.next()
        #expect(closing.opcode == 8)
        #expect(closing.payload == [0x0f, 0xa0] + Array("done".utf8))
        fixture.context.shutdown()
    }

    @Test("on an idle connection a message, a ping and the close behind them are written at once, in order")
    func idleConnectionWritesAtOnce() async throws {
        let fixture = try ServerFixture(echo: false)
        let socket = try RawTCP.connect(port: fixture.server.port)
        defer { close(socket) }
        var reader = try RawFrameReader.upgrade(socket)
        let accepted = try #require(await fixture.connection())
        for round in 0..<3 {
            try accepted.connection.send(text: "round \(round)")
            let frame = try reader.next()
            #expect(frame.opcode == 1 && frame.payload == Array("round \(round)".utf8))
        }
        try accepted.connection.send(binary: [1, 2, 3])
        try accepted.connection.ping([9])
        try accepted.connection.close(code: WebSocketCloseCode(rawValue: 4001), reason: "bye")
        let binary = try reader.next(), ping = try reader.next(), closing = try reader.next()
        #expect(binary.opcode == 2 && binary.payload == [1, 2, 3])
        #expect(ping.opcode == 9 && ping.payload == [9])
        #expect(closing.opcode == 8 && closing.payload == [0x0f, 0xa1] + Array("bye".utf8))
        fixture.context.shutdown()
    }

    @Test("a peer that never reads is dropped once maxBufferedAmount is queued: send throws sendBufferFull, .closed says why")
    func neverReadingPeerDropped() async throws {
        let fixture = try ServerFixture(options: WebSocketContext.Options(maxBufferedAmount: 1 << 20), echo: false)
        let socket = try RawTCP.connect(port: fixture.server.port)
        defer { close(socket) }
        var size: Int32 = 4096
        setsockopt(socket, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        _ = try RawFrameReader.upgrade(socket)
        let accepted = try #require(await fixture.connection())
        let message = String(repeating: "m", count: 4_096)
        var refusal: WebSocketError?
        var sent = 0
        // 40 MB at most; the kernel's buffers and lws take a few MB, the queue 1 MiB.
        while sent < 10_000 {
            do throws(WebSocketError) {
                try accepted.connection.send(text: message)
                sent += 1
            } catch {
                refusal = error
                break
            }
        }
        #expect(refusal == .sendBufferFull(limit: 1 << 20), "\(sent) messages sent")
        #expect(accepted.connection.bufferedAmount <= 1 << 20)
        let terminal = await accepted.log.terminal()
        #expect(terminal == .closed(code: .abnormalClosure, reason: WebSocketError.sendBufferFull(limit: 1 << 20).description))
        #expect(throws: WebSocketError.connectionClosed) { try accepted.connection.send(text: "late") }
        fixture.context.shutdown()
    }
}

@Suite("Text that is not UTF-8")
struct InvalidUTF8Tests {
    @Test("a client's text frame that is not UTF-8 is closed with 1007 by the server, and the server reports 1007")
    func serverCloses() async throws {
        let fixture = try ServerFixture(echo: false)
        let socket = try RawTCP.connect(port: fixture.server.port)
        defer { close(socket) }
        var reader = try RawFrameReader.upgrade(socket)
        let accepted = try #require(await fixture.connection())
        // A masked text frame (RFC 6455 §5.3), payload FF FE: never valid UTF-8.
        let mask: [UInt8] = [0x12, 0x34, 0x56, 0x78]
        try RawTCP.send(socket, [0x81, 0x82] + mask + [0xFF ^ mask[0], 0xFE ^ mask[1]])
        let closing = try reader.next()
        #expect(closing.opcode == 8)
        #expect(closing.payload.prefix(2) == [0x03, 0xEF], "1007: \(closing.payload)")
        // The closing handshake's answer (masked, same code), so the server's close completes.
        try RawTCP.send(socket, [0x88, 0x82] + mask + [0x03 ^ mask[0], 0xEF ^ mask[1]])
        #expect(await accepted.log.terminal() == .closed(code: .invalidFramePayloadData, reason: "invalid UTF-8"))
        fixture.context.shutdown()
    }
}
