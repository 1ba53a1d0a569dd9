import Dispatch
import Foundation
import Glibc
import SystemSupport
import RealtimeProtocol
import class Spawn.ChildProcess
import WebSocket

/// Issue 48: 150 anonymous members of a public room of 2,000 kept events of 10 KB (the most a
/// room event's data may be) page its history within their documented limits (a
/// `room_history` of limit 100, about 1 MB, every 333 ms each: the read budget of 3 MiB a
/// second admits three such pages), on a node keeping rooms in a private Redis. Beside
/// them a good member sends an event into its own room every 150 ms and times the echo, and
/// joins a fresh room every second, timed to `joined`.
func historyPagers() {
    progress("pagers: 150 members paging a room of 2,000 events of 10 KB at their limits, on Redis")
    let redisPort = freePort()
    guard let redis = try? ChildProcess("/usr/bin/redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
                                        standardOutput: .nullDevice)
    else { fail("cannot start redis-server") }
    running.append(redis)
    Thread.sleep(forTimeInterval: 0.5)
    let (server, port) = startServer(["--redis", "redis://127.0.0.1:\(redisPort)"])
    let rule = RoomRule(history: 20_000, isPublic: true)
    _ = publishBacklog(port: port, room: "big:1", rule: rule, events: 2_000, padding: 10_000)
    let expires = Int(Date().timeIntervalSince1970) + 3600
    let grant = (try? JSONWebToken.sign(RoomClaims(subject: nil, room: "big:{id}", expiresAt: expires, rule: rule), secret: appSecret)) ?? ""
    let join = (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomJoin), payload: RoomJoinRequest(room: "big:1", token: grant)).text) ?? ""
    let crowd = Int(ProcessInfo.processInfo.environment["PAGERS"] ?? "") ?? 150
    var pagers: [NonReadingSocket] = []
    for _ in 0..<crowd {
        guard let pager = NonReadingSocket(port: port, firstFrame: join, smallReceiveBuffer: false) else { fail("pager: no connection") }
        pagers.append(pager)
    }
    let reader = PagingSockets(pagers)
    let paging = Locked(true)
    let done = DispatchSemaphore(value: 0)
    let senders = pagers
    Thread.detachNewThread {
        var index = 0
        while paging.withLock({ $0 }) {
            for pager in senders {
                let request = RoomHistoryRequest(room: "big:1", request: "p\(index)", limit: 100, before: UInt64.random(in: 101...2_000))
                _ = pager.sendText((try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomHistory), payload: request).text) ?? "")
            }
            index += 1
            Thread.sleep(forTimeInterval: 0.333)
        }
        done.signal()
    }
    // The good member: its own room, an event every 150 ms, each timed to its echo; and a
    // fresh room joined each second, timed to its `joined`.
    let memberRule = RoomRule(history: 10, membersSend: true)
    let echoes = DispatchSemaphore(value: 0), joins = DispatchSemaphore(value: 0)
    guard let member = try? context.connect(url: "ws://127.0.0.1:\(port)/app/\(appKey)", onEvent: { event in
        guard case .text(let text) = event else { return }
        if ProcessInfo.processInfo.environment["PAGERS_DEBUG"] != nil { progress(text) }
        if text.contains(#"\"event\":\"say\""#) { echoes.signal() }
        if text.contains(#"\"event\":\"joined\""#) { joins.signal() }
    }) else { fail("member: no connection") }
    Thread.sleep(forTimeInterval: 0.5)
    func joinFrame(_ room: String) -> String {
        let token = (try? JSONWebToken.sign(RoomClaims(subject: "good", room: room, expiresAt: expires, rule: memberRule), secret: appSecret)) ?? ""
        return (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomJoin), payload: RoomJoinRequest(room: room, token: token)).text) ?? ""
    }
    try? member.send(text: joinFrame("chat:0"))
    guard joins.wait(timeout: .now() + 10) == .success else { fail("the member's first join went unanswered for 10 s") }
    let say = (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomSend), payload: RoomSendRequest(room: "chat:0", event: "say", data: #"{"t":1}"#)).text) ?? ""
    let seconds = Double(ProcessInfo.processInfo.environment["PAGERS_SECONDS"] ?? "") ?? 30
    let start = ContinuousClock.now
    let cpuBefore = cpuSeconds(server)
    var times: [Duration] = [], joinTimes: [Duration] = []
    var unanswered = 0, lastJoin = start
    var settled = Duration.zero
    while ContinuousClock.now - start < .milliseconds(Int(seconds * 1000)) {
        let sent = ContinuousClock.now
        try? member.send(text: say)
        // An echo not back in 10 s counts as 10 s (a late one then answers the next send).
        times.append(echoes.wait(timeout: .now() + 10) == .success ? ContinuousClock.now - sent : .seconds(10))
        if sent - start >= .seconds(2) { settled = max(settled, times[times.count - 1]) }
        if ContinuousClock.now - lastJoin > .seconds(1) {
            lastJoin = ContinuousClock.now
            try? member.send(text: joinFrame("chat:\(joinTimes.count + unanswered + 1)"))
            if joins.wait(timeout: .now() + 5) == .success { joinTimes.append(ContinuousClock.now - lastJoin) } else { unanswered += 1 }
        }
        Thread.sleep(forTimeInterval: 0.15)
    }
    let elapsed = milliseconds(ContinuousClock.now - start) / 1000
    let cpu = cpuSeconds(server) - cpuBefore
    paging.withLock { $0 = false }
    done.wait()
    let (pages, refused, bytes) = reader.stop()
    times.sort()
    joinTimes.sort()
    let percentile = { (sorted: [Duration], share: Int) in milliseconds(sorted[min(sorted.count - 1, sorted.count * share / 100)]) }
    record("\(crowd) members paging a room of 2,000 events of 10 KB (limit 100, 3 a second each) for \(Int(seconds)) s on Redis: pages answered, refused; server CPU",
           String(format: "%d pages (%.0f/s, %.0f MB/s read), %d refused; %.1f s CPU", pages, Double(pages) / elapsed, Double(bytes) / 1e6 / elapsed, refused, cpu), "—")
    record("a member's send → echo in its own room meanwhile, median / p99 / max",
           String(format: "%.2f / %.2f / %.1f ms (max after the first 2 s: %.1f ms)", percentile(times, 50), percentile(times, 99), milliseconds(times.last ?? .zero),
                  milliseconds(settled)), "p99 ≤ 100 ms")
    record("its joins of fresh rooms meanwhile: answered, median / max",
           joinTimes.isEmpty ? "0 answered, \(unanswered) not within 5 s"
               : String(format: "%d of %d, %.2f / %.1f ms", joinTimes.count, joinTimes.count + unanswered, percentile(joinTimes, 50), milliseconds(joinTimes.last ?? .zero)),
           "all answered")
    try? member.close()
    pagers.removeAll()
    _ = server.signal(SIGTERM)
    _ = redis.signal(SIGTERM)
    running.removeAll { $0 === server || $0 === redis }
}

/// A TCP port free on loopback now (bound to port 0, then released).
func freePort() -> Int {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Reads every pager's socket on one thread and discards what arrives, counting history pages
/// and refusals by their markers (`…:room_history` frames, those with `\"error\":{`) and the
/// bytes read: a WebSocket client that parses each page could not read 150 of them at their
/// limits on these 2 cores, and the server would drop them as slow consumers.
final class PagingSockets: Sendable {
    private let counts = Locked((pages: 0, refused: 0, bytes: 0))
    private let reading = Locked(true)
    private let finished = DispatchSemaphore(value: 0)

    init(_ sockets: [NonReadingSocket]) {
        let descriptors = sockets.map(\.descriptor)
        Thread.detachNewThread { [counts, reading, finished] in
            var pollers = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            let page = Array(#":room_history""#.utf8), error = Array(#"\"error\":{"#.utf8)
            while reading.withLock({ $0 }) {
                guard poll(&pollers, nfds_t(pollers.count), 100) > 0 else { continue }
                for index in pollers.indices where pollers[index].revents != 0 {
                    let count = buffer.withUnsafeMutableBytes { recv(pollers[index].fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }
                    guard count > 0 else { continue }
                    if ProcessInfo.processInfo.environment["PAGERS_DEBUG"] != nil {
                        progress("read \(count): " + String(decoding: buffer[0..<min(count, 120)], as: UTF8.self).replacingOccurrences(of: "\n", with: " "))
                    }
                    let found = buffer.withUnsafeBytes { raw in (occurrences(of: page, in: raw, count: count), occurrences(of: error, in: raw, count: count)) }
                    counts.withLock { $0.pages += found.0 - found.1; $0.refused += found.1; $0.bytes += count }
                }
            }
            finished.signal()
        }
    }

    /// Stops reading; returns the pages, refusals and bytes read.
    func stop() -> (Int, Int, Int) {
        reading.withLock { $0 = false }
        finished.wait()
        return counts.withLock { ($0.pages, $0.refused, $0.bytes) }
    }
}

/// How many times `needle` occurs in the first `count` bytes of `raw`.
private func occurrences(of needle: [UInt8], in raw: UnsafeRawBufferPointer, count: Int) -> Int {
    var found = 0
    var offset = 0
    let first = needle[0]
    while offset + needle.count <= count {
        guard let hit = raw[offset..<count].firstIndex(of: first) else { break }
        if hit + needle.count <= count, needle.indices.allSatisfy({ raw[hit + $0] == needle[$0] }) {
            found += 1
            offset = hit + needle.count
        } else {
            offset = hit + 1
        }
    }
    return found
}
