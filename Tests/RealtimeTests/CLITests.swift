import Foundation
import RealtimeProtocol
import RealtimeServer
import ReconnectTesting
import TestSupport
import Testing
import Spawn

/// The `realtime` CLI (Samples/realtime), run as a child process against an in-process server.
@Suite struct CLITests {
    static let app = RealtimeApp(id: "cli", key: "cli-key", secret: "cli-secret")

    /// Where `swift test` put the test bundle, and so the executables.
    static var executable: String {
        BuiltProduct.path("realtime")
    }

    /// The JSON lines printed so far, parsed.
    static func records(_ process: ChildProcess) -> [[String: JSONValue]] {
        process.outputLines.compactMap { try? JSONDecoder().decode([String: JSONValue].self, from: Data($0.utf8)) }
    }

    func publish(port: Int, secret: String = CLITests.app.secret, data: String) async throws -> ChildProcess.Result {
        try await ChildProcess.runDetached(Self.executable, [
            "publish", "--api", "http://127.0.0.1:\(port)", "--app-id", Self.app.id, "--key", Self.app.key,
            "--secret", secret, "--channel", "news", "--event", "update", "--data", data,
        ], timeout: .seconds(30))
    }

    @Test("connect --json prints states and events as JSON lines; publish posts through the HTTP API; SIGINT disconnects and exits 0")
    func connectAndPublish() async throws {
        let server = try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: [Self.app]))
        defer { server.shutdown(grace: .zero) }
        let client = try ChildProcess(Self.executable, ["connect", server.url(appKey: Self.app.key), "--subscribe", "news", "--json"])
        let subscribed = await eventually("the subscription", timeout: .seconds(30), context: { "\(client.outputLines)" }) {
            Self.records(client).contains { $0["event"]?.string == "bird:subscription_succeeded" && $0["channel"]?.string == "news" }
        }
        try #require(subscribed)
        let connected = try #require(Self.records(client).first { $0["current"]?.string == "connected" })
        #expect(connected["kind"]?.string == "state")
        #expect(connected["previous"]?.string == "connecting")
        #expect(connected["time"]?.string?.hasSuffix("Z") == true)

        let published = try await publish(port: server.port, data: #"{"n":1}"#)
        #expect(published.termination == .exited(0), "\(published.standardError)")
        await eventually("the event", timeout: .seconds(30), context: { "\(client.outputLines)" }) {
            Self.records(client).contains { $0["kind"]?.string == "event" && $0["event"]?.string == "update" && $0["data"]?.string == #"{"n":1}"# }
        }

        let refused = try await publish(port: server.port, secret: "wrong", data: "{}")
        #expect(refused.termination == .exited(1))
        #expect(refused.standardError.contains("401"))

        // The server closes with 4201: the CLI shows the error and the reconnect (on the backoff:
        // the connection was up for less than stableConnectionDuration).
        let socketID = try #require(connected["socket"]?.string)
        #expect(server.hub.close(appID: Self.app.id, socketID: socketID, code: 4201, reason: "test"))
        await eventually("the reconnect", timeout: .seconds(30), context: { "\(client.outputLines)" }) {
            Self.records(client).filter { $0["current"]?.string == "connected" }.count == 2
        }
        #expect(Self.records(client).contains { $0["kind"]?.string == "error" && $0["code"]?.number == 4201 })

        #expect(client.signal(SIGINT))
        let end = try client.waitUntilExit(timeout: .seconds(30))
        #expect(end == .exited(0))
        #expect(Self.records(client).last { $0["kind"]?.string == "state" }?["current"]?.string == "disconnected")
    }

    @Test("a proxy answering the handshake 502: the CLI reports each attempt as its own error line with the status, and libwebsockets' own log lines never reach its output", .timeLimit(.minutes(1)))
    func badGatewayQuiet() async throws {
        // A loopback HTTP server that answers every request 502 (nginx with no node behind it).
        let gateway = try ChildProcess("/usr/bin/env", ["python3", "-c", """
            import socket, sys, threading
            listener = socket.socket(); listener.bind(("127.0.0.1", 0)); listener.listen(16)
            print(listener.getsockname()[1], flush=True)
            def answer(peer):
                try:
                    peer.recv(65536)
                    peer.sendall(b"HTTP/1.1 502 Bad Gateway\\r\\nContent-Type: text/html\\r\\nContent-Length: 11\\r\\nConnection: close\\r\\n\\r\\nbad gateway")
                finally:
                    peer.close()
            while True:
                peer, _ = listener.accept()
                threading.Thread(target=answer, args=(peer,), daemon=True).start()
            """])
        defer { _ = gateway.signal(SIGKILL) }
        let port = try #require(try gateway.waitForLines(count: 1, timeout: .seconds(10)).first.flatMap { Int($0) })
        let client = try ChildProcess(Self.executable, ["connect", "ws://127.0.0.1:\(port)/app/\(Self.app.key)", "--json"])
        let refused = await eventually("two refused attempts", timeout: .seconds(20), context: { "\(client.outputLines)" }) {
            Self.records(client).filter { $0["kind"]?.string == "error" && ($0["message"]?.string ?? "").contains("502") }.count >= 2
        }
        #expect(refused)
        #expect(client.signal(SIGTERM))
        let end = try client.waitUntilExit(timeout: .seconds(30))
        #expect(end == .exited(0))
        let errors = client.errorLines.joined(separator: "\n")
        #expect(!errors.contains("lws") && !errors.contains("libwebsockets"), "\(errors)")
        #expect(!client.outputLines.contains { $0.contains("lws_") }, "\(client.outputLines)")
    }

    @Test("bad arguments: exit 1 with one line on stderr")
    func badArguments() throws {
        let both = ["publish", "--api", "http://127.0.0.1:1", "--app-id", "1", "--key", "k", "--secret", "s", "--channel", "c", "--room", "r", "--event", "e", "--data", "{}"]
        for arguments in [["connect", "http://x/app/k"], ["connect"], ["publish", "--api", "http://127.0.0.1:1"], ["bogus"], both] {
            let result = try ChildProcess.run(Self.executable, arguments, timeout: .seconds(30))
            #expect(result.termination == .exited(1), "\(arguments)")
            #expect(result.standardError.hasPrefix("realtime: "), "\(arguments): \(result.standardError)")
        }
    }

    @Test("publish --room keeps an event in each room through the HTTP API's room_events")
    func publishToRooms() throws {
        let server = try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: [Self.app]))
        defer { server.shutdown(grace: .zero) }
        let result = try ChildProcess.run(Self.executable, [
            "publish", "--api", "http://127.0.0.1:\(server.port)", "--app-id", Self.app.id, "--key", Self.app.key,
            "--secret", Self.app.secret, "--room", "order:1", "--room", "order:2", "--event", "updated", "--data", #"{"status":"paid"}"#,
        ], timeout: .seconds(30))
        #expect(result.termination == .exited(0), "\(result.standardError)")
        #expect(result.standardOutput.contains(#""room":"order:2""#))
        for room in ["order:1", "order:2"] {
            #expect(try server.hub.roomHistory(appID: Self.app.id, room: room).events.map(\.data) == [#"{"status":"paid"}"#])
        }
    }

    /// A Python websockets server flooding `tick` events on the first channel subscribed
    /// (Tests/peers/ws_scripted_server.py `flood`), and its URL.
    static func floodServer() throws -> (ChildProcess, String) {
        let script = PythonPeer.directory.appendingPathComponent("ws_scripted_server.py").path
        let peer = try ChildProcess("/usr/bin/env", ["python3", script, "flood"], standardError: .inherit)
        let line = try peer.waitForLine(timeout: .seconds(60)) { $0.hasPrefix("port ") }
        return (peer, "ws://127.0.0.1:\(line.dropFirst(5))/app/key")
    }

    @Test("during a flood with a standard output nobody reads, SIGTERM still ends the CLI at once", .enabled(if: PythonPeer.isAvailable))
    func signalWithBlockedOutput() async throws {
        let (peer, url) = try Self.floodServer()
        defer { peer.signal(SIGKILL) }
        // `sleep` never reads the pipe: the CLI's main queue blocks writing to it.
        let shell = try ChildProcess("/bin/sh", ["-c", "exec \"$0\" connect \"$1\" --subscribe flood | sleep 60", Self.executable, url])
        defer { shell.signal(SIGKILL) }
        let pid = try #require(await Self.childPID(of: shell, matching: url))
        try await Task.sleep(for: .seconds(2))
        #expect(kill(pid, 0) == 0, "still running, its output blocked")
        let signalled = ContinuousClock.now
        kill(pid, SIGTERM)
        while kill(pid, 0) == 0, ContinuousClock.now - signalled < .seconds(10) { try await Task.sleep(for: .milliseconds(10)) }
        let took = ContinuousClock.now - signalled
        // 200 ms of close grace and at most 500 ms of flushing; before, it never exited.
        #expect(took < .seconds(2), "exited \(took) after SIGTERM")
    }

    /// The resident set of a process, in KiB (`VmRSS` in /proc/PID/status, proc(5)), or nil.
    static func residentKiB(_ pid: Int32) -> Int? {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return nil }
        return Int(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "")
    }

    @Test("a 20 s flood, output read at full speed and output never read: RSS stays bounded (it grew 35 MB/s once), SIGTERM ends each CLI within 1 s",
          .enabled(if: PythonPeer.isAvailable))
    func floodMemoryBounded() async throws {
        let (fastPeer, fastURL) = try Self.floodServer()
        defer { fastPeer.signal(SIGKILL) }
        let (blockedPeer, blockedURL) = try Self.floodServer()
        defer { blockedPeer.signal(SIGKILL) }
        // To /dev/null: the CLI is the bottleneck. Into `sleep`: its printer blocks at once.
        let fast = try ChildProcess("/bin/sh", ["-c", "exec \"$0\" connect \"$1\" --subscribe flood > /dev/null", Self.executable, fastURL])
        defer { fast.signal(SIGKILL) }
        let blockedShell = try ChildProcess("/bin/sh", ["-c", "exec \"$0\" connect \"$1\" --subscribe flood | sleep 60", Self.executable, blockedURL])
        defer { blockedShell.signal(SIGKILL) }
        let blocked = try #require(await Self.childPID(of: blockedShell, matching: blockedURL))
        let pids = [("read at full speed", fast.processIdentifier), ("never read", blocked)]
        var samples: [[Int]] = [[], []]
        let started = ContinuousClock.now
        while ContinuousClock.now - started < .seconds(20) {
            for (index, (_, pid)) in pids.enumerated() { samples[index].append(Self.residentKiB(pid) ?? 0) }
            try await Task.sleep(for: .milliseconds(500))
        }
        for (index, (name, pid)) in pids.enumerated() {
            let series = samples[index]
            #expect(kill(pid, 0) == 0, "\(name): still running after 20 s")
            let peak = series.max() ?? 0
            let sanitized = ProcessInfo.processInfo.environment["ASAN_OPTIONS"] != nil || ProcessInfo.processInfo.environment["TSAN_OPTIONS"] != nil
            // The client stops reading past its delivery backlog's high watermark (10,000 events
            // or 16 MiB): from 10 s on the resident set no longer grows with the flood.
            let grewLastHalf = (series.suffix(series.count / 2).max() ?? 0) - (series.dropLast(series.count / 2).max() ?? 0)
            #expect(peak > 0, "\(name): RSS read")
            // Under AddressSanitizer (scripts/sanitize address) freed memory waits in its
            // quarantine (256 MiB) and the resident set measures that, not the client.
            if ProcessInfo.processInfo.environment["ASAN_OPTIONS"] == nil {
                #expect(peak < 150 * 1024, "\(name): peak RSS \(peak / 1024) MiB; samples \(series.map { $0 / 1024 })")
                #expect(grewLastHalf < 16 * 1024, "\(name): grew \(grewLastHalf / 1024) MiB in the last 10 s; samples \(series.map { $0 / 1024 })")
            }
            let signalled = ContinuousClock.now
            kill(pid, SIGTERM)
            while kill(pid, 0) == 0, ContinuousClock.now - signalled < .seconds(10) { try await Task.sleep(for: .milliseconds(10)) }
            let took = ContinuousClock.now - signalled
            // 1 s for the build users run; a sanitizer's slower code gets 3 s.
            #expect(took < .seconds(sanitized ? 3 : 1), "\(name): exited \(took) after SIGTERM")
        }
    }

    @Test("standard output closed by its reader (| head -1) during a flood: the CLI exits instead of reading on", .enabled(if: PythonPeer.isAvailable))
    func closedOutput() throws {
        let (peer, url) = try Self.floodServer()
        defer { peer.signal(SIGKILL) }
        // sh waits for every command of the pipeline: it ends only once the CLI has.
        let shell = try ChildProcess("/bin/sh", ["-c", "\"$0\" connect \"$1\" --subscribe flood | head -1", Self.executable, url])
        let termination = try shell.waitUntilExit(timeout: .seconds(30))
        #expect(termination == .exited(0))
        #expect(shell.errorLines.contains("realtime: standard output is closed"), "\(shell.errorLines)")
    }

    /// The pid of the process `shell` started whose command line holds `text` (waits 10 s).
    static func childPID(of shell: ChildProcess, matching text: String) async -> Int32? {
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            for entry in entries {
                guard let pid = Int32(entry), pid != shell.processIdentifier,
                      let status = try? String(contentsOfFile: "/proc/\(entry)/status", encoding: .utf8),
                      status.contains("PPid:\t\(shell.processIdentifier)\n"),
                      let command = try? String(contentsOfFile: "/proc/\(entry)/cmdline", encoding: .utf8),
                      command.contains(text), command.contains("connect") else { continue }
                return pid
            }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return nil
    }
}
