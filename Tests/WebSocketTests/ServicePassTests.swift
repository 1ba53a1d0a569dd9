import Foundation
import Glibc
import class Spawn.ChildProcess
import SystemSupport
import Testing
import WebSocket

/// `WebSocketContext.afterServicePass`: work queued from a handler runs on the service thread
/// once every frame of the current read was delivered.
@Suite("WebSocketContext: work after the service pass")
struct ServicePassTests {
    @Test("off the service thread nothing is queued")
    func refusedOffThread() throws {
        let context = try WebSocketContext()
        let ran = Locked(false)
        #expect(!context.afterServicePass { ran.withLock { $0 = true } })
        context.shutdown()
        #expect(!ran.withLock { $0 })
    }

    @Test("50 frames read at once: the work queued at the first runs once, after the 50th, on the service thread")
    func runsAfterTheRead() async throws {
        // A raw server (Python's standard library only): the upgrade answer, a pause, then 50
        // text frames in one write, so they reach the client in one read.
        let lines = EventLog()
        let server = try ChildProcess("/usr/bin/env", ["python3", "-c", Self.burstServer], standardError: .inherit,
                                      onLine: { _, line in lines.record(.text(line)) })
        defer { server.signal(SIGTERM) }
        let portLine = try #require(await lines.wait { !$0.isEmpty }?.first?.text)
        let port = try #require(Int(portLine.dropFirst("port ".count)))
        let context = try WebSocketContext()
        let log = Locked<[String]>([])
        let queued = Locked(false)
        let nested = Locked<Bool?>(nil)
        let done = EventLog()
        let connection = try context.connect(url: "ws://127.0.0.1:\(port)/") { event in
            guard case .text(let text) = event else { return }
            log.withLock { $0.append(text) }
            guard !queued.withLock({ $0 }) else { return }
            queued.withLock { $0 = true }
            let accepted = context.afterServicePass {
                log.withLock { $0.append("end") }
                // Still the service thread: queuing from the work itself is accepted.
                nested.withLock { $0 = context.afterServicePass {} }
                queued.withLock { $0 = false }
                done.record(.open)
            }
            #expect(accepted)
        }
        #expect(await done.wait(for: 1) { $0 == .open } != nil)
        let expected = (0..<50).map { "m\($0)" } + ["end"]
        #expect(log.withLock { $0 } == expected)
        #expect(nested.withLock { $0 } == true)
        try? connection.close()
        context.shutdown()
    }

    private static let burstServer = #"""
    import base64, hashlib, socket, time
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    print(f"port {listener.getsockname()[1]}", flush=True)
    peer, _ = listener.accept()
    request = b""
    while b"\r\n\r\n" not in request:
        chunk = peer.recv(4096)
        if not chunk: raise SystemExit(1)
        request += chunk
    key = [line.split(b":", 1)[1].strip() for line in request.split(b"\r\n") if line.lower().startswith(b"sec-websocket-key:")][0]
    accept = base64.b64encode(hashlib.sha1(key + b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest())
    peer.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " + accept + b"\r\n\r\n")
    time.sleep(0.3)
    frames = b"".join(bytes([0x81, len(text)]) + text for text in (f"m{i}".encode() for i in range(50)))
    peer.sendall(frames)
    peer.settimeout(30)
    try:
        while peer.recv(4096): pass
    except OSError:
        pass
    """#
}
