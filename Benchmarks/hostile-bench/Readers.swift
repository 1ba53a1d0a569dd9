import Dispatch
import Foundation
import SystemSupport
import RealtimeProtocol
import WebSocket

/// Issue 47, item 4: 10 anonymous members rejoin a public room of 20,000 kept events from its
/// start again and again (a leave and a join as soon as each replay ends) for 15 s, reading as
/// fast as they can; a member of another room sends an event every 150 ms (under the 10 a
/// second a connection may send) and times its echo.
/// Run with the node's replay rate and with it out of the way (each connection paced alone).
func replayReaders() {
    for (label, arguments) in [("the node's replay rate (32 MiB/s)", []), ("each connection paced alone (--replay-rate 65536)", ["--replay-rate", "65536"])] {
        progress("readers: 10 members rejoining a 20,000-event room from its start, \(label)")
        let (server, port) = startServer(arguments)
        let rule = RoomRule(history: 20_000, isPublic: true)
        let epoch = publishBacklog(port: port, room: "big:1", rule: rule, events: 20_000)
        let expires = Int(Date().timeIntervalSince1970) + 3600
        let grant = (try? JSONWebToken.sign(RoomClaims(subject: nil, room: "big:{id}", expiresAt: expires, rule: rule), secret: appSecret)) ?? ""
        let join = (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomJoin),
                                         payload: RoomJoinRequest(room: "big:1", token: grant, since: RoomPosition(epoch: epoch, id: 0))).text) ?? ""
        let leave = (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomLeave), payload: RoomLeaveRequest(room: "big:1")).text) ?? ""
        let pulled = Locked(0)
        let replays = Locked(0)
        let reading = Locked(true)
        var readers: [WebSocketConnection] = []
        for _ in 0..<10 {
            let box = Locked<WebSocketConnection?>(nil)
            guard let connection = try? context.connect(url: "ws://127.0.0.1:\(port)/app/\(appKey)", onEvent: { event in
                guard case .text(let text) = event else { return }
                pulled.withLock { $0 += text.utf8.count }
                // The replay ended: leave and rejoin from the start.
                if text.contains(#"\"event\":\"joined\""#), reading.withLock({ $0 }), let connection = box.withLock({ $0 }) {
                    replays.withLock { $0 += 1 }
                    try? connection.send(text: leave)
                    try? connection.send(text: join)
                }
            }) else { fail("reader: no connection") }
            box.withLock { $0 = connection }
            readers.append(connection)
        }
        // The good member: its own room, an event every 150 ms, each timed to its echo.
        let memberRule = RoomRule(history: 10, membersSend: true)
        let token = (try? JSONWebToken.sign(RoomClaims(subject: "good", room: "chat:1", expiresAt: expires, rule: memberRule), secret: appSecret)) ?? ""
        let echoes = DispatchSemaphore(value: 0)
        guard let member = try? context.connect(url: "ws://127.0.0.1:\(port)/app/\(appKey)", onEvent: { event in
            if case .text(let text) = event, text.contains(#"\"event\":\"say\""#) { echoes.signal() }
        }) else { fail("member: no connection") }
        Thread.sleep(forTimeInterval: 0.5)
        try? member.send(text: (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomJoin), payload: RoomJoinRequest(room: "chat:1", token: token)).text) ?? "")
        Thread.sleep(forTimeInterval: 0.5)
        let say = (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomSend), payload: RoomSendRequest(room: "chat:1", event: "say", data: #"{"t":1}"#)).text) ?? ""
        for reader in readers { try? reader.send(text: join) }
        let start = ContinuousClock.now
        var times: [Duration] = []
        while ContinuousClock.now - start < .seconds(15) {
            let sent = ContinuousClock.now
            try? member.send(text: say)
            guard echoes.wait(timeout: .now() + 10) == .success else { fail("a send went unechoed for 10 s") }
            times.append(ContinuousClock.now - sent)
            Thread.sleep(forTimeInterval: 0.15)
        }
        let elapsed = Double(milliseconds(ContinuousClock.now - start)) / 1000
        reading.withLock { $0 = false }
        times.sort()
        record("10 members rejoining a 20,000-event room from its start for 15 s, \(label): replays ended, bytes pulled",
               String(format: "%d replays, %.0f MB (%.1f MB/s)", replays.withLock { $0 }, Double(pulled.withLock { $0 }) / 1e6, Double(pulled.withLock { $0 }) / 1e6 / elapsed), "node ≤ 32 MiB/s")
        record("a member's send → echo in another room meanwhile, median / p99 / max", String(format: "%.2f / %.2f / %.1f ms", milliseconds(times[times.count / 2]),
               milliseconds(times[min(times.count - 1, times.count * 99 / 100)]), milliseconds(times.last ?? .zero)), "—")
        for reader in readers { try? reader.close() }
        try? member.close()
        _ = server.signal(SIGTERM)
        running.removeAll { $0 === server }
    }
}
