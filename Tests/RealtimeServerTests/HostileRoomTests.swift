import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import SystemSupport
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import TestSupport
import Testing

/// The findings of the hostile trial against rooms (issue 30), each against the real server
/// over real sockets: every one of these once froze, stalled or misled the server.
@Suite("Rooms under attack")
struct HostileRoomTests {
    /// A token for `room` whose header nests an array 511 deep, with a made-up signature: what
    /// anyone who knows only the public app key can send.
    static func forgedDeepToken(room: String) -> String {
        let header = #"{"alg":"HS256","x":"# + String(repeating: "[", count: 511) + String(repeating: "]", count: 511) + "}"
        return "\(base64URL(header.utf8)).\(base64URL(#"{"room":"\#(room)","exp":9999999999}"#.utf8)).\(String(repeating: "A", count: 43))"
    }

    /// base64url without padding (RFC 4648 §5).
    static func base64URL(_ bytes: some Sequence<UInt8>) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "=", with: "")
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }

    /// A token of exactly this header and claims text, signed with the app's secret (JSON a
    /// backend's library would not write, but may be made to sign).
    static func signedToken(header: String = #"{"alg":"HS256","typ":"JWT"}"#, claims: String) -> String {
        let input = "\(base64URL(header.utf8)).\(base64URL(claims.utf8))"
        return "\(input).\(base64URL(Crypto.hmacSHA256(key: ServerFixture.app.secret, message: input)))"
    }

    /// The median ping round trip a good client keeps during a flood: 10 ms, 50 ms under a
    /// sanitizer.
    static let pingBound = Duration.milliseconds(10 * Sanitizers.slowdown)

    /// Five ping round trips of `client`, one after another.
    static func pingRoundTrips(_ client: RoomClient) -> [Duration] {
        let before = client.messages.filter { $0.event == "bird:pong" }.count
        return (1...5).map { count in
            let start = ContinuousClock.now
            client.sendRaw(#"{"event":"bird:ping","data":{}}"#)
            #expect(client.wait { $0.messages.filter { $0.event == "bird:pong" }.count >= before + count })
            return ContinuousClock.now - start
        }
    }

    /// This thread's CPU time so far, in milliseconds.
    static func threadCPU() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) * 1000 + Double(time.tv_nsec) / 1_000_000
    }

    @Test("forged joins with 511-deep headers are refused bad_signature in under 1 ms of the hub's CPU each; a good client's ping during 20 of them stays under 10 ms", .timeLimit(.minutes(1)))
    func forgedDeepTokens() throws {
        let fixture = try ServerFixture()
        let attacker = try RoomClient(fixture)
        let good = try RoomClient(fixture)
        let forged = Self.forgedDeepToken(room: "order:1")
        #expect(forged.utf8.count < 1600)
        let frame = try RealtimeMessage(event: "bird:room_join", payload: RoomJoinRequest(room: "order:1", token: forged)).text
        // The hub's own work for one frame (parse, verify, answer), on this thread, from the
        // attacker's real socket: the least of 5.
        let socketID = try #require(try attacker.messages.first { $0.event == "bird:connection_established" }?.decodeData(ConnectionEstablished.self).socketID)
        var cpu = Double.infinity
        for _ in 0..<5 {
            let start = Self.threadCPU()
            fixture.server.hub.receive(text: frame, from: socketID)
            cpu = min(cpu, Self.threadCPU() - start)
        }
        #expect(cpu < Double(Sanitizers.slowdown), "the hub spent \(cpu) ms of CPU on a forged join")
        // 20 more over the socket while a good client pings.
        for _ in 0..<20 { attacker.sendRaw(frame) }
        let roundTrips = Self.pingRoundTrips(good)
        #expect(attacker.wait { $0.frames.filter { $0.event == "error" }.count >= 25 })
        #expect(attacker.system("error", room: "order:1").map { $0.data["code"]?.string } == Array(repeating: "bad_signature", count: 25))
        #expect(roundTrips.sorted()[2] <= Self.pingBound, "ping round trips during the flood: \(roundTrips)")
        #expect(attacker.closeCode == nil)
    }

    @Test("JSON repeating a member name is refused: a token naming two rooms, room and channel bodies of the HTTP API, a subscribe frame")
    func duplicateNames() async throws {
        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        // PyJWT would read this as order:2, Foundation as order:1.
        let token = Self.signedToken(claims: #"{"room":"order:1","room":"order:2","sub":"ann","exp":9999999999}"#)
        for room in ["order:1", "order:2"] {
            client.join(room, token: token)
            #expect(client.waitFor("error", room: room)?.data["code"]?.string == "invalid_token")
        }
        #expect(fixture.server.hub.roomMembers(appID: "1", room: "order:1").connections == 0)
        #expect(fixture.server.hub.roomMembers(appID: "1", room: "order:2").connections == 0)

        let roomEvent = try await fixture.api("POST", "/apps/1/room_events", body: #"{"name":"m","room":"chat:1","room":"chat:2","data":"{}"}"#)
        #expect(roomEvent.0 == 400)
        let channelEvent = try await fixture.api("POST", "/apps/1/events", body: #"{"name":"m","channel":"a","channel":"b","data":"{}"}"#)
        #expect(channelEvent.0 == 400)
        let batch = try await fixture.api("POST", "/apps/1/batch_room_events", body: #"{"batch":[{"name":"m","room":"chat:1","data":{"a":1,"a":2}}]}"#)
        #expect(batch.0 == 400)
        #expect(try fixture.server.hub.roomHistory(appID: "1", room: "chat:1", before: nil, limit: 10).events.isEmpty)

        client.sendRaw(#"{"event":"bird:subscribe","data":{"channel":"public-a","channel":"private-b"}}"#)
        let error = client.wait { $0.messages.contains { $0.event == "bird:error" } }
        #expect(error)
        #expect(fixture.server.hub.channelCounts(appID: "1").isEmpty)
    }
}

/// A connection the test joins to rooms through the hub itself: many members at the cost of
/// none of their sockets.
final class DiscardingOutput: ConnectionOutput {
    func send(text: String) {}
    func close(code: UInt16, reason: String) {}
    func abort() {}
}

/// The history store a test's server uses: in this process's memory, or on a private Redis.
enum StoreKind: String, CaseIterable, CustomTestStringConvertible, Sendable {
    case memory, redis
    var testDescription: String { rawValue }
}

/// A server with a store of `kind`, and the Redis behind it.
final class StoreBed: Sendable {
    let fixture: ServerFixture
    let redis: PrivateRedis?

    init(_ kind: StoreKind, apps: [RealtimeApp] = [ServerFixture.app]) throws {
        switch kind {
        case .memory:
            redis = nil
            fixture = try ServerFixture(apps: apps)
        case .redis:
            let redis = try PrivateRedis()
            self.redis = redis
            let store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
            fixture = try ServerFixture(apps: apps) { $0.roomStore = store }
        }
    }

    deinit { redis?.stop() }

    /// Bytes Redis has sent to its clients since it started (`INFO stats`), or 0 in memory.
    func redisOutputBytes() throws -> Int {
        guard let redis else { return 0 }
        let info = try RedisConnection(endpoint: redis.endpoint).command("INFO", "stats").string ?? ""
        let line = info.split(whereSeparator: \.isNewline).first { $0.hasPrefix("total_net_output_bytes:") }
        return line.flatMap { Int($0.dropFirst("total_net_output_bytes:".count)) } ?? 0
    }
}

extension HostileRoomTests {
    /// The answers (`joined`, a `joined`'s `reason`, or an error's code) to joins of `room`
    /// among `frames`, in order.
    static func answers(_ frames: [RoomFrameSeen], room: String) -> [String] {
        frames.filter { $0.room == room && ($0.event == "joined" || $0.event == "error") }
            .map { $0.event == "joined" ? ($0.data["reason"]?.string ?? "joined") : ($0.data["code"]?.string ?? "?") }
    }

    @Test("100 joins from a position 2.7 MB back: each replay streamed whole and paced (16 MiB a second), the joins that come while one is on its way rate_limited; never a drop", .timeLimit(.minutes(1)), arguments: StoreKind.allCases)
    func oldPositionFlood(_ kind: StoreKind) throws {
        let bed = try StoreBed(kind)
        let hub = bed.fixture.server.hub
        let rule = RoomRule(history: 1000, isPublic: true)
        let big = #"{"text":"\#(String(repeating: "x", count: 9000))"#
        let start = try hub.publishRoom(appID: "1", room: "big:1", event: "e", data: "{}", rule: rule)
        for _ in 0..<300 { try hub.publishRoom(appID: "1", room: "big:1", event: "e", data: big + "\"}") }
        let attacker = try RoomClient(bed.fixture)
        let token = Tokens.make(room: "big:1", user: nil, rule: rule)
        let outputBefore = try bed.redisOutputBytes()
        let began = ContinuousClock.now
        for _ in 0..<100 { attacker.join("big:1", token: token, since: RoomPosition(epoch: start.epoch, id: start.record.id)) }
        #expect(attacker.wait { Self.answers($0.frames, room: "big:1").count >= 100 })
        let seconds = Int((ContinuousClock.now - began).components.seconds) + 1
        let answers = Self.answers(attacker.frames, room: "big:1")
        let joins = answers.filter { $0 == "joined" }.count
        #expect(joins >= 1, "\(answers)")
        #expect(Set(answers).isSubset(of: ["joined", "rate_limited"]), "\(answers)")
        // Every replay whole (300 events of 9 KB), at most 16 MiB of them a second.
        #expect(attacker.kept("big:1").count == 300 * joins, "\(attacker.kept("big:1").count) replayed for \(joins) joins")
        #expect(joins * 2_750_000 <= seconds * (16 << 20) + 2_750_000, "\(joins) replays in \(seconds) s")
        // What left Redis: the pages of those replays, nothing for a refused join.
        let sent = try bed.redisOutputBytes() - outputBefore
        #expect(sent < joins * 3_000_000, "Redis sent \(sent) bytes for \(joins) replays")
        #expect(attacker.closeCode == nil)
    }

    @Test("100 history pages of 100 events of 9 KB: at most 3 MiB of pages a second, the rest rate_limited before the store is read", .timeLimit(.minutes(1)), arguments: StoreKind.allCases)
    func historyFlood(_ kind: StoreKind) throws {
        let bed = try StoreBed(kind)
        let hub = bed.fixture.server.hub
        let rule = RoomRule(history: 1000)
        let big = #"{"text":"\#(String(repeating: "x", count: 9000))"}"#
        for _ in 0..<300 { try hub.publishRoom(appID: "1", room: "big:2", event: "e", data: big, rule: rule) }
        let attacker = try RoomClient(bed.fixture)
        #expect(attacker.joined("big:2", token: Tokens.make(room: "big:2", user: "mallory", rule: rule)) != nil)
        let outputBefore = try bed.redisOutputBytes()
        let began = ContinuousClock.now
        for index in 0..<100 { attacker.send(.roomHistory, RoomHistoryRequest(room: "big:2", request: "p\(index)", limit: 100)) }
        func pages(_ messages: [RealtimeMessage]) -> [RealtimeMessage] { messages.filter { $0.event == "bird:room_history" } }
        #expect(attacker.wait { pages($0.messages).count >= 100 })
        let seconds = Int((ContinuousClock.now - began).components.seconds)
        let served = pages(attacker.messages).filter { (try? $0.decodeData([String: JSONValue].self))?["events"] != nil }.count
        #expect(served >= 1 && served <= 3 * (1 + seconds), "\(served) pages of 900 KB in \(seconds) s")
        #expect(pages(attacker.messages).count - served >= 100 - 3 * (1 + seconds))
        let sent = try bed.redisOutputBytes() - outputBefore
        #expect(kind == .memory || sent < (served + 1) * 1_000_000, "Redis sent \(sent) bytes for \(served) pages")
        #expect(attacker.closeCode == nil)
    }

    @Test("a presence rejoin flood in a room of 500 members: the members list built at most 3 MiB a second, the rest rate_limited, never a drop; a good client's median ping stays under 40 ms", .timeLimit(.minutes(1)))
    func presenceRejoinFlood() async throws {
        let app = RealtimeApp(id: "1", key: "app-key", secret: "app-secret", maxConnections: 600, activityTimeout: 120)
        let fixture = try ServerFixture(apps: [app])
        let hub = fixture.server.hub
        let rule = RoomRule(history: 10, presence: true, isPublic: true)
        let info = JSONValue.object(["bio": .string(String(repeating: "b", count: 900))])
        for index in 0..<500 {
            let output = DiscardingOutput()
            let socketID = try #require(hub.open(appKey: app.key, namespace: .bird, output: output))
            let token = Tokens.make(room: "team:1", user: "user\(index)", rule: rule, info: info)
            hub.receive(text: try RealtimeMessage(event: "bird:room_join", payload: RoomJoinRequest(room: "team:1", token: token)).text, from: socketID)
        }
        // Joins finish on the hub's lane.
        #expect(await eventually { hub.roomMembers(appID: "1", room: "team:1").users.count == 500 })
        let attacker = try RoomClient(fixture)
        let good = try RoomClient(fixture)
        let token = Tokens.make(room: "team:1", user: nil, rule: rule)
        #expect(attacker.joined("team:1", token: token) != nil)
        let began = ContinuousClock.now
        for _ in 0..<100 { attacker.join("team:1", token: token) }
        let roundTrips = Self.pingRoundTrips(good)
        #expect(attacker.wait { Self.answers($0.frames, room: "team:1").count >= 101 })
        let seconds = Int((ContinuousClock.now - began).components.seconds)
        let answers = Self.answers(attacker.frames, room: "team:1").dropFirst()
        // Each `joined` lists 500 members of about 1 KB: at most 6 fit 3 MiB.
        #expect(answers.filter { $0 == "joined" }.count <= 7 * (1 + seconds), "\(answers)")
        #expect(Set(answers).isSubset(of: ["joined", "rate_limited"]), "\(answers)")
        #expect(attacker.closeCode == nil)
        // The lists the budget admits are still built on the service thread (tens of ms a
        // second in a debug build, beside the other suites): the bound is the unlimited
        // flood's 65 ms median (release) cut well down, not the forged tokens' 10 ms.
        #expect(roundTrips.sorted()[2] <= .milliseconds(40 * Sanitizers.slowdown), "ping round trips during the flood: \(roundTrips)")
    }

    @Test("history before an id of 10^15 pages normally: ids are written as integers, never as 1e+15", arguments: StoreKind.allCases)
    func hugeBefore(_ kind: StoreKind) async throws {
        let bed = try StoreBed(kind)
        let hub = bed.fixture.server.hub
        for index in 1...3 { try hub.publishRoom(appID: "1", room: "log:1", event: "e", data: "\(index)", rule: RoomRule(history: 10)) }
        for before: UInt64 in [100_000_000_000_000, 1_000_000_000_000_000, .max] {
            #expect(try hub.roomHistory(appID: "1", room: "log:1", before: before, limit: 10).events.map(\.data) == ["1", "2", "3"])
            let (status, body) = try await bed.fixture.api("GET", "/apps/1/rooms/log:1/history?before=\(before)")
            #expect(status == 200, "\(body)")
        }
    }
}

extension HostileRoomTests {
    @Test("an older token cannot unseal, un-presence or uncap a room; a newer one from the backend, or its publish with a rule, does change it")
    func olderTokenKeepsRule() async throws {
        let wall = ManualWallClock()
        let fixture = try ServerFixture { $0.wallClock = wall.closure }
        let hub = fixture.server.hub
        let strict = RoomRule(history: 10, presence: true, maxMembers: 2, membersSend: true, sealed: true)
        let loose = RoomRule(history: 10, membersSend: true)
        let ann = try RoomClient(fixture)
        let bob = try RoomClient(fixture)
        let mallory = try RoomClient(fixture)
        #expect(ann.joined("vault:1", token: Tokens.make(room: "vault:1", user: "ann", rule: strict, now: wall.now)) != nil)
        #expect(bob.joined("vault:1", token: Tokens.make(room: "vault:1", user: "bob", rule: strict, now: wall.now)) != nil)
        // Tokens from ten minutes ago, still valid, naming a looser rule.
        let older = { (user: String) in Tokens.make(room: "vault:1", user: user, rule: loose, now: wall.now - 600_000) }
        mallory.join("vault:1", token: older("mallory"))
        #expect(mallory.waitFor("error", room: "vault:1")?.data["code"]?.string == "full")
        let rejoined = bob.joined("vault:1", token: older("bob"))
        #expect(rejoined?["members"]?.array?.count == 2, "still a presence room: \(String(describing: rejoined))")
        #expect(throws: RoomError.self) { try hub.publishRoom(appID: "1", room: "vault:1", event: "note", data: #"{"text":"plain"}"#) }
        bob.send(.roomSend, RoomSendRequest(room: "vault:1", event: "note", data: #"{"text":"plain"}"#))
        #expect(bob.waitFor("error", room: "vault:1")?.data["code"]?.string == "bad_request")
        #expect(try hub.roomHistory(appID: "1", room: "vault:1", before: nil, limit: 10).events.isEmpty)
        // After everyone leaves, the remembered rule holds against the older token too.
        ann.send(.roomLeave, RoomLeaveRequest(room: "vault:1"))
        bob.send(.roomLeave, RoomLeaveRequest(room: "vault:1"))
        #expect(await eventually { hub.roomMembers(appID: "1", room: "vault:1").connections == 0 })
        // (A new socket: `joined` would stop at the earlier error on this one.)
        #expect(try RoomClient(fixture).joined("vault:1", token: older("mallory")) != nil)
        #expect(throws: RoomError.self) { try hub.publishRoom(appID: "1", room: "vault:1", event: "note", data: #"{"text":"plain"}"#) }
        // A token whose iat is ahead of the server's clock counts as issued now: no later.
        _ = try RoomClient(fixture).joined("vault:1", token: Tokens.make(room: "vault:1", user: "zed", rule: loose, now: wall.now + 3_600_000))
        #expect(throws: RoomError.self) { try hub.publishRoom(appID: "1", room: "vault:1", event: "note", data: #"{"text":"plain"}"#) }
        // The backend's newer word changes it: a token issued later, or a publish naming a rule.
        wall.advance(seconds: 10)
        #expect(try RoomClient(fixture).joined("vault:1", token: Tokens.make(room: "vault:1", user: "ann", rule: loose, now: wall.now)) != nil)
        #expect(throws: Never.self) { try hub.publishRoom(appID: "1", room: "vault:1", event: "note", data: #"{"text":"plain"}"#) }
        try hub.publishRoom(appID: "1", room: "vault:1", event: "note", data: #"{"nonce":"n","ciphertext":"c"}"#, rule: strict)
        #expect(throws: RoomError.self) { try hub.publishRoom(appID: "1", room: "vault:1", event: "note", data: #"{"text":"plain"}"#) }
        _ = try RoomClient(fixture).joined("vault:1", token: Tokens.make(room: "vault:1", user: "bob", rule: loose, now: wall.now - 1000))
        #expect(throws: RoomError.self, "a token issued before the backend's publish does not undo it") {
            try hub.publishRoom(appID: "1", room: "vault:1", event: "note", data: #"{"text":"plain"}"#)
        }
    }
}

extension HostileRoomTests {
    @Test("kick paths are decoded once: a%41 kicks the user a%41, not aA; 50% and a/b can be kicked")
    func kickPathsDecodedOnce() async throws {
        let fixture = try ServerFixture()
        let hub = fixture.server.hub
        var clients: [String: RoomClient] = [:]
        for user in ["a%41", "aA", "50%", "a/b"] {
            let client = try RoomClient(fixture)
            #expect(client.joined("chat:1", token: Tokens.make(room: "chat:1", user: user)) != nil)
            clients[user] = client
        }
        // Signed over the decoded path (the server also takes the fully encoded one).
        let (status, body) = try await fixture.api("POST", "/apps/1/rooms/chat:1/users/a%2541/kick", signing: "/apps/1/rooms/chat:1/users/a%41/kick")
        #expect(status == 200 && body == #"{"kicked":1}"#, "\(status) \(body)")
        #expect(Set(hub.roomMembers(appID: "1", room: "chat:1").users) == ["aA", "50%", "a/b"])
        let percent = try await fixture.api("POST", "/apps/1/rooms/chat:1/users/50%25/kick", signing: "/apps/1/rooms/chat:1/users/50%/kick")
        #expect(percent.1 == #"{"kicked":1}"#, "\(percent)")
        let slash = try await fixture.api("POST", "/apps/1/rooms/chat:1/users/a%2Fb/kick", signing: "/apps/1/rooms/chat:1/users/a/b/kick")
        #expect(slash.1 == #"{"kicked":1}"#, "\(slash)")
        #expect(hub.roomMembers(appID: "1", room: "chat:1").users == ["aA"])
        // Signed as sent, the id's `/` as %2F and the room's `:` as %3A (issue 47, item 6: 401 before).
        #expect(try RoomClient(fixture).joined("chat:1", token: Tokens.make(room: "chat:1", user: "c/d")) != nil)
        let asSent = try await fixture.api("POST", "/apps/1/rooms/chat:1/users/c%2Fd/kick", signing: "/apps/1/rooms/chat%3A1/users/c%2Fd/kick")
        #expect(asSent.1 == #"{"kicked":1}"#, "\(asSent)")
        #expect(hub.roomMembers(appID: "1", room: "chat:1").users == ["aA"])
        #expect(clients["aA"]?.system("kicked", room: "chat:1").isEmpty == true)
        // libwebsockets normalizes the decoded path ("b//kick" becomes "b/kick"): an id ending
        // in / cannot be addressed, and the signature, made over the path as sent, refuses the
        // request rather than kick "b".
        for user in ["b", "b/"] { #expect(try RoomClient(fixture).joined("chat:2", token: Tokens.make(room: "chat:2", user: user)) != nil) }
        let trailing = try await fixture.api("POST", "/apps/1/rooms/chat:2/users/b%2F/kick", signing: "/apps/1/rooms/chat:2/users/b//kick")
        #expect(trailing.0 == 401, "\(trailing)")
        #expect(hub.roomMembers(appID: "1", room: "chat:2").users == ["b", "b/"])
    }
}

extension HostileRoomTests {
    @Test("a cluster node's /health answers 503 within 1 s of its Redis freezing (SIGSTOP), and 200 again once it answers", .timeLimit(.minutes(1)))
    func healthTellsFrozenRedis() async throws {
        let node = try RedisNodes()
        let fixture = node.fixture
        func health() async -> Int {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(fixture.server.port)/health")!)
            request.timeoutInterval = 1
            return (try? await HTTPRequests.send(request).status) ?? 0
        }
        #expect(await eventually { fixture.server.hub.isFanoutHealthy })
        #expect(await health() == 200)
        node.freeze()
        let frozen = ContinuousClock.now
        var status = 200
        while status == 200, ContinuousClock.now - frozen < .seconds(3) {
            status = await health()
            try await Task.sleep(for: .milliseconds(20))
        }
        let seen = ContinuousClock.now - frozen
        node.thaw()
        #expect(status == 503)
        #expect(seen <= .seconds(1), "503 only after \(seen)")
        #expect(await eventually { fixture.server.hub.isFanoutHealthy })
        #expect(await health() == 200)
    }
}

extension HostileRoomTests {
    @Test("a kick sent to node A removes the user joined on node B, who can no longer send; users on A lists a presence room's members on B", .timeLimit(.minutes(1)))
    func kickAcrossNodes() async throws {
        let cluster = try RedisNodes(count: 2)
        #expect(await cluster.ready())
        let (nodeA, nodeB) = (cluster.nodes[0], cluster.nodes[1])
        let rule = RoomRule(history: 10, presence: true, membersSend: true)
        let bob = try RoomClient(nodeB)
        let ann = try RoomClient(nodeA)
        #expect(bob.joined("team:1", token: Tokens.make(room: "team:1", user: "bob", rule: rule)) != nil)
        #expect(ann.joined("team:1", token: Tokens.make(room: "team:1", user: "ann", rule: rule)) != nil)
        let users = try await nodeA.api("GET", "/apps/1/rooms/team:1/users")
        #expect(users.1.contains(#"{"id":"bob"}"#) && users.1.contains(#"{"id":"ann"}"#), "\(users)")

        let (status, body) = try await nodeA.api("POST", "/apps/1/rooms/team:1/users/bob/kick", body: #"{"reason":"spam"}"#)
        #expect(status == 200 && body == #"{"kicked":0}"#, "no connection of bob's on A: \(body)")
        #expect(bob.waitFor("kicked", room: "team:1")?.data["reason"]?.string == "spam")
        #expect(await eventually { nodeB.server.hub.roomMembers(appID: "1", room: "team:1").users.isEmpty })
        bob.send(.roomSend, RoomSendRequest(room: "team:1", event: "m", data: "{}"))
        #expect(bob.waitFor("error", room: "team:1")?.data["code"]?.string == "not_joined")
        #expect(ann.waitFor("leave", room: "team:1")?.data["id"]?.string == "bob")
        #expect(ann.system("kicked", room: "team:1").isEmpty)
    }
}

extension HostileRoomTests {
    /// Redis's keys whose names start with `prefix`.
    static func redisKeys(_ redis: PrivateRedis, _ prefix: String) throws -> [String] {
        (try RedisConnection(endpoint: redis.endpoint).command("KEYS", prefix + "*").array ?? []).compactMap(\.string)
    }

    @Test("an anonymous member joining 300 public rooms on a store bounded to 50 leaves at most 50 rooms' keys in Redis; a room keeping events stays", .timeLimit(.minutes(1)))
    func redisRoomsBounded() throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint), maxRooms: 50)
        // Past the request budget (as several connections would be).
        let fixture = try ServerFixture { $0.roomStore = store; $0.roomRequestsPerSecond = 10_000 }
        let grant = RoomRule(history: 10, isPublic: true)
        try fixture.server.hub.publishRoom(appID: "1", room: "news:kept", event: "e", data: "{}", rule: grant)
        let client = try RoomClient(fixture)
        let token = Tokens.make(room: "news:{id}", user: nil, rule: grant)
        var refused = 0
        for index in 0..<300 {
            if client.joined("news:\(index)", token: token) == nil { refused += 1 }
            client.send(.roomLeave, RoomLeaveRequest(room: "news:\(index)"))
        }
        #expect(refused == 0, "least recently used empty rooms make room: \(Set(client.frames.filter { $0.event == "error" }.map { $0.data["code"]?.string ?? "" }))")
        let metas = try Self.redisKeys(redis, "rt:{").filter { $0.hasSuffix(":meta") }
        #expect(metas.count <= 50, "\(metas.count) rooms kept in Redis")
        #expect(metas.contains { $0.contains("news:kept") })
        #expect(try RedisConnection(endpoint: redis.endpoint).command("ZCARD", RedisRoomStore.roomsKey(app: "1")).integer ?? 0 <= 50)
    }

    @Test("a Redis store whose every room keeps events refuses a new room with tooManyRooms and keeps no key of it")
    func redisFullOfEvents() throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint), maxRooms: 3)
        for room in 0..<3 { try store.append(app: "1", room: "r\(room)", event: "e", data: "1", from: nil, rule: RoomRule(history: 5), at: 0) }
        #expect(throws: RoomStoreError.tooManyRooms(limit: 3)) { try store.position(app: "1", room: "new", now: 1) }
        #expect(try Self.redisKeys(redis, "rt:{").allSatisfy { !$0.contains(":new}") })
        #expect(try store.position(app: "1", room: "r1", now: 2).id == 1, "existing rooms still answer")
    }
}

extension HostileRoomTests {
    @Test("a replay is paced apart from the read budget: after 1.8 MB of history pages this second, a resume still joins with its replay", .timeLimit(.minutes(1)))
    func replayChargedWhatItReads() throws {
        let fixture = try ServerFixture()
        let hub = fixture.server.hub
        let rule = RoomRule(history: 1000)
        let big = #"{"text":"\#(String(repeating: "x", count: 9000))"}"#
        for _ in 0..<200 { try hub.publishRoom(appID: "1", room: "big:3", event: "e", data: big, rule: rule) }
        let small = try hub.publishRoom(appID: "1", room: "small:1", event: "e", data: "{}", rule: rule)
        for _ in 0..<5 { try hub.publishRoom(appID: "1", room: "small:1", event: "e", data: "{}") }
        let client = try RoomClient(fixture)
        #expect(client.joined("big:3", token: Tokens.make(room: "big:3", user: "ann", rule: rule)) != nil)
        for index in 0..<2 { client.send(.roomHistory, RoomHistoryRequest(room: "big:3", request: "p\(index)", limit: 100)) }
        #expect(client.wait { $0.messages.filter { $0.event == "bird:room_history" }.count >= 2 })
        // 1.8 MB of the 3 MiB read budget spent: the replay is not charged to it.
        let resumed = client.joined("small:1", token: Tokens.make(room: "small:1", user: "ann", rule: rule), since: RoomPosition(epoch: small.epoch, id: small.record.id))
        #expect(resumed?["recovered"]?.bool == true)
        #expect(client.kept("small:1").count == 5)
    }
}

extension HostileRoomTests {
    @Test("on a cluster, an older token on a node that never saw the room cannot unseal, un-presence or uncap it: the rule issued last is kept in Redis", .timeLimit(.minutes(1)))
    func olderTokenOnAnotherNode() async throws {
        let cluster = try RedisNodes(count: 2)
        #expect(await cluster.ready())
        let (nodeA, nodeB) = (cluster.nodes[0], cluster.nodes[1])
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        let strict = RoomRule(history: 10, presence: true, maxMembers: 2, membersSend: true, sealed: true)
        let loose = RoomRule(history: 10, membersSend: true)
        let ann = try RoomClient(nodeA)
        #expect(ann.joined("vault:2", token: Tokens.make(room: "vault:2", user: "ann", rule: strict, now: now)) != nil)
        let older = { (user: String) in Tokens.make(room: "vault:2", user: user, rule: loose, now: now - 600_000) }
        // Ann's presence reaches the registry from A's lane, after her `joined`; eve's list is
        // read from there: wait for it (a loaded machine ran eve's read first).
        let probe = RedisConnection(endpoint: cluster.redis.endpoint)
        #expect(await eventually { ((try? probe.command("HLEN", "rt:{1:1:vault:2}:presence"))?.integer ?? 0) >= 1 })
        let eve = try RoomClient(nodeB)
        let joined = eve.joined("vault:2", token: older("eve"))
        #expect(Set(joined?["members"]?.array?.compactMap { $0["id"]?.string } ?? []) == ["ann", "eve"], "a presence room on B too: \(String(describing: joined))")
        eve.send(.roomSend, RoomSendRequest(room: "vault:2", event: "note", data: #"{"text":"plain"}"#))
        #expect(eve.waitFor("error", room: "vault:2")?.data["code"]?.string == "bad_request", "still sealed on B")
        let mallory = try RoomClient(nodeB)
        mallory.join("vault:2", token: older("mallory"))
        #expect(mallory.waitFor("error", room: "vault:2")?.data["code"]?.string == "full", "capped on B by both nodes' members")
        #expect(try nodeA.server.hub.roomHistory(appID: "1", room: "vault:2", before: nil, limit: 10).events.isEmpty)
    }
}
