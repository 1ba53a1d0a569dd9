import Dispatch
import Foundation
import SystemSupport
import RealtimeProtocol
import WebSocket

/// Issue 47, item 8: anonymous members with the public grant of `open:{id}` join and leave fresh
/// rooms, 50 connections at 95 joins a second each (under the 200 room requests a second a
/// connection may make), until the in-memory store holds its 100,000 rooms and for 10 s more,
/// each new room at the cap evicting the least recently used one; a good client pings beside them.
func roomsAtTheCap() {
    progress("rooms: 50 anonymous members creating rooms up to the in-memory store's cap and past it")
    let (server, port) = startServer([])
    guard let good = try? GoodClient(port: port) else { fail("good client: no connection") }
    let grant = (try? JSONWebToken.sign(RoomClaims(subject: nil, room: "open:{id}", expiresAt: Int(Date().timeIntervalSince1970) + 3600,
                                                   rule: RoomRule(history: 10, isPublic: true)), secret: appSecret)) ?? ""
    let creating = Locked(true)
    let created = Locked(0)
    let joined = Locked(0)
    let refused = Locked([String: Int]())
    let done = DispatchSemaphore(value: 0)
    for member in 0..<50 {
        guard let connection = try? context.connect(url: "ws://127.0.0.1:\(port)/app/\(appKey)", onEvent: { event in
            guard case .text(let text) = event else { return }
            if text.contains(#"\"event\":\"joined\""#) {
                joined.withLock { $0 += 1 }
            } else if text.contains(#"\"event\":\"error\""#) {
                let code = text.range(of: #"\"code\":\""#).map { String(text[$0.upperBound...].prefix { $0 != "\\" }) } ?? "?"
                refused.withLock { $0[code, default: 0] += 1 }
            }
        }) else { fail("member: no connection") }
        Thread.sleep(forTimeInterval: 0.05)
        // 19 rooms joined and left every 200 ms: 190 room requests a second.
        sendLoop(connection, burst: 19, every: 0.2, running: creating, sent: created, done: done) { index in
            let room = "open:\(member)-\(index)"
            return [(try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomJoin), payload: RoomJoinRequest(room: room, token: grant)).text) ?? "",
                    (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomLeave), payload: RoomLeaveRequest(room: room)).text) ?? ""]
        }
    }
    let start = ContinuousClock.now
    var filling: [Duration] = []
    while joined.withLock({ $0 }) < 100_000, ContinuousClock.now - start < .seconds(120) {
        filling += good.roundTrips(for: 2)
    }
    let atCap = joined.withLock { $0 }
    progress("  refused: \(refused.withLock { $0 })")
    progress("  \(atCap) rooms joined in \(milliseconds(ContinuousClock.now - start) / 1000) s; 10 s more at the cap")
    let cpuBefore = cpuSeconds(server)
    let times = good.roundTrips(for: 10)
    let cpu = cpuSeconds(server) - cpuBefore
    let past = joined.withLock { $0 } - atCap
    creating.withLock { $0 = false }
    for _ in 0..<50 { done.wait() }
    record("a good client's ping while 50 anonymous members fill the in-memory store's 100,000 rooms", summary(filling.sorted()), "max ≤ 100 ms")
    record("the same at the cap, \(past) more rooms joined in 10 s (each evicting one); server CPU in the 10 s", summary(times) + String(format: ", CPU %.2f s, RSS %d MB", cpu, residentBytes(server) / 1_000_000), "max ≤ 100 ms")
    _ = server.signal(SIGTERM)
    running.removeAll { $0 === server }
}
