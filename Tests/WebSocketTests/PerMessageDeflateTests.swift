import Foundation
import Testing
import TestSupport
import WebSocket

/// `permessage-deflate` (RFC 7692) on our listeners, against Python's `websockets` client (its
/// own zlib code, offering it as browsers do): negotiation, messages of every size intact
/// both ways, the per-listener switch, offers lws 4.1.6 would mishandle, and compression
/// bombs closed with 1009. Our clients never offer it (`PerMessageDeflate`).
@Suite("permessage-deflate", .timeLimit(.minutes(2)), .enabled(if: PythonPeer.isAvailable, "needs python3 with websockets (scripts/setup)"))
struct PerMessageDeflateTests {
    // memLevel 1, the realtime server's: zlib stops taking input whenever its small literal buffer fills.
    static let deflating = WebSocketContext.Options(maxMessageSize: 1 << 20, permessageDeflate: PerMessageDeflate(memoryLevel: 1))

    /// Runs `ws_deflate_peer.py client` against `url` and returns its lines (three with a bomb,
    /// two without).
    static func python(_ url: String, offer: String, bomb: Int = 16 << 20) async throws -> [String] {
        let peer = try PythonPeer.start("ws_deflate_peer.py", ["client", url, offer, String(bomb)])
        return try await offPool { peer.lines(atLeast: bomb == 0 ? 2 : 3, timeout: 60) }
    }

    @Test(
        "its offer accepted, one asking server_no_context_takeover answered without it, none made: echoes intact, and a bomb closed with 1009",
        arguments: [("default", "permessage-deflate"), ("server_no_context_takeover", "-"), ("none", "-"), ("server_max_window_bits", "-")]
    )
    func pythonClient(offer: String, answered: String) async throws {
        let fixture = try ServerFixture(options: Self.deflating)
        defer { fixture.context.shutdown() }
        let lines = try await Self.python(fixture.server.url(path: "/app/KEY"), offer: offer)
        #expect(lines == ["extensions \(answered)", "ok", "closed 1009"])
        let accepted = try #require(await fixture.connection())
        #expect(accepted.connection.isCompressed == (answered != "-"))
        guard case .closed(let code, _) = await accepted.log.terminal() else { Issue.record("not closed"); return }
        #expect(code == .messageTooBig)
    }

    @Test("two clients compressing at once on one service thread: every echo intact (lws 4.1.6 inflates past a read from a shared buffer, so a long inflate is refused)")
    func twoAtOnce() async throws {
        let fixture = try ServerFixture(options: Self.deflating)
        defer { fixture.context.shutdown() }
        let url = fixture.server.url(path: "/app/KEY")
        async let first = Self.python(url, offer: "default", bomb: 0)
        async let second = Self.python(url, offer: "default", bomb: 0)
        let (one, two) = try await (first, second)
        #expect(one == ["extensions permessage-deflate", "ok"])
        #expect(two == ["extensions permessage-deflate", "ok"])
    }

    @Test("two compressed connections sent different long messages in turn: each gets its own, intact (lws' deflater reads the bytes again after lws_write returned)")
    func twoSentAtOnce() async throws {
        let fixture = try ServerFixture(options: Self.deflating, echo: false)
        defer { fixture.context.shutdown() }
        let peers = try ["a", "b"].map { try PythonPeer.start("ws_deflate_peer.py", ["expect", fixture.server.url(path: "/app/\($0)"), $0, "100"]) }
        let connections = try await [0, 1].asyncMap { index in try #require(await fixture.connection(index)).connection }
        for index in 0..<100 {
            for connection in connections {
                try connection.send(text: Self.hexNoise(connection.request?.path.last ?? "?", index))
            }
        }
        for peer in peers {
            let lines = try await offPool { peer.lines(atLeast: 2, timeout: 60) }
            #expect(lines == ["extensions permessage-deflate", "ok"])
        }
    }

    /// `hex_noise` of ws_deflate_peer.py: the letter, then 20,000 hex digits of a 64-bit LCG
    /// seeded by the letter and the index (about half compressible).
    static func hexNoise(_ letter: Character, _ index: Int) -> String {
        var state = UInt64(letter.asciiValue ?? 0) * 1000 + UInt64(index)
        let digits = Array("0123456789abcdef")
        var text = String(letter)
        text.reserveCapacity(20_001)
        for _ in 0..<20_000 {
            state = state &* 6364136223846793005 &+ 1442695040888963407
            text.append(digits[Int(state >> 60)])
        }
        return text
    }

    @Test("a listener turning the offer down for a path, and a listener without the setting: uncompressed, still echoing")
    func refused() async throws {
        let turningDown = try ServerFixture(options: Self.deflating, acceptsDeflate: { $0.path != "/app/PLAIN" })
        let plain = try ServerFixture()
        defer { turningDown.context.shutdown(); plain.context.shutdown() }
        let refused = try await Self.python(turningDown.server.url(path: "/app/PLAIN"), offer: "default", bomb: 0)
        #expect(refused == ["extensions -", "ok"])
        let unset = try await Self.python(plain.server.url(path: "/app/KEY"), offer: "default", bomb: 0)
        #expect(unset == ["extensions -", "ok"])
        #expect(await turningDown.connection()?.connection.isCompressed == false)
    }

    @Test("our own client never offers it: a deflating listener talks to it uncompressed")
    func ourClient() async throws {
        let fixture = try ServerFixture(options: Self.deflating)
        let context = try WebSocketContext(options: Self.deflating)
        defer { context.shutdown(); fixture.context.shutdown() }
        let client = try Client(context, url: fixture.server.url(path: "/app/KEY"))
        #expect(await client.log.opened())
        #expect(!client.connection.isCompressed)
        #expect(await fixture.connection()?.connection.isCompressed == false)
        try client.connection.ping([1, 2])
        try client.connection.send(text: "hello")
        #expect(await client.log.wait { $0.contains(.text("hello")) && $0.contains(.pong([1, 2])) } != nil)
    }

    @Test("frames a compressing listener need not inflate (an uncompressed text, a ping and a pong with payloads) are taken once, between compressed ones")
    func framesNotInflated() async throws {
        let fixture = try ServerFixture(options: Self.deflating)
        defer { fixture.context.shutdown() }
        let socket = try RawTCP.connect(port: fixture.server.port)
        defer { close(socket) }
        try RawTCP.send(socket, Array(("GET /app/KEY HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            + "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n").utf8))
        var reader = RawFrameReader(socket)
        let head = try reader.head()
        #expect(head.hasPrefix("HTTP/1.1 101") && head.lowercased().contains("sec-websocket-extensions: permessage-deflate"))
        let accepted = try #require(await fixture.connection())
        // "Hello" compressed alone (RFC 7692 §7.2.3.1), RSV1 set: 0x40 on the text opcode.
        let hello: [UInt8] = [0xf2, 0x48, 0xcd, 0xc9, 0xc9, 0x07, 0x00]
        try RawTCP.send(socket, clientFrame(opcode: 0x41, hello))
        try RawTCP.send(socket, clientFrame(opcode: 0x1, Array("plain".utf8)))
        try RawTCP.send(socket, clientFrame(opcode: 0x9, [1, 2, 3]))
        try RawTCP.send(socket, clientFrame(opcode: 0xA, [4, 5, 6]))
        try RawTCP.send(socket, clientFrame(opcode: 0x41, hello))
        let events = await accepted.log.wait { $0.filter { $0.text != nil }.count >= 3 }
        #expect(events?.compactMap(\.text) == ["Hello", "plain", "Hello"])
        #expect(events?.filter { $0 == .pong([4, 5, 6]) }.count == 1)
        // The echoes come compressed (RSV1 is not visible here: the reader keeps the opcode),
        // the pong to the ping as it was.
        var pong: [UInt8]?
        for _ in 0..<4 {
            let frame = try reader.next()
            if frame.opcode == 0xA { pong = frame.payload }
        }
        #expect(pong == [1, 2, 3])
    }
}

extension Array {
    /// `map` with an async transform, in order.
    func asyncMap<T>(_ transform: (Element) async throws -> T) async rethrows -> [T] {
        var results: [T] = []
        for element in self { results.append(try await transform(element)) }
        return results
    }
}
