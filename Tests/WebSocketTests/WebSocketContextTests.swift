import Foundation
import Glibc
import SystemSupport
import Testing
@testable import WebSocket

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

    @Test("a name that does not resolve fails with hostNotFound, saying which name and getaddrinfo's reason")
    func unresolvableNameFails() async throws {
        // An empty label: getaddrinfo refuses it locally, so no packet leaves the machine.
        let context = try WebSocketContext()
        let url = "ws://no-such-host..invalid:80/"
        let client = try Client(context, url: url)
        let terminal = await client.log.terminal()
        guard case .failed(let error) = terminal, case .hostNotFound(let failedURL, let host, let reason) = error else {
            Issue.record("expected hostNotFound, got \(String(describing: terminal))")
            return
        }
        #expect(failedURL == url && host == "no-such-host..invalid" && !reason.isEmpty)
        #expect("\(error)".contains("cannot resolve no-such-host..invalid"), "\(error)")
        #expect(client.log.events.count == 1, "one terminal event")
        context.shutdown()
    }

    @Test("a name's addresses are tried in order: refused on the first, connected on the second, the name kept in the Host header")
    func nextAddressAfterRefusal() async throws {
        let fixture = try ServerFixture()
        defer { fixture.context.shutdown() }
        let port = fixture.server.port
        let context = try WebSocketContext()
        defer { context.shutdown() }
        // 127.0.0.2 is loopback too, but nothing listens there: refused at once.
        let asked = Locked<[String]>([])
        let log = EventLog()
        _ = try context.connect(url: "ws://chat.example.test:\(port)/path", headers: [], onEvent: { log.record($0) }, resolve: { host, done in
            asked.withLock { $0.append(host) }
            done(.addresses(["127.0.0.2", "127.0.0.1"]))
        })
        #expect(await log.wait(for: 1) { $0 == .open } != nil, "\(log.events)")
        #expect(asked.withLock { $0 } == ["chat.example.test"])
        let accepted = try #require(await fixture.connection())
        let host = accepted.connection.request?.headers.first { $0.name.lowercased() == "host" }?.value
        #expect(host == "chat.example.test:\(port)", "the Host header keeps the name: \(String(describing: host))")
    }

    @Test("every address failing: each tried once, in order, then one failure, the last address's")
    func everyAddressFails() async throws {
        // 127.0.0.2 and 127.0.0.3 accept and hang up at once (no HTTP answer); nothing listens
        // on 127.0.0.1 at that port.
        let accepted = Locked<[String]>([])
        let first = try RawListener(host: "127.0.0.2") { socket in
            accepted.withLock { $0.append("127.0.0.2") }
            close(socket)
        }
        defer { first.stop() }
        let port = first.port
        let second = try RawListener(host: "127.0.0.3", port: port) { socket in
            accepted.withLock { $0.append("127.0.0.3") }
            close(socket)
        }
        defer { second.stop() }
        let context = try WebSocketContext()
        defer { context.shutdown() }
        let log = EventLog()
        _ = try context.connect(url: "ws://chat.example.test:\(port)/", headers: [], onEvent: { log.record($0) }, resolve: { _, done in
            done(.addresses(["127.0.0.2", "127.0.0.3", "127.0.0.1"]))
        })
        let terminal = await log.terminal()
        #expect(accepted.withLock { $0 } == ["127.0.0.2", "127.0.0.3"], "each address tried once, in order")
        guard case .failed(.connectFailed(let url, _, _)) = terminal else {
            Issue.record("expected connectFailed, got \(String(describing: terminal))")
            return
        }
        #expect(url == "ws://chat.example.test:\(port)/")
        #expect(log.events.count == 1, "one terminal event: \(log.events)")
    }

    @Test("a shutdown while a name is being looked up answers the connection with contextShutDown, once; the lookup's late result is dropped")
    func shutdownDuringLookup() async throws {
        let context = try WebSocketContext()
        let release = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let log = EventLog()
        _ = try context.connect(url: "ws://slow.example.test:80/", headers: [], onEvent: { log.record($0) }, resolve: { _, done in
            // A lookup that ends only after the shutdown.
            Thread.detachNewThread {
                release.wait()
                done(.addresses(["127.0.0.1"]))
                finished.signal()
            }
        })
        context.shutdown()
        #expect(await log.terminal() == .failed(.contextShutDown), "answered by the shutdown: \(log.events)")
        release.signal()
        finished.wait()
        try await Task.sleep(for: .milliseconds(100))
        #expect(log.events == [.failed(.contextShutDown)], "nothing after the shutdown: \(log.events)")
        #expect(throws: WebSocketError.contextShutDown) { try context.connect(url: "ws://slow.example.test:80/") }
    }

    @Test("HostResolver: /etc/hosts' localhost resolves to numeric addresses; an empty label fails locally; literals need no lookup")
    func resolverLookups() {
        guard case .addresses(let addresses) = HostResolver.lookup("localhost") else {
            Issue.record("localhost did not resolve")
            return
        }
        #expect(!addresses.isEmpty && addresses.allSatisfy(HostResolver.isLiteral), "\(addresses)")
        guard case .failure(let reason) = HostResolver.lookup("no-such-host..invalid") else {
            Issue.record("an empty label resolved")
            return
        }
        #expect(!reason.isEmpty)
        #expect(HostResolver.isLiteral("127.0.0.1") && HostResolver.isLiteral("::1") && HostResolver.isLiteral("2001:db8::7"))
        #expect(!HostResolver.isLiteral("localhost") && !HostResolver.isLiteral("[::1]"))
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
