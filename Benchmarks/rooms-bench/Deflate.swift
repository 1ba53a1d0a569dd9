import Foundation
import NetworkLab
import RealtimeProtocol
import class Spawn.ChildProcess
import Glibc

/// (7) A replay of 1,000 room events over a 1 Mbit/s link, compressed (`permessage-deflate`
/// with the server's settings: level 1, context kept, memLevel 1) and not: the bytes the
/// server sent through the link, and the time from the join to the last replayed event. The
/// link is a `ShapingProxy` (125,000 bytes a second each way) in front of the embedded
/// server; the client is Python's `websockets` (Tests/peers/ws_replay_timer.py), offering the
/// extension as browsers do, or not: this package's own clients never offer it.
func deflateOverSlowLink(rounds: Int = 3) {
    do {
        progress("a replay of 1,000 events over 1 Mbit/s, with and without permessage-deflate")
        let room = "slow:1"
        let first = try hub.publishRoom(appID: app.id, room: room, event: "x", data: "{}", rule: RoomRule(history: 1000))
        for index in 1...1000 {
            let data = #"{"player":"user-\#(index % 7)","x":\#(index * 3 % 640),"y":\#(index * 7 % 480),"note":"a short chat line number \#(index)"}"#
            try hub.publishRoom(appID: app.id, room: room, event: "move", data: data)
        }
        let proxy = try ShapingProxy(targetPort: server.port, bytesPerSecond: 125_000)
        defer { proxy.stop() }
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Tests/peers/ws_replay_timer.py").path
        let since = String(decoding: try JSONEncoder().encode(RoomPosition(epoch: first.epoch, id: first.record.id)), as: UTF8.self)
        for compression in ["none", "deflate"] {
            var bytes: [Int] = []
            var seconds: [String] = []
            for round in 0..<rounds {
                let before = proxy.bytesDown
                let result = try ChildProcess.run("/usr/bin/env", [
                    "python3", script, "ws://127.0.0.1:\(proxy.port)/app/\(app.key)", room,
                    token(room, user: "slow-\(compression)-\(round)"), since, "1000", compression,
                ])
                let line = result.standardOutput.trimmingCharacters(in: .whitespacesAndNewlines)
                guard result.termination == .exited(0), line.hasPrefix("replayed 1000 last_after ") else {
                    fail("slow link, \(compression), round \(round): \(line) \(result.standardError)")
                }
                bytes.append(proxy.bytesDown - before)
                seconds.append(String(line.dropFirst("replayed 1000 last_after ".count)) + " s")
            }
            let name = compression == "deflate" ? "permessage-deflate" : "uncompressed"
            record("replay of 1,000 room events, \(name): bytes the server sent through the link, handshake included (each round)",
                   bytes.map { String($0) }.joined(separator: " / "), "—")
            record("the same over 1 Mbit/s: join sent → last replayed event (each round)", seconds.joined(separator: " / "), "—")
        }
    } catch {
        fail("slow link: \(error)")
    }
}

/// (8) What a compressing connection costs the server: `realtime-server` in its own process
/// (so its RSS is its own), 1,000 connections of one Python process subscribed to a channel,
/// one event published to them (Pusher's Python library, through the signed HTTP API) so each
/// compressing connection has made its deflate state; RSS delta over the connections, with
/// the offer and without. The server's settings: context kept, memLevel 1 (129 KiB of deflate
/// state by zlib's figures), and the peer's 32 KiB inflate window.
func deflateMemory(connections: Int = 1000) {
    let serverPath = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("realtime-server").path
    guard FileManager.default.isExecutableFile(atPath: serverPath) else { fail("build realtime-server too (swift build -c release)") }
    let peers = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("Tests/peers")
    for compression in ["none", "deflate"] {
        do {
            let child = try ChildProcess(serverPath, ["--host", "127.0.0.1", "--port", "0", "--app-id", app.id, "--app-key", app.key,
                                                      "--app-secret", app.secret, "--memory", "--quiet"] + (compression == "deflate" ? ["--compression"] : []),
                                        standardError: .inherit)
            defer { _ = child.signal(SIGTERM) }
            let line = try child.waitForLine(timeout: .seconds(30)) { $0.hasPrefix("port ") }
            guard let port = line.split(separator: " ").last.flatMap({ Int($0) }) else { fail("no port from realtime-server") }
            let baseline = processRSS(child.processIdentifier)
            let peer = try ChildProcess("/usr/bin/env", ["python3", peers.appendingPathComponent("ws_many_subscribers.py").path,
                                                         "ws://127.0.0.1:\(port)/app/\(app.key)", String(connections), "memory", compression],
                                        standardInput: .pipe, standardError: .inherit)
            defer { peer.closeStandardInput() }
            _ = try peer.waitForLine(timeout: .seconds(120)) { $0 == "subscribed" || $0.hasPrefix("error") }
            let published = try ChildProcess.run("/usr/bin/env", ["python3", peers.appendingPathComponent("pusher_publish.py").path,
                                                                  String(port), app.id, app.key, app.secret, "memory", "tick", #"{"n":1}"#])
            guard published.termination == .exited(0) else { fail("publish: \(published.standardError)") }
            let received = try peer.waitForLine(timeout: .seconds(120)) { $0 == "received" || $0.hasPrefix("error") }
            guard received == "received" else { fail("memory, \(compression): \(received)") }
            Thread.sleep(forTimeInterval: 1)
            let perConnection = Double(processRSS(child.processIdentifier) - baseline) / Double(connections) / 1024
            let name = compression == "deflate" ? "permessage-deflate" : "uncompressed"
            record("server memory per connection, \(name), after one event to each of \(connections) (RSS delta / connections)",
                   String(format: "%.1f KiB", perConnection), "—")
        } catch {
            fail("memory, \(compression): \(error)")
        }
    }
}

/// A process's resident set, in bytes (`/proc/PID/status` VmRSS).
func processRSS(_ pid: pid_t) -> Int {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
          let kilobytes = line.split(separator: " ").dropFirst().first.flatMap({ Int($0) }) else { return 0 }
    return kilobytes * 1024
}
