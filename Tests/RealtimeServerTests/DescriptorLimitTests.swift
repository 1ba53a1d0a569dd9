import Foundation
import RealtimeProtocol
import class Spawn.ChildProcess
import SystemSupport
import TestSupport
import Testing
import WebSocket

/// `realtime-server` under a low descriptor limit (`prlimit --nofile=400`): connections past
/// the limit less its reserve are refused with 4100, and the server keeps serving.
@Suite("Descriptor limit")
struct DescriptorLimitTests {
    static var serverPath: String {
        BuiltProduct.path("realtime-server")
    }

    @Test("at 400 descriptors the server admits 144 connections, refuses the rest with 4100, and still answers")
    func lowLimit() throws {
        let server = try ChildProcess("/usr/bin/prlimit", ["--nofile=400:400", Self.serverPath, "--port", "0", "--app-id", "1", "--app-key", "k", "--app-secret", "s", "--quiet"])
        defer { _ = server.signal(SIGKILL) }
        let line = try server.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("port ") }
        let port = try #require(line.split(separator: " ").last.flatMap { Int($0) })
        let context = try WebSocketContext()
        defer { context.shutdown() }
        let outcomes = Locked((handshakes: 0, refused: 0, other: 0))
        var connections: [WebSocketConnection] = []
        for _ in 0..<180 {
            connections.append(try context.connect(url: "ws://127.0.0.1:\(port)/app/k") { event in
                outcomes.withLock { outcomes in
                    switch event {
                    case .text(let text) where text.contains("connection_established"): outcomes.handshakes += 1
                    case .closed(let code, _) where code.rawValue == RealtimeCloseCode.overCapacity.rawValue: outcomes.refused += 1
                    case .closed, .failed: outcomes.other += 1
                    default: break
                    }
                }
            })
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while outcomes.withLock({ $0.handshakes + $0.refused + $0.other }) < 180, ContinuousClock.now < deadline { usleep(20_000) }
        let seen = outcomes.withLock { $0 }
        #expect(seen.handshakes == 144, "\(seen)")
        #expect(seen.refused == 36, "\(seen)")
        // Still serving: a new client past the limit is refused at once, not left hanging.
        let late = Locked<UInt16?>(nil)
        let probe = try context.connect(url: "ws://127.0.0.1:\(port)/app/k") { event in
            if case .closed(let code, _) = event { late.withLock { $0 = code.rawValue } }
        }
        let probeDeadline = ContinuousClock.now + .seconds(10)
        while late.withLock({ $0 }) == nil, ContinuousClock.now < probeDeadline { usleep(20_000) }
        #expect(late.withLock { $0 } == RealtimeCloseCode.overCapacity.rawValue)
        _ = probe
        connections.removeAll()
    }
}
