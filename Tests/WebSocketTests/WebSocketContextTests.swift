import Foundation
import Glibc
import SystemSupport
import Testing
import WebSocket

@Suite("WebSocketContext: connect failures, listeners and shutdown")
struct WebSocketContextTests {
    @Test("a connect to a closed port is reported as a failed event")
    func closedPortFails() async throws {
        let context = try WebSocketContext()
        let url = "ws://127.0.0.1:\(try closedPort())/"
        let client = try Client(context, url: url)
        let terminal = await client.log.terminal()
        guard case .failed(.connectFailed(let failedURL, let message, _)) = terminal else {
            Issue.record("expected connectFailed, got \(String(describing: terminal))")
            return
        }
        #expect(failedURL == url)
        #expect(!message.isEmpty)
        #expect(client.log.events.count == 1)
        context.shutdown()
    }

    @Test("a name glibc rejects without a DNS query takes lws' NULL-return path, still reported as failed")
    func unresolvableNameFails() async throws {
        // An empty label: getaddrinfo refuses it locally, so no packet leaves the machine.
        // lws_client_connect_via_info then returns NULL and calls no callback.
        let context = try WebSocketContext()
        let url = "ws://no-such-host..invalid:80/"
        let client = try Client(context, url: url)
        let terminal = await client.log.terminal()
        guard case .failed(.connectFailed(let failedURL, let message, _)) = terminal else {
            Issue.record("expected connectFailed, got \(String(describing: terminal))")
            return
        }
        #expect(failedURL == url)
        #expect(message == "lws_client_connect_via_info returned NULL")
        context.shutdown()
    }

    @Test("a server answering the upgrade with 403 is a failed handshake with that status")
    func handshakeRefused() async throws {
        let listener = try RawListener { socket in
            var buffer = [UInt8](repeating: 0, count: 4096)
            _ = recv(socket, &buffer, buffer.count, 0)
            try? RawTCP.send(socket, Array("HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".utf8))
            close(socket)
        }
        defer { listener.stop() }
        let context = try WebSocketContext()
        let client = try Client(context, url: "ws://127.0.0.1:\(listener.port)/app/unknown")
        let terminal = await client.log.terminal()
        guard case .failed(.handshakeFailed(_, let status, _)) = terminal else {
            Issue.record("expected handshakeFailed, got \(String(describing: terminal))")
            return
        }
        #expect(status == 403)
        context.shutdown()
    }

    @Test("close() cancels a connect that hangs in the handshake")
    func cancelHungConnect() async throws {
        let accepted = EventLog()
        let listener = try RawListener { socket in
            // Accepts and reads, never answers: the attempt hangs until lws' timeout.
            accepted.record(.open)
            var buffer = [UInt8](repeating: 0, count: 4096)
            while recv(socket, &buffer, buffer.count, 0) > 0 {}
            close(socket)
        }
        defer { listener.stop() }
        let context = try WebSocketContext()
        let client = try Client(context, url: "ws://127.0.0.1:\(listener.port)/")
        #expect(await accepted.wait(for: 1) { $0 == .open } != nil)
        try client.connection.close()
        let terminal = await client.log.terminal()
        #expect(terminal == .failed(.cancelled), "got \(terminal.map { "\($0)" } ?? "nothing within the event timeout")")
        context.shutdown()
    }

    @Test("an invalid URL is refused before anything starts")
    func invalidURL() throws {
        let context = try WebSocketContext()
        #expect(throws: WebSocketError.self) { try context.connect(url: "http://127.0.0.1/") }
        context.shutdown()
    }

    @Test("listening on a port another context holds fails with EADDRINUSE")
    func portInUse() throws {
        let first = try WebSocketContext()
        let server = try first.listen(onConnection: { _ in })
        let second = try WebSocketContext()
        #expect(throws: WebSocketError.listenFailed(host: "127.0.0.1", port: server.port, errno: EADDRINUSE)) {
            try second.listen(port: server.port, onConnection: { _ in })
        }
        #expect(throws: WebSocketError.listenFailed(host: "127.0.0.1", port: server.port, errno: EADDRINUSE)) {
            try first.listen(port: server.port, onConnection: { _ in })
        }
        second.shutdown()
        first.shutdown()
    }

    @Test("a stopped server drops its open connections with 1006 and closes new ones at once")
    func stopServer() async throws {
        let fixture = try ServerFixture()
        let client = try Client(fixture.context, url: fixture.server.url())
        #expect(await client.log.opened())
        fixture.server.stop()
        #expect(await client.log.terminal() == .closed(code: .abnormalClosure, reason: ""))
        let late = try Client(fixture.context, url: fixture.server.url())
        guard case .failed(.connectFailed) = await late.log.terminal() else {
            Issue.record("a connect after stop() should fail, got \(late.log.events)")
            return
        }
        fixture.context.shutdown()
    }

    @Test("shutdown with open connections ends every one, runs no handler afterwards and frees them")
    func shutdownWithOpenConnections() async throws {
        weak var weakServerSide: WebSocketConnection?
        weak var weakClient: WebSocketConnection?
        weak var weakContext: WebSocketContext?
        let clientLog: EventLog
        let serverLog: EventLog
        let streamEnded = EventLog()
        do {
            let fixture = try ServerFixture()
            let client = try Client(fixture.context, url: fixture.server.url())
            #expect(await client.log.opened())
            let accepted = try #require(await fixture.connection())
            // A stream consumer too: it must finish.
            let stream = accepted.connection.events
            Task {
                for await _ in stream {}
                streamEnded.record(.open)
            }
            // An attempt still connecting when the context goes.
            let hung = try RawListener { socket in
                var buffer = [UInt8](repeating: 0, count: 4096)
                while recv(socket, &buffer, buffer.count, 0) > 0 {}
                close(socket)
            }
            defer { hung.stop() }
            let pending = try Client(fixture.context, url: "ws://127.0.0.1:\(hung.port)/")

            fixture.context.shutdown()

            #expect(client.log.events.last == .closed(code: .abnormalClosure, reason: ""))
            #expect(accepted.log.events.last == .closed(code: .abnormalClosure, reason: ""))
            #expect(pending.log.events == [.failed(.contextShutDown)])
            #expect(throws: WebSocketError.connectionClosed) { try client.connection.send(text: "after") }
            #expect(throws: WebSocketError.contextShutDown) { try fixture.context.connect(url: fixture.server.url()) }
            #expect(throws: WebSocketError.contextShutDown) { try fixture.context.listen(onConnection: { _ in }) }
            client.connection.abort()
            try client.connection.close()
            fixture.server.stop()
            clientLog = client.log
            serverLog = accepted.log
            weakServerSide = accepted.connection
            weakClient = client.connection
            weakContext = fixture.context
        }
        #expect(await streamEnded.wait(for: 1) { $0 == .open } != nil)
        // Handlers were released with the last event: nothing can call them any more, and
        // nothing keeps the connections or the context alive.
        #expect(weakServerSide == nil)
        #expect(weakClient == nil)
        #expect(weakContext == nil)
        #expect(clientLog.events.filter(\.isTerminal).count == 1)
        #expect(serverLog.events.filter(\.isTerminal).count == 1)
    }

    @Test("a context released without shutdown() shuts down on its own")
    func releaseShutsDown() async throws {
        let log: EventLog
        do {
            let fixture = try ServerFixture()
            let client = try Client(fixture.context, url: fixture.server.url())
            #expect(await client.log.opened())
            log = client.log
        }
        #expect(log.events.last == .closed(code: .abnormalClosure, reason: ""))
    }

    @Test("an unreadable CA file is refused with its errno")
    func unreadableCAFile() {
        #expect(throws: WebSocketError.fileUnreadable(path: "/nonexistent/ca.pem", errno: ENOENT)) {
            try WebSocketContext(options: .init(certificateAuthorityFile: "/nonexistent/ca.pem"))
        }
    }
}
