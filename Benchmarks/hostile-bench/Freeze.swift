import CurlHTTP
import Dispatch
import Foundation
import Glibc
import RealtimeCluster
import RealtimeProtocol
import Redis
import SystemSupport
import WebSocket

/// Issue 48: one master of a private Redis Cluster (3 masters, no replicas, node timeout 15 s)
/// frozen for 12 s (SIGSTOP) under a node on `--redis-cluster`. A member of a room on a healthy
/// shard sends an event every 100 ms and times its echo; a member of a room on the frozen shard
/// sends too (its sends wait); `/health` is read every 100 ms for the frozen master's name.
func frozenShard() {
    progress("freeze: one Redis Cluster master frozen 12 s, a member sending into a room on another shard")
    guard let cluster = try? PrivateRedisCluster(masters: 3, replicasPerMaster: 0, nodeTimeout: 15_000) else { fail("cannot start a Redis Cluster") }
    defer { cluster.stop() }
    let seeds = cluster.endpoints.map { $0.description.replacingOccurrences(of: "redis://", with: "") }.joined(separator: ",")
    let (server, port) = startServer(["--redis-cluster", seeds])
    let map = RedisClusterConnection(seeds: cluster.endpoints)
    try? map.refreshSlotMap()
    guard let slots = map.slotMap else { fail("no slot map") }
    func master(of room: String) -> RedisEndpoint? { slots.shard(forSlot: RedisClusterSlot.of("rt:{1:1:\(room)}"))?.master }
    // The frozen master holds the app's list of rooms (new rooms on the others are listed
    // there); two rooms on different masters: the frozen one's and a healthy one's.
    guard let frozen = slots.shard(forSlot: RedisClusterSlot.of(RedisRoomStore.roomsKey(app: "1")))?.master,
          let frozenRoom = (0..<1000).map({ "chat:\($0)" }).first(where: { master(of: $0) == frozen }),
          let healthyRoom = (1..<1000).map({ "chat:\($0)" }).first(where: { master(of: $0) != frozen }) else { fail("no two shards") }
    let freshRooms = (1..<5000).map { "fresh:\($0)" }.filter { master(of: $0) != frozen }
    let expires = Int(Date().timeIntervalSince1970) + 3600
    let rule = RoomRule(history: 100, membersSend: true)
    @Sendable func join(_ room: String) -> String {
        let token = (try? JSONWebToken.sign(RoomClaims(subject: "u-\(room)", room: room, expiresAt: expires, rule: rule), secret: appSecret)) ?? ""
        return (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomJoin), payload: RoomJoinRequest(room: room, token: token)).text) ?? ""
    }
    func member(_ room: String, echoes: DispatchSemaphore, joined: DispatchSemaphore = DispatchSemaphore(value: 0)) -> WebSocketConnection {
        guard let connection = try? context.connect(url: "ws://127.0.0.1:\(port)/app/\(appKey)", onEvent: { event in
            guard case .text(let text) = event else { return }
            if text.contains(#"\"event\":\"say\""#) { echoes.signal() }
            if text.contains(#"\"event\":\"joined\""#) { joined.signal() }
        }) else { fail("member: no connection") }
        Thread.sleep(forTimeInterval: 0.3)
        try? connection.send(text: join(room))
        guard joined.wait(timeout: .now() + 10) == .success else { fail("\(room): no joined") }
        return connection
    }
    @Sendable func say(_ room: String) -> String {
        (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomSend), payload: RoomSendRequest(room: room, event: "say", data: #"{"t":1}"#)).text) ?? ""
    }
    let healthyEchoes = DispatchSemaphore(value: 0), frozenEchoes = DispatchSemaphore(value: 0)
    let healthy = member(healthyRoom, echoes: healthyEchoes)
    let stuck = member(frozenRoom, echoes: frozenEchoes)
    // A third member joins a fresh room on a healthy master every second, timed to `joined`:
    // each new room is listed on the frozen master.
    let joins = DispatchSemaphore(value: 0)
    let joiner = member(freshRooms[0], echoes: DispatchSemaphore(value: 0), joined: joins)
    let sending = Locked(true)
    // The frozen shard's member keeps sending (an event every 500 ms): its requests wait there.
    Thread.detachNewThread {
        while sending.withLock({ $0 }) {
            try? stuck.send(text: say(frozenRoom))
            Thread.sleep(forTimeInterval: 0.5)
        }
    }
    // `/health` every 100 ms: when it first names the frozen master.
    let named = Locked<Duration?>(nil)
    let frozenAt = Locked<ContinuousClock.Instant?>(nil)
    Thread.detachNewThread {
        while sending.withLock({ $0 }) {
            if let since = frozenAt.withLock({ $0 }), named.withLock({ $0 }) == nil,
               case .success(let answer) = CurlHTTP.get(url: "http://127.0.0.1:\(port)/health", headers: [], timeout: .seconds(2), maxResponseBytes: 1 << 16),
               String(decoding: answer.body, as: UTF8.self).contains(frozen.description) {
                named.withLock { $0 = ContinuousClock.now - since }
            }
            Thread.sleep(forTimeInterval: 0.1)
        }
    }
    var times: [Duration] = []
    var unanswered = 0
    let start = ContinuousClock.now
    // Joins during the freeze: their times, and those not answered within 5 s.
    let joinTimes = Locked<(times: [Duration], unanswered: Int)>(([], 0))
    Thread.detachNewThread {
        var next = 1
        while sending.withLock({ $0 }), next < freshRooms.count {
            let elapsed = ContinuousClock.now - start
            guard elapsed >= .seconds(2.5), elapsed < .seconds(13.5) else {
                Thread.sleep(forTimeInterval: 0.1)
                continue
            }
            let sent = ContinuousClock.now
            try? joiner.send(text: join(freshRooms[next]))
            next += 1
            let answered = joins.wait(timeout: .now() + 5) == .success
            joinTimes.withLock { answered ? $0.times.append(ContinuousClock.now - sent) : ($0.unanswered += 1) }
            Thread.sleep(forTimeInterval: 1)
        }
    }
    while ContinuousClock.now - start < .seconds(16) {
        let elapsed = ContinuousClock.now - start
        if elapsed >= .seconds(2), frozenAt.withLock({ $0 }) == nil {
            cluster.setRunning(frozen, false)
            frozenAt.withLock { $0 = ContinuousClock.now }
        }
        if elapsed >= .seconds(14) { cluster.setRunning(frozen, true) }
        let sent = ContinuousClock.now
        try? healthy.send(text: say(healthyRoom))
        if healthyEchoes.wait(timeout: .now() + 5) == .success {
            // Only the sends made while the master was frozen count.
            if elapsed >= .seconds(2), elapsed < .seconds(14) { times.append(ContinuousClock.now - sent) }
        } else {
            unanswered += 1
        }
        Thread.sleep(forTimeInterval: 0.1)
    }
    cluster.setRunning(frozen, true)
    sending.withLock { $0 = false }
    times.sort()
    record("a member's send → echo in a room on a healthy shard while another master is frozen 12 s: answered, median / p99 / max",
           times.isEmpty ? "none answered" : String(format: "%d of %d, %.2f / %.2f / %.1f ms", times.count, times.count + unanswered,
                                                   milliseconds(times[times.count / 2]), milliseconds(times[min(times.count - 1, times.count * 99 / 100)]),
                                                   milliseconds(times.last ?? .zero)), "every send within 200 ms")
    let joined = joinTimes.withLock { $0 }
    let joinedSorted = joined.times.sorted()
    record("its joins of fresh rooms on a healthy master (listed on the frozen one) during the freeze: answered, median / max",
           joinedSorted.isEmpty ? "none answered of \(joined.unanswered)" : String(format: "%d of %d, %.2f / %.1f ms", joinedSorted.count, joinedSorted.count + joined.unanswered,
                                                                           milliseconds(joinedSorted[joinedSorted.count / 2]), milliseconds(joinedSorted.last ?? .zero)), "every join within 200 ms")
    record("/health names the frozen master after", named.withLock { $0 }.map { String(format: "%.2f s", milliseconds($0) / 1000) } ?? "never", "≤ 1 s")
    try? healthy.close()
    try? stuck.close()
    try? joiner.close()
    _ = server.signal(SIGTERM)
    running.removeAll { $0 === server }
}
