import Foundation
import Glibc
import class Spawn.ChildProcess
import Testing
import WebSocket

/// The Python `websockets` package as a third-party peer, both as server and as client.
@Suite(
    "Interoperability with Python websockets",
    .enabled(if: PythonWebSockets.shouldRun, "needs python3 with the websockets package (scripts/setup installs it)")
)
struct PythonPeerTests {
    @Test("our client talks to a Python websockets echo server: text, binary, ping and a close code")
    func clientToPythonServer() async throws {
        let peer = try PythonWebSockets(mode: "server")
        defer { peer.stop() }
        let portLine = try #require(await peer.line { $0.hasPrefix("port ") })
        let port = try #require(Int(portLine.dropFirst(5)))
        let context = try WebSocketContext()
        let client = try Client(context, url: "ws://127.0.0.1:\(port)/echo")
        #expect(await client.log.opened())
        let big = String(repeating: "fragmented ", count: 20_000)
        try client.connection.send(text: "hello python")
        try client.connection.send(binary: [0, 1, 2, 255])
        try client.connection.send(text: big)
        try client.connection.ping([7])
        let events = await client.log.wait { $0.contains(.text(big)) && $0.contains(.pong([7])) }
        let messages = events?.filter { if case .pong = $0 { false } else { $0 != .open } }
        #expect(messages == [.text("hello python"), .binary([0, 1, 2, 255]), .text(big)])
        try client.connection.close(code: WebSocketCloseCode(4000), reason: "bye from swift")
        #expect(await peer.line { $0.hasPrefix("closed ") } == "closed 4000 bye from swift")
        #expect(await client.log.terminal() == .closed(code: WebSocketCloseCode(4000), reason: "bye from swift"))
        context.shutdown()
    }

    @Test("a Python websockets client talks to our echo server, including a fragmented message")
    func pythonClientToServer() async throws {
        let fixture = try ServerFixture()
        let peer = try PythonWebSockets(mode: "client", fixture.server.url(path: "/app/KEY"))
        defer { peer.stop() }
        #expect(await peer.line { $0 == "ok" || $0.hasPrefix("error") } == "ok")
        let accepted = try #require(await fixture.connection())
        #expect(accepted.connection.request?.path == "/app/KEY")
        #expect(await accepted.log.terminal() == .closed(code: WebSocketCloseCode(4001), reason: "python done"))
        let texts = accepted.log.events.compactMap(\.text)
        #expect(texts == ["from python", "one two three"])
        #expect(accepted.log.events.contains(.binary([0, 1, 2])))
        fixture.context.shutdown()
    }
}

/// `python3 -c <script> mode [url]`, its standard output read line by line.
final class PythonWebSockets: Sendable {
    /// Runs unless python3 or websockets is missing; with CI=true it always runs (and fails
    /// loudly instead of being skipped).
    static let shouldRun: Bool = {
        if ProcessInfo.processInfo.environment["CI"] == "true" { return true }
        return (try? ChildProcess.run("/usr/bin/env", ["python3", "-c", "import websockets"]))?.termination == .exited(0)
    }()

    private static let script = #"""
    import asyncio, sys
    import websockets

    async def serve():
        done = asyncio.get_running_loop().create_future()
        async def echo(socket, *unused):
            try:
                async for message in socket:
                    await socket.send(message)
            finally:
                if not done.done():
                    done.set_result(f"closed {socket.close_code} {socket.close_reason}")
        # No handshake or keepalive deadlines: a loaded machine (a sanitizer run) is slow.
        async with websockets.serve(echo, "127.0.0.1", 0, max_size=None, open_timeout=None, ping_interval=None) as server:
            port = list(server.sockets)[0].getsockname()[1]
            print(f"port {port}", flush=True)
            print(await asyncio.wait_for(done, 60), flush=True)

    async def client(url):
        async with websockets.connect(url, open_timeout=None, ping_interval=None) as socket:
            await socket.send("from python")
            assert await asyncio.wait_for(socket.recv(), 10) == "from python"
            await socket.send(bytes([0, 1, 2]))
            assert await asyncio.wait_for(socket.recv(), 10) == bytes([0, 1, 2])
            await socket.send(["one ", "two ", "three"])
            assert await asyncio.wait_for(socket.recv(), 10) == "one two three"
            await asyncio.wait_for(await socket.ping(b"py"), 10)
            await socket.close(code=4001, reason="python done")
        print("ok", flush=True)

    try:
        asyncio.run(serve() if sys.argv[1] == "server" else client(sys.argv[2]))
    except Exception as error:
        print(f"error {error!r}", flush=True)
        sys.exit(1)
    """#

    private let process: ChildProcess
    private let lines = EventLog()

    init(mode: String, _ arguments: String...) throws {
        let lines = lines
        process = try ChildProcess(
            "/usr/bin/env",
            ["python3", "-c", Self.script, mode] + arguments,
            standardError: .inherit,
            onLine: { _, line in lines.record(.text(line)) }
        )
    }

    /// Waits for the first output line that satisfies `matching`.
    func line(_ matching: @escaping @Sendable (String) -> Bool) async -> String? {
        await lines.wait { $0.contains { $0.text.map(matching) ?? false } }?.compactMap(\.text).first(where: matching)
    }

    func stop() {
        process.signal(SIGTERM)
    }
}
