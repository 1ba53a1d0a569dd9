import Foundation
import SystemSupport
import RealtimeProtocol
import RealtimeServer
import Testing

/// Rooms against the real server over real sockets (docs/rooms-protocol.md).
@Suite("Rooms on the server")
struct RoomServerTests {
    static let now = Int64(Date().timeIntervalSince1970 * 1000)

    struct Refusal: Sendable, CustomTestStringConvertible {
        var label: String
        var room: String
        var token: @Sendable () -> String
        var code: String
        var testDescription: String { label }
    }

    static let refusals: [Refusal] = [
        Refusal(label: "another secret", room: "order:1", token: { Tokens.make(room: "order:1", user: "u1", secret: "other-secret") }, code: "bad_signature"),
        Refusal(label: "not a JWT", room: "order:1", token: { "abc.def" }, code: "invalid_token"),
        Refusal(label: "alg none", room: "order:1", token: {
            let claims = #"{"exp":9999999999,"room":"order:1","sub":"u1"}"#
            return "eyJhbGciOiJub25lIn0.\(Data(claims.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")).x"
        }, code: "invalid_token"),
        Refusal(label: "expired", room: "order:1", token: { Tokens.make(room: "order:1", user: "u1", expiresIn: -1) }, code: "expired"),
        Refusal(label: "another room", room: "order:1", token: { Tokens.make(room: "order:2", user: "u1") }, code: "forbidden"),
        Refusal(label: "a pattern in a private token", room: "order:1", token: { Tokens.make(room: "order:{id}", user: "u1") }, code: "forbidden"),
        Refusal(label: "rule out of range", room: "order:1", token: { Tokens.make(room: "order:1", user: "u1", rule: RoomRule(history: 100_001)) }, code: "invalid_token"),
        Refusal(label: "invalid room name", room: "bad room", token: { Tokens.make(room: "bad room", user: "u1") }, code: "invalid_room"),
    ]

    @Test("a join is refused with its error code and the connection stays usable", arguments: refusals)
    func refusedJoin(_ refusal: Refusal) throws {
        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        client.join(refusal.room, token: refusal.token())
        let error = client.waitFor("error", room: refusal.room)
        #expect(error?.data["code"]?.string == refusal.code)
        #expect(client.system("joined", room: refusal.room).isEmpty)
        // Still connected: a valid join on the same socket works.
        #expect(client.joined("order:9", token: Tokens.make(room: "order:9", user: "u1")) != nil)
    }

    @Test("capacity admits a user already present and refuses a new one with full")
    func capacity() throws {
        let fixture = try ServerFixture()
        let rule = RoomRule(history: 10, maxMembers: 1)
        let first = try RoomClient(fixture)
        let again = try RoomClient(fixture)
        let other = try RoomClient(fixture)
        #expect(first.joined("game:1", token: Tokens.make(room: "game:1", user: "ann", rule: rule)) != nil)
        #expect(again.joined("game:1", token: Tokens.make(room: "game:1", user: "ann", rule: rule)) != nil)
        other.join("game:1", token: Tokens.make(room: "game:1", user: "bob", rule: rule))
        #expect(other.waitFor("error", room: "game:1")?.data["code"]?.string == "full")
        #expect(fixture.server.hub.roomMembers(appID: "1", room: "game:1").users == ["ann"])
    }

    @Test("events are kept with growing ids and times; from is nil for the app's server and the member for member sends")
    func keptEvents() throws {
        let fixture = try ServerFixture()
        let rule = RoomRule(history: 100, membersSend: true)
        let client = try RoomClient(fixture)
        #expect(client.joined("chat:1", token: Tokens.make(room: "chat:1", user: "ann", rule: rule)) != nil)
        for index in 1...3 { try fixture.server.hub.publishRoom(appID: "1", room: "chat:1", event: "note", data: #"{"n":\#(index)}"#) }
        // A member cannot name the sender: an extra "from" is ignored, the token's user is used.
        client.sendRaw(#"{"event":"bird:room_send","data":"{\"room\":\"chat:1\",\"event\":\"note\",\"data\":\"{\\\"n\\\":4}\",\"from\":\"mallory\"}"}"#)
        client.wait { $0.frames.filter { $0.id != nil }.count >= 4 }
        let kept = client.kept("chat:1")
        #expect(kept.map(\.id) == [1, 2, 3, 4])
        #expect(kept.map { $0.data["n"]?.number } == [1, 2, 3, 4])
        #expect(kept.map(\.from) == [nil, nil, nil, "ann"])
        let times = kept.compactMap(\.at)
        #expect(times.count == 4 && times == times.sorted() && abs(times[0] - Self.now) < 60_000)
        #expect(kept.allSatisfy { !$0.replayed })
    }

    @Test("reserved names are refused from members and from the HTTP API", arguments: Array(RoomSystemEvent.reserved).sorted())
    func reservedNames(_ name: String) async throws {
        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        #expect(client.joined("chat:1", token: Tokens.make(room: "chat:1", user: "ann", rule: RoomRule(history: 10, membersSend: true))) != nil)
        client.send(.roomSend, RoomSendRequest(room: "chat:1", event: name, data: "{}"))
        #expect(client.waitFor("error", room: "chat:1")?.data["code"]?.string == "not_allowed")
        let (status, _) = try await fixture.api("POST", "/apps/1/room_events", body: #"{"name":"\#(name)","room":"chat:1","data":"{}"}"#)
        #expect(status == 400)
        #expect(client.kept("chat:1").isEmpty)
        // Only the server's own frames of that name: one `joined` (ours), one `error` (the
        // refusal), at most one `count`; nothing relayed from the member or the API.
        let allowed = ["joined": 1, "error": 1, "count": 1][name] ?? 0
        #expect(client.frames.filter { $0.room == "chat:1" && $0.event == name }.count <= allowed)
        if name == "error" { #expect(client.system("error", room: "chat:1").allSatisfy { $0.data["code"]?.string == "not_allowed" }) }
    }

    @Test("members cannot send into a room whose rule keeps sending to the app's server")
    func serverOnlyRoom() throws {
        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        #expect(client.joined("order:1", token: Tokens.make(room: "order:1", user: "ann")) != nil)
        client.send(.roomSend, RoomSendRequest(room: "order:1", event: "updated", data: "{}"))
        #expect(client.waitFor("error", room: "order:1")?.data["code"]?.string == "not_allowed")
        client.send(.roomSend, RoomSendRequest(room: "order:2", event: "updated", data: "{}"))
        #expect(client.waitFor("error", room: "order:2")?.data["code"]?.string == "not_joined")
    }

    @Test("resume after each of five drops replays exactly the missed events, marked, then live ones, while publishing at 1 kHz")
    func resumeUnderLoad() throws {
        let fixture = try ServerFixture()
        let hub = fixture.server.hub
        let room = "ticker:1"
        let token = Tokens.make(room: room, user: "ann")
        let total = 2500
        let publisher = Thread {
            for index in 1...total {
                _ = try? hub.publishRoom(appID: "1", room: room, event: "tick", data: #"{"n":\#(index)}"#)
                usleep(1000)
            }
        }
        var client = try RoomClient(fixture)
        var position = try #require(client.joined(room, token: token)?.position)
        let startID = position.id
        publisher.start()
        var seen: [UInt64] = []
        for _ in 1...5 {
            // Let some events arrive live, then drop the socket without a close frame.
            let base = seen.count
            client.wait { $0.frames.filter { $0.id != nil }.count >= 150 }
            client.abort()
            let kept = client.kept(room)
            seen += kept.compactMap(\.id)
            position = RoomPosition(epoch: position.epoch, id: kept.last?.id ?? position.id)
            #expect(seen.count > base)
            usleep(80_000)   // about 80 events published while away
            client = try RoomClient(fixture)
            let joined = try #require(client.joined(room, token: token, since: position))
            #expect(joined["recovered"]?.bool == true)
            // Replayed events come before `joined`, live ones after it.
            let frames = client.frames.filter { $0.room == room }
            let joinedIndex = try #require(frames.firstIndex { $0.event == "joined" })
            #expect(frames[..<joinedIndex].allSatisfy { $0.replayed })
            #expect(frames[..<joinedIndex].count > 10)
        }
        client.wait(timeout: .seconds(20)) { $0.frames.last(where: { $0.id != nil })?.id == UInt64(total) + startID }
        let kept = client.kept(room)
        #expect(kept.filter { $0.replayed }.allSatisfy { $0.id! <= kept.first { !$0.replayed }?.id ?? .max })
        seen += kept.compactMap(\.id)
        #expect(seen == Array((startID + 1)...(startID + UInt64(total))), "every id once, in order")
    }

    @Test("a room joined before any event was published resumes from id 0")
    func resumeEmptyRoom() throws {
        let fixture = try ServerFixture()
        let token = Tokens.make(room: "order:7", user: "ann")
        var client = try RoomClient(fixture)
        let position = try #require(client.joined("order:7", token: token)?.position)
        #expect(position.id == 0)
        client.close()
        for index in 1...5 { try fixture.server.hub.publishRoom(appID: "1", room: "order:7", event: "updated", data: #"{"n":\#(index)}"#) }
        client = try RoomClient(fixture)
        let joined = client.joined("order:7", token: token, since: position)
        #expect(joined?["recovered"]?.bool == true)
        #expect(joined?["id"]?.number == 5)
        #expect(client.kept("order:7").map(\.id) == [1, 2, 3, 4, 5])
        #expect(client.kept("order:7").allSatisfy { $0.replayed })
    }

    @Test("a position older than the span or from another epoch: the gap told first with its exact ids, then every missed event still kept; ahead of the stream: reported, nothing replayed; an idle room whose events expired still resumes")
    func gaps() throws {
        let wall = ManualWallClock()
        let fixture = try ServerFixture { $0.wallClock = wall.closure }
        let hub = fixture.server.hub
        let rule = RoomRule(history: 100, span: 600)
        let token = Tokens.make(room: "feed:1", user: "ann", rule: rule, expiresIn: 86_400, now: wall.now)
        let first = try RoomClient(fixture)
        let position = try #require(first.joined("feed:1", token: token)?.position)
        for _ in 1...3 { try hub.publishRoom(appID: "1", room: "feed:1", event: "post", data: "{}") }
        first.wait { $0.frames.filter { $0.id != nil }.count == 3 }
        first.close()

        // Idle past the span: the three events are gone, but nothing was missed after id 3.
        wall.advance(seconds: 700)
        var client = try RoomClient(fixture)
        var joined = client.joined("feed:1", token: token, since: RoomPosition(epoch: position.epoch, id: 3))
        #expect(joined?["recovered"]?.bool == true)
        #expect(client.system(RoomSystemEvent.gap, room: "feed:1").isEmpty)
        client.close()

        try hub.publishRoom(appID: "1", room: "feed:1", event: "post", data: "{}")
        let fourth = wall.now
        // (since, reason, the gap's data, what is replayed after it)
        let cases: [(RoomPosition, String, JSONValue?, [UInt64])] = [
            (RoomPosition(epoch: position.epoch, id: 1), "expired",
             .object(["reason": .string("expired"), "epoch": .string(position.epoch), "first": .number(2), "last": .number(3),
                      "before": .number(Double(fourth))]), [4]),
            (RoomPosition(epoch: "another-epoch", id: 7), "epoch_changed",
             .object(["reason": .string("epoch_changed"), "epoch": .string(position.epoch), "first": .number(1), "last": .number(3),
                      "before": .number(Double(fourth)), "previous": .object(["epoch": .string("another-epoch"), "id": .number(7)])]), [4]),
            (RoomPosition(epoch: position.epoch, id: 99), "unknown_position", nil, []),
        ]
        for (since, reason, gap, replayed) in cases {
            client = try RoomClient(fixture)
            joined = client.joined("feed:1", token: token, since: since)
            #expect(joined?["recovered"]?.bool == false)
            #expect(joined?["reason"]?.string == reason)
            #expect(joined?["id"]?.number == 4)
            #expect(client.system(RoomSystemEvent.gap, room: "feed:1").map(\.data) == (gap.map { [$0] } ?? []), "\(reason)")
            #expect(client.kept("feed:1").compactMap(\.id) == replayed, "\(reason)")
            #expect(client.kept("feed:1").allSatisfy { $0.replayed })
            // In order: the gap, then the replay, then joined.
            let order = client.frames.filter { $0.room == "feed:1" }.map { $0.id.map { "#\($0)" } ?? $0.event }
            #expect(order == (gap == nil ? [] : ["gap"]) + replayed.map { "#\($0)" } + ["joined"], "\(order)")
            client.close()
        }
    }

    @Test("on one node, a room's stream dropped by the store while members are joined (its epoch changes): the members are told resync, never given the new epoch's ids as the old one's; their rejoin is told the gap")
    func epochChangeUnderMembers() throws {
        // Room for one stream only: publishing to another room evicts this one's (it keeps no events).
        let fixture = try ServerFixture { $0.roomStore = InMemoryRoomStore(maxRooms: 1) }
        let hub = fixture.server.hub
        let rule = RoomRule(history: 0)
        let token = Tokens.make(room: "tick:1", user: "ann", rule: rule)
        let client = try RoomClient(fixture)
        let position = try #require(client.joined("tick:1", token: token)?.position)
        for _ in 1...3 { try hub.publishRoom(appID: "1", room: "tick:1", event: "t", data: "{}", rule: rule) }
        client.wait { $0.frames.filter { $0.room == "tick:1" && $0.id != nil }.count == 3 }
        try hub.publishRoom(appID: "1", room: "other:1", event: "t", data: "{}", rule: rule)
        let again = try hub.publishRoom(appID: "1", room: "tick:1", event: "t", data: "{}", rule: rule)
        #expect(again.epoch != position.epoch && again.record.id == 1, "a new stream: ids from 1 again")
        client.wait { $0.frames.contains { $0.room == "tick:1" && $0.event == "error" } }
        #expect(client.system("error", room: "tick:1").first?.data["code"]?.string == "resync")
        #expect(client.kept("tick:1").map(\.id) == [1, 2, 3], "the new epoch's id 1 is not delivered as if of the old one")
        client.join("tick:1", token: token, since: RoomPosition(epoch: position.epoch, id: 3))
        client.wait { $0.frames.filter { $0.room == "tick:1" && $0.event == "joined" }.count == 2 }
        let rejoined = client.system(RoomSystemEvent.joined, room: "tick:1").last?.data
        #expect(rejoined?["reason"]?.string == "epoch_changed" && rejoined?["epoch"]?.string == again.epoch)
        let gap = client.system(RoomSystemEvent.gap, room: "tick:1").first?.data
        #expect(gap?["previous"]?["id"]?.number == 3 && gap?["first"]?.number == 1 && gap?["last"]?.number == 1, "\(String(describing: gap))")
    }

    @Test("--data keeps the rule the backend issued: after a restart, publishes that name no rule are kept by it (history 3), not by the default")
    func dataKeepsRules() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("rules-\(getpid())-\(UUID().uuidString).sqlite3").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let rule = RoomRule(history: 3)
        do {
            let store = try SQLiteRoomStore(path: path)
            let fixture = try ServerFixture { $0.roomStore = store }
            try fixture.server.hub.publishRoom(appID: "1", room: "few:1", event: "e", data: "{}", rule: rule)
            fixture.server.shutdown(grace: .zero)
        }
        let store = try SQLiteRoomStore(path: path)
        let fixture = try ServerFixture { $0.roomStore = store }
        for _ in 0..<6 { try fixture.server.hub.publishRoom(appID: "1", room: "few:1", event: "e", data: "{}") }
        let page = try store.page(app: "1", room: "few:1", before: nil, limit: 100, now: Int64(Date().timeIntervalSince1970 * 1000))
        #expect(page.events.map(\.id) == [5, 6, 7], "kept by the rule issued before the restart")
    }

    @Test("history pages 250 events in pages of 100, oldest first within a page, over the socket and the HTTP API")
    func paging() async throws {
        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        #expect(client.joined("log:1", token: Tokens.make(room: "log:1", user: "ann")) != nil)
        for index in 1...250 { try fixture.server.hub.publishRoom(appID: "1", room: "log:1", event: "line", data: #"{"n":\#(index)}"#) }
        var before: UInt64?
        var pages: [([UInt64], Bool)] = []
        for page in 1...3 {
            client.send(.roomHistory, RoomHistoryRequest(room: "log:1", request: "p\(page)", limit: 100, before: before))
            client.wait { $0.messages.contains { $0.event == "bird:room_history" && ($0.data ?? "").contains("\"p\(page)\"") } }
            let message = try #require(client.messages.last { $0.event == "bird:room_history" })
            let body = try message.decodeData([String: JSONValue].self)
            let ids = (body["events"]?.array ?? []).compactMap { $0["meta"]?["id"]?.number.map(UInt64.init) }
            pages.append((ids, body["more"]?.bool ?? false))
            before = ids.first
        }
        #expect(pages[0].0 == Array(151...250) && pages[0].1)
        #expect(pages[1].0 == Array(51...150) && pages[1].1)
        #expect(pages[2].0 == Array(1...50) && !pages[2].1)

        let (status, body) = try await fixture.api("GET", "/apps/1/rooms/log:1/history")
        #expect(status == 200)
        let page = try JSONDecoder().decode([String: JSONValue].self, from: Data(body.utf8))
        #expect(page["events"]?.array?.count == 50 && page["more"]?.bool == true)
        let (older, olderBody) = try await fixture.api("GET", "/apps/1/rooms/log:1/history?limit=100&before=51")
        #expect(older == 200 && olderBody.contains(#""more":false"#))
        let (tooMany, _) = try await fixture.api("GET", "/apps/1/rooms/log:1/history?limit=101")
        #expect(tooMany == 400)
    }

    @Test("a room that keeps no history answers no_history, over the socket and the HTTP API")
    func noHistory() async throws {
        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        #expect(client.joined("live:1", token: Tokens.make(room: "live:1", user: "ann", rule: RoomRule(history: 0))) != nil)
        try fixture.server.hub.publishRoom(appID: "1", room: "live:1", event: "x", data: "{}")
        client.send(.roomHistory, RoomHistoryRequest(room: "live:1", request: "h"))
        client.wait { $0.messages.contains { $0.event == "bird:room_history" } }
        let answer = try #require(client.messages.last { $0.event == "bird:room_history" }).decodeData([String: JSONValue].self)
        #expect(answer["error"]?["code"]?.string == "no_history")
        let (status, body) = try await fixture.api("GET", "/apps/1/rooms/live:1/history")
        #expect(status == 404 && body.contains("no_history"))
        // Live delivery still happened, with an id.
        #expect(client.kept("live:1").map(\.id) == [1])
    }

    @Test("presence announces join and leave once per user across two connections of one user")
    func presenceByUser() throws {
        let fixture = try ServerFixture()
        let rule = RoomRule(history: 10, presence: true)
        func token(_ user: String) -> String { Tokens.make(room: "team:1", user: user, rule: rule, info: .object(["name": .string(user.uppercased())])) }
        let ann = try RoomClient(fixture)
        #expect(ann.joined("team:1", token: token("ann")) != nil)
        let bob1 = try RoomClient(fixture)
        let joined = try #require(bob1.joined("team:1", token: token("bob")))
        #expect(joined["members"]?.array?.compactMap { $0["id"]?.string } == ["ann", "bob"])
        #expect(joined["members"]?.array?.first?["info"]?["name"]?.string == "ANN")
        #expect(ann.waitFor("join", room: "team:1")?.data["id"]?.string == "bob")
        let bob2 = try RoomClient(fixture)
        #expect(bob2.joined("team:1", token: token("bob")) != nil)
        bob2.close()
        usleep(200_000)
        #expect(ann.system("join", room: "team:1").count == 1)
        #expect(ann.system("leave", room: "team:1").isEmpty, "bob still has a connection")
        bob1.close()
        #expect(ann.waitFor("leave", room: "team:1")?.data["id"]?.string == "bob")
        #expect(ann.waitFor("count", room: "team:1", timeout: .seconds(3)) != nil)
    }

    @Test("binary values and sealed payloads survive the round trip unchanged")
    func binaryAndSealed() async throws {
        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        #expect(client.joined("files:1", token: Tokens.make(room: "files:1", user: "ann")) != nil)
        let bytes = (0...255).map { UInt8($0) }
        let data = #"{"blob":{"$binary":"\#(Data(bytes).base64EncodedString())"}}"#
        let (status, _) = try await fixture.api("POST", "/apps/1/room_events", body: try RealtimeMessage.jsonText(["name": "file", "room": "files:1", "data": data]))
        #expect(status == 200)
        let received = try #require(client.waitFor("file", room: "files:1"))
        #expect(received.data["blob"]?["$binary"]?.string.flatMap { Data(base64Encoded: $0) }.map(Array.init) == bytes)

        let sealed = RoomRule(history: 10, sealed: true)
        #expect(client.joined("vault:1", token: Tokens.make(room: "vault:1", user: "ann", rule: sealed)) != nil)
        let key = Crypto.randomBytes(32)
        let box = try SecretBox.seal(Array(#"{"secret":"42"}"#.utf8), key: key)
        try fixture.server.hub.publishRoom(appID: "1", room: "vault:1", event: "note", data: try RealtimeMessage.jsonText(box))
        let note = try #require(client.waitFor("note", room: "vault:1"))
        let opened = try SecretBox.open(EncryptedPayload(nonce: note.data["nonce"]?.string ?? "", ciphertext: note.data["ciphertext"]?.string ?? ""), key: key)
        #expect(String(decoding: opened, as: UTF8.self) == #"{"secret":"42"}"#)
        // Plain data is refused in a sealed room: the server never keeps it in clear.
        #expect(throws: RoomError.self) { try fixture.server.hub.publishRoom(appID: "1", room: "vault:1", event: "note", data: #"{"secret":"42"}"#) }
    }

    @Test("kick removes a user from a room on every connection with kicked")
    func kick() async throws {
        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        #expect(client.joined("chat:1", token: Tokens.make(room: "chat:1", user: "ann")) != nil)
        let (status, body) = try await fixture.api("POST", "/apps/1/rooms/chat:1/users/ann/kick", body: #"{"reason":"spam"}"#)
        #expect(status == 200 && body == #"{"kicked":1}"#)
        #expect(client.waitFor("kicked", room: "chat:1")?.data["reason"]?.string == "spam")
        try fixture.server.hub.publishRoom(appID: "1", room: "chat:1", event: "x", data: "{}")
        usleep(100_000)
        #expect(client.kept("chat:1").isEmpty)
    }

    @Test("a token that expires while joined ends the membership with expired unless refreshed")
    func expiryWhileJoined() throws {
        let wall = ManualWallClock()
        let fixture = try ServerFixture { $0.wallClock = wall.closure }
        let refreshed = try RoomClient(fixture)
        let lapsed = try RoomClient(fixture)
        #expect(refreshed.joined("order:1", token: Tokens.make(room: "order:1", user: "ann", expiresIn: 60, now: wall.now)) != nil)
        #expect(lapsed.joined("order:1", token: Tokens.make(room: "order:1", user: "bob", expiresIn: 60, now: wall.now)) != nil)
        refreshed.send(.roomRefresh, RoomRefreshRequest(room: "order:1", token: Tokens.make(room: "order:1", user: "ann", expiresIn: 600, now: wall.now)))
        usleep(100_000)
        wall.advance(seconds: 61)
        #expect(lapsed.waitFor("error", room: "order:1", timeout: .seconds(3))?.data["code"]?.string == "expired")
        #expect(refreshed.system("error", room: "order:1").isEmpty)
        #expect(fixture.server.hub.roomMembers(appID: "1", room: "order:1").users == ["ann"])
    }

    @Test("room requests past the per-second budget are answered rate_limited and not done")
    func requestBudget() throws {
        let fixture = try ServerFixture { $0.roomRequestsPerSecond = 3 }
        let client = try RoomClient(fixture)
        for index in 1...5 { client.join("order:\(index)", token: Tokens.make(room: "order:\(index)", user: "ann")) }
        client.wait { $0.frames.count >= 5 }
        #expect(client.frames.filter { $0.event == "joined" }.count == 3)
        #expect(client.frames.filter { $0.event == "error" }.map { $0.data["code"]?.string } == ["rate_limited", "rate_limited"])
        #expect(fixture.server.hub.roomMembers(appID: "1", room: "order:5").connections == 0)
    }

    @Test("a rejoin on the same socket cannot change who the member is")
    func rejoinAsAnotherUser() async throws {
        let fixture = try ServerFixture()
        let rule = RoomRule(history: 10, presence: true, maxMembers: 3, membersSend: true)
        let client = try RoomClient(fixture)
        #expect(client.joined("chat:7", token: Tokens.make(room: "chat:7", user: "mallory1", rule: rule)) != nil)
        client.join("chat:7", token: Tokens.make(room: "chat:7", user: "mallory2", rule: rule))
        #expect(client.waitFor("error", room: "chat:7")?.data["code"]?.string == "forbidden")
        #expect(fixture.server.hub.roomMembers(appID: "1", room: "chat:7").users == ["mallory1"])
        let (_, kicked) = try await fixture.api("POST", "/apps/1/rooms/chat:7/users/mallory1/kick")
        #expect(kicked == #"{"kicked":1}"#)
        #expect(fixture.server.hub.roomMembers(appID: "1", room: "chat:7").connections == 0)
    }

    @Test("data that is not JSON by RFC 8259 is refused from members and the HTTP API", arguments: [
        #"{"t":"poison",}"#, "[1,]", "[true,]", "\u{FEFF}{}", "{'a':1}", "NaN", "01", "[1 2]", String(repeating: "[", count: 65) + String(repeating: "]", count: 65),
    ])
    func strictJSON(_ data: String) async throws {
        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        #expect(client.joined("chat:1", token: Tokens.make(room: "chat:1", user: "ann", rule: RoomRule(history: 10, membersSend: true))) != nil)
        client.send(.roomSend, RoomSendRequest(room: "chat:1", event: "m", data: data))
        #expect(client.waitFor("error", room: "chat:1")?.data["code"]?.string == "bad_request")
        let (status, _) = try await fixture.api("POST", "/apps/1/room_events", body: try RealtimeMessage.jsonText(["name": "m", "room": "chat:1", "data": data]))
        #expect(status == 400)
        #expect(client.kept("chat:1").isEmpty)
    }

    @Test("a member that stops reading while it resumes 27 MB: the server queues at most 512 KiB and a page for it, never drops it as a slow consumer; reading again, it gets every event once, in order", .timeLimit(.minutes(1)))
    func replayFlowControl() throws {
        let fixture = try ServerFixture()
        let hub = fixture.server.hub
        let rule = RoomRule(history: 3000)
        let start = try Self.backlog(hub, room: "big:2", rule: rule, events: 3000, bytes: 9000)
        let client = try RoomClient(fixture)
        client.setReceiving(false)
        client.join("big:2", token: Tokens.make(room: "big:2", user: "ann", rule: rule), since: start)
        // Two seconds unread: the kernel's buffers fill, then the server's queue stops growing.
        var largest = 0
        let until = ContinuousClock.now + .seconds(2)
        while ContinuousClock.now < until {
            largest = max(largest, Self.gauge(hub.metricsText(), "realtime_send_queue_largest_bytes"))
            usleep(10_000)
        }
        #expect(largest > 0, "the server queued nothing: the test did not stop the client reading")
        // `replayQueuedBytes` (512 KiB) and a page of frames (about 256 KiB of records, a little more framed).
        #expect(largest <= 512 * 1024 + 2 * 256 * 1024, "\(largest) bytes queued")
        client.setReceiving(true)
        #expect(client.wait { $0.frames.contains { $0.room == "big:2" && $0.event == "joined" } })
        #expect(client.kept("big:2").map(\.id) == Array((start.id + 1)...(start.id + 3000)).map(Optional.some))
        #expect(hub.metrics.slowConsumersDropped.load(ordering: .relaxed) == 0 && client.closeCode == nil)
    }

    /// Where a test's nodes keep rooms.
    enum Topology: String, CaseIterable, CustomTestStringConvertible, Sendable {
        case oneNode = "one node, in memory"
        case twoNodes = "two nodes over Redis, the member on the other node"
        var testDescription: String { rawValue }
    }

    @Test("events published during a streamed replay of 6 MB come once and in order: the first of them in the replay's later pages, then joined, then the rest live", .timeLimit(.minutes(1)), arguments: Topology.allCases)
    func liveDuringReplay(_ topology: Topology) async throws {
        let cluster = topology == .twoNodes ? try RedisNodes(count: 2) : nil
        if let cluster { #expect(await cluster.ready()) }
        let publisher = try cluster?.nodes[0] ?? ServerFixture()
        let memberNode = cluster?.nodes[1] ?? publisher
        let hub = publisher.server.hub
        let rule = RoomRule(history: 10_000)
        let start = try Self.backlog(hub, room: "busy:1", rule: rule, events: 6000, bytes: 1000)
        let client = try RoomClient(memberNode)
        client.join("busy:1", token: Tokens.make(room: "busy:1", user: "ann", rule: rule), since: start)
        for index in 0..<300 {
            try hub.publishRoom(appID: "1", room: "busy:1", event: "e", data: #"{"live":\#(index)}"#)
            try await Task.sleep(for: .milliseconds(2))
        }
        let total = 6300
        #expect(client.wait(timeout: .seconds(30)) { seen in
            seen.frames.contains { $0.event == "joined" } && seen.frames.filter { $0.room == "busy:1" && $0.id != nil }.count >= total
        })
        let frames = client.frames.filter { $0.room == "busy:1" && ($0.id != nil || $0.event == "joined") }
        let ids = frames.compactMap(\.id)
        #expect(ids == Array((start.id + 1)...(start.id + UInt64(total))), "\(ids.count) events, first \(String(describing: ids.first)), last \(String(describing: ids.last))")
        let joinedAt = try #require(frames.firstIndex { $0.event == "joined" })
        #expect(joinedAt > 6000 && frames[..<joinedAt].allSatisfy(\.replayed) && frames[(joinedAt + 1)...].allSatisfy { !$0.replayed },
                "joined after \(joinedAt) replayed events")
        #expect(client.system(RoomSystemEvent.gap, room: "busy:1").isEmpty && client.closeCode == nil)
    }

    @Test("a full room refuses a new member before a long replay, not after it: full, and no replayed event", .timeLimit(.minutes(1)))
    func fullBeforeReplay() throws {
        let fixture = try ServerFixture()
        let hub = fixture.server.hub
        let rule = RoomRule(history: 1000, maxMembers: 1)
        let start = try Self.backlog(hub, room: "solo:1", rule: rule, events: 100, bytes: 9000)
        let ann = try RoomClient(fixture)
        #expect(ann.joined("solo:1", token: Tokens.make(room: "solo:1", user: "ann", rule: rule)) != nil)
        let bob = try RoomClient(fixture)
        bob.join("solo:1", token: Tokens.make(room: "solo:1", user: "bob", rule: rule), since: start)
        #expect(bob.waitFor("error", room: "solo:1")?.data["code"]?.string == "full")
        #expect(bob.kept("solo:1").isEmpty, "\(bob.kept("solo:1").count) replayed to a member the room refused")
    }

    @Test("a rule the app server publishes while a long replay streams is not rolled back by the replay's join", .timeLimit(.minutes(1)))
    func ruleDuringReplay() throws {
        let fixture = try ServerFixture()
        let hub = fixture.server.hub
        let open = RoomRule(history: 3000, membersSend: true)
        let start = try Self.backlog(hub, room: "rules:1", rule: open, events: 1000, bytes: 9000)
        let ann = try RoomClient(fixture)
        #expect(ann.joined("rules:1", token: Tokens.make(room: "rules:1", user: "ann", rule: open)) != nil)
        // Bob's replay (9 MB) waits on his socket while he does not read.
        let bob = try RoomClient(fixture)
        bob.setReceiving(false)
        bob.join("rules:1", token: Tokens.make(room: "rules:1", user: "bob", rule: open), since: start)
        usleep(300_000)
        // The app server closes the room to members' sends, a second later than the tokens.
        sleep(1)
        try hub.publishRoom(appID: "1", room: "rules:1", event: "closed", data: "{}", rule: RoomRule(history: 3000, membersSend: false))
        ann.send(.roomSend, RoomSendRequest(room: "rules:1", event: "note", data: "{}"))
        #expect(ann.waitFor("error", room: "rules:1")?.data["code"]?.string == "not_allowed")
        bob.setReceiving(true)
        #expect(bob.wait(timeout: .seconds(30)) { $0.frames.contains { $0.room == "rules:1" && $0.event == "joined" } })
        ann.send(.roomSend, RoomSendRequest(room: "rules:1", event: "note", data: "{}"))
        #expect(ann.waitFor("error", room: "rules:1", count: 2)?.data["code"]?.string == "not_allowed", "still closed after bob's joined")
        #expect(bob.kept("rules:1").count == 1001)
    }

    @Test("a client resuming 30 rooms of 1 MB at once (200 events of 5 KB each) while it does not read for 2 s: one stream looks at its socket, the others wait parked; never dropped as a slow consumer, every event of each room once, in order", .timeLimit(.minutes(1)))
    func manyRoomsResumeAtOnce() throws {
        let fixture = try ServerFixture()
        let hub = fixture.server.hub
        let rule = RoomRule(history: 1000)
        var starts: [String: RoomPosition] = [:]
        for index in 0..<30 {
            starts["many:\(index)"] = try Self.backlog(hub, room: "many:\(index)", rule: rule, events: 200, bytes: 5000)
        }
        let client = try RoomClient(fixture)
        client.setReceiving(false)
        for (room, start) in starts { client.join(room, token: Tokens.make(room: room, user: "ann", rule: rule), since: start) }
        usleep(2_000_000)
        // While it does not read, one of its 30 streams looks at its socket (5, 10, 20 … 160 ms
        // apart: about 17 looks in 2 s); the others wait parked. Each looking for itself made
        // about 30 times as many.
        let waits = hub.metrics.replayWaits.load(ordering: .relaxed)
        #expect(waits > 0 && waits <= 60, "\(waits) looks at a full socket in 2 s")
        client.setReceiving(true)
        let settled = client.wait(timeout: .seconds(40)) { $0.frames.filter { $0.event == "joined" }.count == 30 || $0.closed != nil }
        #expect(settled, "joined \(client.frames.filter { $0.event == "joined" }.count), errors \(client.frames.filter { $0.event == "error" }.map { $0.data["code"]?.string ?? "" }), kept \(client.frames.filter { $0.id != nil }.count)")
        #expect(client.closeCode == nil && hub.metrics.slowConsumersDropped.load(ordering: .relaxed) == 0)
        for (room, start) in starts {
            #expect(client.kept(room).map(\.id) == Array((start.id + 1)...(start.id + 200)).map(Optional.some), "\(room)")
        }
    }

    /// Publishes a first event (`{}`) with `rule`, then `events` more of about `bytes` bytes of
    /// text each, into `room` through the hub.
    ///
    /// - Returns: the position of the first event: a resume from it misses the `events` after.
    static func backlog(_ hub: RealtimeHub, room: String, rule: RoomRule, events: Int, bytes: Int) throws -> RoomPosition {
        let first = try hub.publishRoom(appID: "1", room: room, event: "e", data: "{}", rule: rule)
        let data = #"{"text":"\#(String(repeating: "x", count: bytes))"}"#
        for _ in 0..<events { try hub.publishRoom(appID: "1", room: room, event: "e", data: data) }
        return RoomPosition(epoch: first.epoch, id: first.record.id)
    }

    static func gauge(_ metrics: String, _ name: String) -> Int {
        metrics.split(separator: "\n").first { $0.hasPrefix(name + " ") }.flatMap { Int($0.split(separator: " ").last ?? "") } ?? 0
    }

    @Test("a replay of 2.7 MB streams whole in pages: no gap, every missed event once, in order, marked replayed, then joined recovered; a second one in the same second is paced, not refused; the connection kept", .timeLimit(.minutes(1)))
    func replayStreamsWhole() throws {
        let fixture = try ServerFixture()
        let hub = fixture.server.hub
        let rule = RoomRule(history: 1000)
        let start = try Self.backlog(hub, room: "big:1", rule: rule, events: 300, bytes: 9000)
        let token = Tokens.make(room: "big:1", user: "ann", rule: rule)
        let client = try RoomClient(fixture)
        let joined = client.joined("big:1", token: token, since: start)
        #expect(joined?["recovered"]?.bool == true && joined?["reason"] == nil, "\(String(describing: joined))")
        #expect(client.system(RoomSystemEvent.gap, room: "big:1").isEmpty)
        let kept = client.kept("big:1")
        #expect(kept.map(\.id) == Array((start.id + 1)...(start.id + 300)).map(Optional.some), "\(kept.count) replayed")
        #expect(kept.allSatisfy { $0.replayed })
        // The replay came before joined, and a live event after it. (The once-a-second `count`
        // may come after joined at any time: under ThreadSanitizer it came before this look.)
        let order = client.frames.filter { $0.room == "big:1" && $0.event != RoomSystemEvent.count }
            .map { $0.event == "joined" ? "joined" : $0.id.map { _ in "event" } ?? $0.event }
        #expect(order.last == "joined" && order.dropLast().allSatisfy { $0 == "event" }, "\(order.suffix(3))")
        try hub.publishRoom(appID: "1", room: "big:1", event: "e", data: "{}")
        #expect(client.wait { $0.frames.filter { $0.room == "big:1" && $0.id != nil }.count == 301 })
        #expect(client.kept("big:1").last?.replayed == false)
        // Two more resumes from as far back on a fresh connection (5.4 MB in a second): both
        // whole, the second paced by the replay budget, neither refused.
        let resumer = try RoomClient(fixture)
        for _ in 0..<2 {
            let again = resumer.joined("big:1", token: token, since: start)
            #expect(again?["recovered"]?.bool == true, "\(String(describing: again))")
        }
        #expect(resumer.kept("big:1").count == 2 * 301, "\(resumer.kept("big:1").count)")
        #expect(client.closeCode == nil && resumer.closeCode == nil, "still connected")
    }
}
