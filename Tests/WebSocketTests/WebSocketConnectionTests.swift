import Dispatch
import Foundation
import SystemSupport
import Testing
import WebSocket

@Suite("WebSocket connections on loopback")
struct WebSocketConnectionTests {
    @Test("a client opens and a text message comes back from an echoing server")
    func echoText() async throws {
        let fixture = try ServerFixture()
        let client = try Client(fixture.context, url: fixture.server.url(path: "/echo"))
        #expect(await client.log.opened())
        try client.connection.send(text: "hello, wörld")
        let echoed = await client.log.wait { $0.contains(.text("hello, wörld")) }
        #expect(echoed != nil)
        let accepted = try #require(await fixture.connection())
        #expect(accepted.connection.request?.path == "/echo")
        #expect(accepted.connection.role == .server)
        #expect(client.connection.role == .client)
        fixture.context.shutdown()
    }

    @Test("a binary message comes back byte for byte, including an empty one")
    func echoBinary() async throws {
        let fixture = try ServerFixture()
        let client = try Client(fixture.context, url: fixture.server.url())
        let bytes = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        try client.connection.send(binary: bytes)
        try client.connection.send(binary: [])
        try client.connection.send(text: "")
        let events = await client.log.wait { $0.contains(.text("")) }
        #expect(events?.filter { $0 != .open } == [.binary(bytes), .binary([]), .text("")])
        fixture.context.shutdown()
    }

    @Test("a 3 MB message sent in 64 KiB fragments is reassembled on both sides")
    func largeFragmentedMessage() async throws {
        let options = WebSocketContext.Options(maxMessageSize: 8 << 20)
        let fixture = try ServerFixture(options: options)
        let client = try Client(fixture.context, url: fixture.server.url())
        let text = String(repeating: "0123456789abcdef", count: 3 << 16)
        try client.connection.send(text: text)
        let events = await client.log.wait { $0.contains(where: { $0.text != nil }) }
        #expect(events?.compactMap(\.text) == [text])
        let accepted = try #require(await fixture.connection())
        #expect(accepted.log.events.compactMap(\.text).map(\.count) == [text.count])
        fixture.context.shutdown()
    }

    @Test("with 4 KiB and with 64 KiB reads on both sides, a 3 MB message and 2,000 small ones after it arrive whole and in order", arguments: [4 << 10, 64 << 10])
    func readBufferSizes(readBufferSize: Int) async throws {
        let options = WebSocketContext.Options(maxMessageSize: 8 << 20, readBufferSize: readBufferSize)
        let fixture = try ServerFixture(options: options)
        let client = try Client(fixture.context, url: fixture.server.url(path: "/echo"))
        let large = String(repeating: "0123456789abcdef", count: 3 << 16)
        try client.connection.send(text: large)
        for n in 0..<2000 { try client.connection.send(text: "small \(n)") }
        let events = await client.log.wait { $0.compactMap(\.text).count == 2001 }
        #expect(events?.compactMap(\.text) == [large] + (0..<2000).map { "small \($0)" })
        fixture.context.shutdown()
    }

    @Test("a ping is answered with a pong carrying its payload, both ways")
    func pingPong() async throws {
        let fixture = try ServerFixture()
        let client = try Client(fixture.context, url: fixture.server.url())
        #expect(await client.log.opened())
        try client.connection.ping([1, 2, 3])
        #expect(await client.log.wait { $0.contains(.pong([1, 2, 3])) } != nil)
        let accepted = try #require(await fixture.connection())
        try accepted.connection.ping(Array("server".utf8))
        #expect(await accepted.log.wait { $0.contains(.pong(Array("server".utf8))) } != nil)
        #expect(throws: WebSocketError.controlPayloadTooLong(126)) { try client.connection.ping([UInt8](repeating: 0, count: 126)) }
        fixture.context.shutdown()
    }

    @Test("a client's close code and reason reach the server, and the client reports its own")
    func clientCloses() async throws {
        let fixture = try ServerFixture()
        let client = try Client(fixture.context, url: fixture.server.url())
        #expect(await client.log.opened())
        try client.connection.send(text: "last words")
        try client.connection.close(code: WebSocketCloseCode(4001), reason: "unknown app")
        let accepted = try #require(await fixture.connection())
        #expect(await accepted.log.terminal() == .closed(code: WebSocketCloseCode(4001), reason: "unknown app"))
        #expect(accepted.log.events.contains(.text("last words")))
        #expect(await client.log.terminal() == .closed(code: WebSocketCloseCode(4001), reason: "unknown app"))
        #expect(throws: WebSocketError.connectionClosed) { try client.connection.send(text: "too late") }
        fixture.context.shutdown()
    }

    @Test("a server's close code and reason reach the client")
    func serverCloses() async throws {
        let fixture = try ServerFixture()
        let client = try Client(fixture.context, url: fixture.server.url())
        let accepted = try #require(await fixture.connection())
        try accepted.connection.close(code: WebSocketCloseCode(4200), reason: "reconnect now")
        #expect(await client.log.terminal() == .closed(code: WebSocketCloseCode(4200), reason: "reconnect now"))
        #expect(await accepted.log.terminal() == .closed(code: WebSocketCloseCode(4200), reason: "reconnect now"))
        fixture.context.shutdown()
    }

    @Test("a server that drops the TCP connection without a close frame gives the client 1006")
    func serverDrops() async throws {
        let fixture = try ServerFixture()
        let client = try Client(fixture.context, url: fixture.server.url())
        #expect(await client.log.opened())
        let accepted = try #require(await fixture.connection())
        accepted.connection.abort()
        #expect(await client.log.terminal() == .closed(code: .abnormalClosure, reason: ""))
        #expect(await accepted.log.terminal() == .closed(code: .abnormalClosure, reason: ""))
        fixture.context.shutdown()
    }

    @Test("a message over the size limit is refused with close 1009")
    func messageTooBig() async throws {
        let serverContext = try WebSocketContext(options: .init(maxMessageSize: 1024))
        let fixture = try ServerFixture(context: serverContext)
        let clientContext = try WebSocketContext()
        let client = try Client(clientContext, url: fixture.server.url())
        let limit = String(repeating: "x", count: 1024)
        try client.connection.send(text: limit)
        #expect(await client.log.wait { $0.contains(.text(limit)) } != nil)
        try client.connection.send(binary: [UInt8](repeating: 1, count: 1025))
        #expect(await client.log.terminal() == .closed(code: .messageTooBig, reason: "message too big"))
        let accepted = try #require(await fixture.connection())
        #expect(await accepted.log.terminal() == .closed(code: .messageTooBig, reason: "message too big"))
        clientContext.shutdown()
        serverContext.shutdown()
    }

    @Test("messages sent from many threads at once all arrive, each thread's in order")
    func sendFromManyThreads() async throws {
        let fixture = try ServerFixture()
        let client = try Client(fixture.context, url: fixture.server.url())
        #expect(await client.log.opened())
        let threads = 8
        let perThread = 200
        let connection = client.connection
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<perThread { try? connection.send(text: "\(thread):\(index)") }
        }
        let events = await client.log.wait(for: threads * perThread) { $0.text != nil }
        let texts = try #require(events).compactMap(\.text)
        for thread in 0..<threads {
            let mine = texts.filter { $0.hasPrefix("\(thread):") }
            #expect(mine == (0..<perThread).map { "\(thread):\($0)" })
        }
        fixture.context.shutdown()
    }

    @Test("messages queued while connecting are sent after the handshake, and headers reach the server")
    func sendWhileConnecting() async throws {
        let fixture = try ServerFixture()
        let client = try Client(
            fixture.context, url: fixture.server.url(path: "/app/KEY?protocol=7"),
            headers: [HTTPHeader(name: "Authorization", value: "Bearer token")]
        )
        try client.connection.send(text: "early")
        #expect(await client.log.wait { $0.contains(.text("early")) } != nil)
        let request = try #require(await fixture.connection()?.connection.request)
        #expect(request.path == "/app/KEY")
        #expect(request.queryValue("protocol") == "7")
        #expect(request.header("authorization") == "Bearer token")
        #expect(request.header("origin") == "http://127.0.0.1:\(fixture.server.port)", "the Origin header, scheme once (RFC 6454)")
        #expect(request.remoteAddress == "127.0.0.1")
        fixture.context.shutdown()
    }
}
