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
        let server = try ChildProcess("/usr/bin/prlimit", ["--nofile=400:400", Self.serverPath, "--port", "0", "--app-id", "1", "--app-key", "k", "--app-secret", "s", "--memory", "--quiet"])
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

    /// utime + stime of `pid`, in clock ticks (proc(5)).
    static func cpuTicks(_ pid: Int32) -> Int {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
              let close = stat.lastIndex(of: ")") else { return 0 }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        // After the command: state is field 3, utime 14 and stime 15.
        return (Int(fields[11]) ?? 0) + (Int(fields[12]) ?? 0)
    }

    @Test("600 idle TCP connections at 300 descriptors: those past the reserve are closed at accept, the server neither spins on EMFILE nor floods its log, and serves again once they go")
    func acceptAtTheLimit() throws {
        let server = try ChildProcess("/usr/bin/prlimit", ["--nofile=300:300", Self.serverPath, "--port", "0", "--app-id", "1", "--app-key", "k", "--app-secret", "s", "--memory", "--quiet"],
                                      standardError: .pipe)
        defer { _ = server.signal(SIGKILL) }
        let line = try server.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("port ") }
        let port = try #require(line.split(separator: " ").last.flatMap { UInt16($0) })
        var sockets: [Int32] = []
        defer { sockets.forEach { close($0) } }
        for _ in 0..<600 {
            guard let fd = try? TestSockets.connectedSocket(port: port) else { break }
            sockets.append(fd)
        }
        #expect(sockets.count > 300, "more connections than descriptors")
        let before = Self.cpuTicks(server.processIdentifier)
        Thread.sleep(forTimeInterval: 2)
        let spent = Self.cpuTicks(server.processIdentifier) - before
        // A spin on a failing accept is 100 % of a core: about 200 ticks in these 2 s.
        #expect(spent < 40, "\(spent) ticks of CPU in 2 s")
        #expect(server.errorLines.count < 40, "\(server.errorLines.prefix(5))")
        // The reserve is kept: no connection holds a descriptor at or past the ceiling (one may
        // be there for the instant between accept and its close). Sockets only: a sanitizer's
        // runtime holds descriptors of its own (AddressSanitizer: 2).
        let directory = "/proc/\(server.processIdentifier)/fd"
        let numbers = ((try? FileManager.default.contentsOfDirectory(atPath: directory)) ?? []).compactMap { Int($0) }
        let pastCeiling = numbers.filter { number in
            number >= 300 - 64 && ((try? FileManager.default.destinationOfSymbolicLink(atPath: "\(directory)/\(number)"))?.hasPrefix("socket:") ?? false)
        }
        #expect(!numbers.isEmpty && pastCeiling.count <= 1, "sockets at descriptors \(pastCeiling.sorted()) past the ceiling \(300 - 64)")

        sockets.forEach { close($0) }
        sockets.removeAll()
        let context = try WebSocketContext()
        defer { context.shutdown() }
        let handshake = Locked(false)
        let deadline = ContinuousClock.now + .seconds(20)
        var probe: WebSocketConnection?
        while !handshake.withLock({ $0 }), ContinuousClock.now < deadline {
            probe = try context.connect(url: "ws://127.0.0.1:\(port)/app/k") { event in
                if case .text(let text) = event, text.contains("connection_established") { handshake.withLock { $0 = true } }
            }
            Thread.sleep(forTimeInterval: 0.5)
        }
        #expect(handshake.withLock { $0 }, "served again once the idle connections went")
        _ = probe
    }

    @Test("--log-format json writes each log line as one JSON object with message, node and an ISO 8601 time, libwebsockets' own lines included")
    func jsonLog() throws {
        let server = try ChildProcess(Self.serverPath, ["--port", "0", "--app-id", "1", "--app-key", "k", "--app-secret", "s", "--memory", "--node", "n1", "--log-format", "json"],
                                      standardError: .pipe)
        defer { _ = server.signal(SIGKILL) }
        let portLine = try server.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("port ") }
        let port = try #require(portLine.split(separator: " ").last.flatMap { UInt16($0) })
        let line = try server.waitForLine(in: .standardError, timeout: .seconds(10)) { $0.contains("listening on") }
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object["node"] == "n1")
        #expect(object["message"]?.hasPrefix("listening on 127.0.0.1:") == true)
        let time = try #require(object["time"])
        #expect(try Date(time, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)).timeIntervalSinceNow > -60)
        // libwebsockets' own lines too: headers past its 8 KB make it log an error.
        let fd = try TestSockets.connectedSocket(port: port)
        defer { close(fd) }
        let request = Array("GET /app/k HTTP/1.1\r\nHost: x\r\nX-Big: \(String(repeating: "a", count: 12_000))\r\n\r\n".utf8)
        #expect(request.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == request.count)
        let lws = try server.waitForLine(in: .standardError, timeout: .seconds(10)) { $0.contains("header data space") }
        let lwsObject = try #require(try JSONSerialization.jsonObject(with: Data(lws.utf8)) as? [String: String], "\(lws)")
        #expect(lwsObject["message"]?.hasPrefix("libwebsockets: ") == true && lwsObject["node"] == "n1")
        for line in server.errorLines {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) is [String: String], "not a JSON object: \(line)")
        }
    }
}
