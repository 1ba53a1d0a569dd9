import Foundation
import Testing
import TestSupport
import WebSocket

/// `permessage-deflate` (RFC 7692) between our client and server, and against Python's
/// `websockets` (its own zlib code, both roles): negotiation, messages of every size intact
/// and in order, the per-listener switch, and compression bombs closed with 1009.
@Suite("permessage-deflate", .timeLimit(.minutes(2)))
struct PerMessageDeflateTests {
    static let deflating = WebSocketContext.Options(permessageDeflate: PerMessageDeflate())

    /// Messages that take each path of lws' extension: empty, small and repetitive (context
    /// takeover), larger than its 1 KiB deflate buffer (several compressed frames drained from
    /// POLLOUT), incompressible, and longer than a frame (fragmented by us, then compressed).
    static func messages() -> [WebSocketEvent] {
        var generator = SystemRandomNumberGenerator()
        let noise = (0..<200_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        var events: [WebSocketEvent] = [.text("")]
        for index in 0..<300 { events.append(.text(#"{"event":"bird:room_event","data":{"id":\#(index),"text":"hello"}}"#)) }
        events.append(.binary(noise))
        events.append(.text(String(repeating: "a compressible line of JSON, ", count: 30_000)))
        events.append(.binary(Array(noise.prefix(70_000)) + Array(repeating: 0, count: 70_000)))
        events.append(.text("last"))
        return events
    }

    static func send(_ messages: [WebSocketEvent], on connection: WebSocketConnection) throws {
        for message in messages {
            switch message {
            case .text(let text): try connection.send(text: text)
            case .binary(let bytes): try connection.send(binary: bytes)
            default: break
            }
        }
    }

    @Test("our client and server negotiate it; every kind of message comes back intact and in order")
    func ourPair() async throws {
        let fixture = try ServerFixture(options: Self.deflating)
        let context = try WebSocketContext(options: Self.deflating)
        defer { context.shutdown(); fixture.context.shutdown() }
        let client = try Client(context, url: fixture.server.url(path: "/app/KEY"))
        #expect(await client.log.opened())
        #expect(client.connection.isCompressed)
        let accepted = try #require(await fixture.connection())
        #expect(accepted.connection.isCompressed)
        let sent = Self.messages()
        try Self.send(sent, on: client.connection)
        // lws 4.1.6's client would loop on a pong with a payload: a compressed client asks for none.
        #expect(throws: WebSocketError.controlPayloadTooLong(2)) { try client.connection.ping([1, 2]) }
        try client.connection.ping()
        let events = await client.log.wait { $0.contains(.text("last")) && $0.contains(.pong([])) }
        let echoed = events?.filter { if case .pong = $0 { false } else { $0 != .open } }
        #expect(echoed?.count == sent.count)
        let same = echoed == sent
        #expect(same, "the echoes differ from what was sent")
        try client.connection.close(code: .normalClosure, reason: "done")
        #expect(await client.log.terminal() == .closed(code: .normalClosure, reason: "done"))
    }

    @Test("a listener that turns the offer down, or a side without the setting: uncompressed, and still talking")
    func refused() async throws {
        let turningDown = try ServerFixture(options: Self.deflating, acceptsDeflate: { $0.path != "/app/PLAIN" })
        let plainServer = try ServerFixture()
        let deflating = try WebSocketContext(options: Self.deflating)
        let plain = try WebSocketContext()
        defer { for context in [turningDown.context, plainServer.context, deflating, plain] { context.shutdown() } }
        let cases: [(WebSocketContext, String, Bool)] = [
            (deflating, turningDown.server.url(path: "/app/PLAIN"), false),
            (deflating, turningDown.server.url(path: "/app/KEY"), true),
            (deflating, plainServer.server.url(path: "/app/KEY"), false),
            (plain, turningDown.server.url(path: "/app/KEY"), false),
        ]
        for (context, url, compressed) in cases {
            let client = try Client(context, url: url)
            #expect(await client.log.opened())
            #expect(client.connection.isCompressed == compressed, "\(url)")
            try client.connection.send(text: "hello")
            #expect(await client.log.wait { $0.contains(.text("hello")) } != nil)
            try client.connection.close()
            _ = await client.log.terminal()
        }
    }

    @Test("a message that inflates past maxMessageSize is closed with 1009, both ways")
    func bombs() async throws {
        var serverOptions = Self.deflating
        serverOptions.maxMessageSize = 1 << 20
        let fixture = try ServerFixture(options: serverOptions)
        var clientOptions = Self.deflating
        clientOptions.maxMessageSize = 64 << 10
        let context = try WebSocketContext(options: clientOptions)
        defer { context.shutdown(); fixture.context.shutdown() }

        // 32 MiB of one byte: about 32 KB on the wire.
        let toServer = try Client(context, url: fixture.server.url(path: "/app/KEY"))
        #expect(await toServer.log.opened())
        try toServer.connection.send(text: String(repeating: "0", count: 32 << 20))
        #expect(await toServer.log.terminal() == .closed(code: .messageTooBig, reason: "message too big"))

        let toClient = try Client(context, url: fixture.server.url(path: "/app/KEY"))
        #expect(await toClient.log.opened())
        let accepted = try #require(await fixture.connection(1))
        try accepted.connection.send(text: String(repeating: "0", count: 8 << 20))
        let ended = await toClient.log.terminal()
        #expect(ended == .closed(code: .messageTooBig, reason: "message too big"))
        // The close frame goes out first, but the connection is dropped at once: a sender still
        // writing may see the reset before it reads the frame.
        let senderSaw = await accepted.log.terminal()
        guard case .closed(let code, _) = senderSaw else { Issue.record("not closed: \(String(describing: senderSaw))"); return }
        #expect(code == .messageTooBig || code == .abnormalClosure, "\(String(describing: senderSaw))")
    }

    @Test(
        "Python websockets as client: its offer accepted, one asking server_no_context_takeover answered without it, a bomb closed",
        .enabled(if: PythonPeer.isAvailable, "needs python3 with websockets (scripts/setup)"),
        arguments: [("default", "permessage-deflate"), ("server_no_context_takeover", "-"), ("none", "-")]
    )
    func pythonClient(offer: String, answered: String) async throws {
        var options = Self.deflating
        options.maxMessageSize = 1 << 20
        let fixture = try ServerFixture(options: options)
        defer { fixture.context.shutdown() }
        let peer = try PythonPeer.start("ws_deflate_peer.py", ["client", fixture.server.url(path: "/app/KEY"), offer, String(16 << 20)])
        let lines = try await offPool { peer.lines(atLeast: 3, timeout: 60) }
        #expect(lines == ["extensions \(answered)", "ok", "closed 1009"])
        let accepted = try #require(await fixture.connection())
        #expect(accepted.connection.isCompressed == (answered != "-"))
    }

    @Test(
        "Python websockets as server (12 window bits each way): our client inflates and deflates with it, and closes a bomb with 1009",
        .enabled(if: PythonPeer.isAvailable, "needs python3 with websockets (scripts/setup)")
    )
    func pythonServer() async throws {
        let peer = try PythonPeer.start("ws_deflate_peer.py", ["server", String(8 << 20)])
        let portLine = try #require(try await offPool { peer.lines(atLeast: 1, timeout: 30) }.first)
        let port = try #require(Int(portLine.dropFirst("port ".count)))
        var options = Self.deflating
        options.maxMessageSize = 1 << 20
        let context = try WebSocketContext(options: options)
        defer { context.shutdown() }
        let client = try Client(context, url: "ws://127.0.0.1:\(port)/echo")
        #expect(await client.log.opened())
        #expect(client.connection.isCompressed)
        let sent = Self.messages()
        try Self.send(sent, on: client.connection)
        let events = await client.log.wait { $0.contains(.text("last")) }
        let same = events.map { Array($0.dropFirst()) } == sent
        #expect(same, "the echoes differ from what was sent")
        try client.connection.send(text: "bomb please")
        #expect(await client.log.terminal() == .closed(code: .messageTooBig, reason: "message too big"))
        let ended = try await offPool { peer.lines(atLeast: 2, timeout: 30) }
        #expect(ended.last == "closed 1009 message too big")
    }

    @Test(
        "a pong with a payload to a compressed client closes it with 1011 instead of looping in lws",
        .enabled(if: PythonPeer.isAvailable, "needs python3 with websockets (scripts/setup)")
    )
    func pongWithPayload() async throws {
        let peer = try PythonPeer.start("ws_deflate_peer.py", ["server", "0"])
        let portLine = try #require(try await offPool { peer.lines(atLeast: 1, timeout: 30) }.first)
        let port = try #require(Int(portLine.dropFirst("port ".count)))
        let context = try WebSocketContext(options: Self.deflating)
        defer { context.shutdown() }
        let client = try Client(context, url: "ws://127.0.0.1:\(port)/echo")
        #expect(await client.log.opened())
        try client.connection.send(text: "pong please")
        let reason = "pong with a payload under permessage-deflate"
        #expect(await client.log.terminal() == .closed(code: .internalServerError, reason: reason))
        #expect(client.log.events.contains(.pong(Array("unsolicited".utf8))))
        let ended = try await offPool { peer.lines(atLeast: 2, timeout: 30) }
        #expect(ended.last == "closed 1011 \(reason)")
    }
}
