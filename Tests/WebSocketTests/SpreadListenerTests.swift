import Foundation
import Glibc
import SystemSupport
import Testing
import WebSocket

/// A listener spreading its connections over other contexts' service threads
/// (`WebSocketContext.listen(…, spreadingTo:)`, issue 31: every core used).
@Suite("A listener spreading connections over several service threads")
struct SpreadListenerTests {
    @Test("8 WebSocket clients and 4 HTTP requests to one port are served by three service threads in turn; every one echoes or answers; stopping the listener stops all three", .timeLimit(.minutes(1)))
    func spreadsInTurn() async throws {
        let contexts = try (0..<3).map { _ in try WebSocketContext() }
        defer { contexts.forEach { $0.shutdown() } }
        let threads = Locked<[pthread_t]>([])
        let server = try contexts[0].listen(spreadingTo: Array(contexts.dropFirst()), onConnection: { connection in
            threads.withLock { $0.append(pthread_self()) }
            connection.setEventHandler { event in
                if case .text(let text) = event { try? connection.send(text: text) }
            }
        }, onRequest: { request in
            HTTPServerResponse(status: 200, text: "served \(request.path)\n")
        })
        let clientContext = try WebSocketContext()
        defer { clientContext.shutdown() }
        var clients: [Client] = []
        for index in 0..<8 {
            let client = try Client(clientContext, url: server.url(path: "/\(index)"))
            #expect(await client.log.opened())
            try client.connection.send(text: "hello \(index)")
            clients.append(client)
        }
        for (index, client) in clients.enumerated() {
            #expect(await client.log.wait { $0.contains(.text("hello \(index)")) } != nil)
        }
        let seen = threads.withLock { $0 }
        #expect(seen.count == 8)
        #expect(Set(seen.map { UInt($0) }).count == 3, "connections served by \(Set(seen.map { UInt($0) }).count) threads")
        for index in 0..<4 {
            let (status, _, body) = try await offPool { () throws -> (Int, [String: String], [UInt8]) in
                let socket = try RawTCP.connect(port: server.port)
                defer { close(socket) }
                return try RawTCP.exchange(socket, "GET /plain\(index) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            }
            #expect(status == 200 && String(decoding: body, as: UTF8.self) == "served /plain\(index)\n")
        }
        server.stop()
        for client in clients { #expect(await client.log.wait { $0.contains(where: \.isTerminal) } != nil) }
    }
}
