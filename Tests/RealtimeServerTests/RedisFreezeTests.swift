import Foundation
import RealtimeProtocol
import RealtimeServer
import TestSupport
import Testing

/// A node whose Redis stops answering (SIGSTOP: what a fork for a snapshot, a failover or a
/// network stall does) must go on serving everything that needs no Redis (issue 31). Each test
/// freezes a real private `redis-server` and pings over a real socket meanwhile.
@Suite("The node while Redis is frozen")
struct RedisFreezeTests {
    /// A client subscribed to a plain channel: it needs nothing of Redis.
    static func channelClient(_ fixture: ServerFixture) throws -> RoomClient {
        let client = try RoomClient(fixture)
        client.sendRaw(#"{"event":"bird:subscribe","data":{"channel":"news"}}"#)
        #expect(client.wait { $0.messages.contains { $0.event == "bird_internal:subscription_succeeded" } })
        return client
    }

    @Test("a channel client's ping stays under 50 ms through a 4 s freeze of the node's Redis while a room with a member is quiet: the sweep compares quiet rooms with the store holding no lock (issue 31)", .timeLimit(.minutes(1)))
    func pingDuringRedisFreezeQuietRoom() async throws {
        let node = try RedisNodes()
        let fixture = node.fixture
        #expect(await node.ready())
        let client = try Self.channelClient(fixture)
        let member = try RoomClient(fixture)
        #expect(member.joined("chat:1", token: Tokens.make(room: "chat:1", user: "ann", rule: RoomRule(history: 100))) != nil)
        // An event that came back over the bus: the node follows the room, confirmed.
        try fixture.server.hub.publishRoom(appID: "1", room: "chat:1", event: "m", data: "{}")
        #expect(member.waitFor("m", room: "chat:1") != nil)
        node.freeze()
        let frozen = ContinuousClock.now
        var roundTrips: [Duration] = []
        // Past fanoutCheckInterval (2 s) of quiet: the sweep compares the room with the store.
        while ContinuousClock.now - frozen < .seconds(4) {
            roundTrips += HostileRoomTests.pingRoundTrips(client)
            try await Task.sleep(for: .milliseconds(50))
        }
        node.thaw()
        let slowest = roundTrips.max() ?? .zero
        #expect(slowest < .milliseconds(50 * Sanitizers.slowdown), "the slowest of \(roundTrips.count) pings took \(slowest)")
        // The room still delivers once Redis answers.
        #expect(await eventually { fixture.server.hub.isFanoutHealthy })
        try fixture.server.hub.publishRoom(appID: "1", room: "chat:1", event: "m", data: "{}")
        #expect(member.waitFor("m", room: "chat:1", count: 2) != nil)
    }

    @Test("through a 3 s freeze of the node's Redis while a member sends into a room every 150 ms and others join rooms: a channel client's ping stays under 50 ms; every send is kept once after it, and the member that stays joined gets every one not refused once, in order (issue 31)", .timeLimit(.minutes(1)))
    func pingDuringRedisFreezeWithRoomTraffic() async throws {
        let node = try RedisNodes()
        let fixture = node.fixture
        #expect(await node.ready())
        let pinger = try Self.channelClient(fixture)
        let rule = RoomRule(history: 1000, membersSend: true)
        let listener = try RoomClient(fixture)
        #expect(listener.joined("chat:1", token: Tokens.make(room: "chat:1", user: "ann", rule: rule)) != nil)
        let sender = try RoomClient(fixture)
        let start = try #require(sender.joined("chat:1", token: Tokens.make(room: "chat:1", user: "bob", rule: rule)))
        let position = RoomPosition(epoch: try #require(start["epoch"]?.string), id: UInt64(try #require(start["id"]?.number)))
        let joiners = try (0..<3).map { _ in try RoomClient(fixture) }

        node.freeze()
        let frozen = ContinuousClock.now
        var roundTrips: [Duration] = []
        var sent = 0
        var tick = 0
        while ContinuousClock.now - frozen < .seconds(3) {
            // Every third tick: under the 10 client events a second a connection may send.
            if tick % 3 == 0 {
                sender.send(.roomSend, RoomSendRequest(room: "chat:1", event: "m", data: #"{"n":\#(sent)}"#))
                sent += 1
            }
            tick += 1
            if tick == 20 {
                // A join of a new room, a resume of the busy one, a join of the busy one.
                joiners[0].join("quiet:1", token: Tokens.make(room: "quiet:1", user: "cy", rule: rule))
                joiners[1].join("chat:1", token: Tokens.make(room: "chat:1", user: "di", rule: rule), since: position)
                joiners[2].join("chat:1", token: Tokens.make(room: "chat:1", user: "ed", rule: rule))
            }
            roundTrips += HostileRoomTests.pingRoundTrips(pinger)
            try await Task.sleep(for: .milliseconds(50))
        }
        node.thaw()
        let slowest = roundTrips.max() ?? .zero
        #expect(slowest < .milliseconds(50 * Sanitizers.slowdown), "the slowest of \(roundTrips.count) pings took \(slowest)")

        // Every send is kept once Redis answers, or refused with the retriable store_full.
        func refusals(_ frames: [RoomFrameSeen]) -> Int { frames.filter { $0.room == "chat:1" && $0.event == "error" }.count }
        func numbers(_ frames: [RoomFrameSeen]) -> [Int] {
            frames.filter { $0.room == "chat:1" && $0.event == "m" }.compactMap { $0.data["n"]?.number.map(Int.init) }
        }
        #expect(sender.wait { numbers($0.frames).count + refusals($0.frames) >= sent })
        let errors = sender.frames.filter { $0.room == "chat:1" && $0.event == "error" }
        // The store sends an append again when the freeze outlasts the connection's deadline
        // (2 s), with the same token: none is refused.
        #expect(errors.isEmpty, "\(errors.count) of \(sent) sends refused: \(errors.map(\.data))")
        // The member that stayed joined: each event once, in the order sent, ids without a gap.
        let kept = numbers(sender.frames)
        #expect(listener.wait { numbers($0.frames) == kept })
        let ids = listener.kept("chat:1").map { $0.id ?? 0 }
        #expect(ids == Array(ids.sorted()) && Set(ids).count == ids.count && ids.count == (ids.last ?? 0) - (ids.first ?? 0) + 1, "\(ids)")
        #expect(kept == kept.sorted() && Set(kept).count == kept.count, "\(kept)")
        #expect(kept.count == sent)
        // The joins made during the freeze are answered after it: joined, or a retriable refusal.
        for (joiner, room) in zip(joiners, ["quiet:1", "chat:1", "chat:1"]) {
            #expect(joiner.wait { frames in frames.frames.contains { $0.room == room && ($0.event == "joined" || $0.event == "error") } })
            let answer = joiner.frames.first { $0.room == room && ($0.event == "joined" || $0.event == "error") }
            #expect(answer?.event == "joined" || answer?.data["code"]?.string == "store_full", "\(String(describing: answer))")
        }
        // The resume got every event after its position once, replayed then live, in order.
        #expect(joiners[1].wait { numbers($0.frames).count >= kept.count })
        #expect(numbers(joiners[1].frames) == kept)
    }

    @Test("with the room lane at its bound while Redis is frozen, the connection holding it has its further sends refused with the retriable store_full and counted, a connection that used the lane less takes the place of its newest; those admitted are kept once Redis answers, in order (issues 31, 48)", .timeLimit(.minutes(1)))
    func laneBoundDuringFreeze() async throws {
        let node = try RedisNodes { $0.roomLaneBacklog = 3 }
        let fixture = node.fixture
        let hub = fixture.server.hub
        #expect(await node.ready())
        let rule = RoomRule(history: 100, membersSend: true)
        let sender = try RoomClient(fixture)
        #expect(sender.joined("chat:1", token: Tokens.make(room: "chat:1", user: "bob", rule: rule)) != nil)
        let joiner = try RoomClient(fixture)
        node.freeze()
        for index in 0..<6 {
            sender.send(.roomSend, RoomSendRequest(room: "chat:1", event: "m", data: #"{"n":\#(index)}"#))
            try await Task.sleep(for: .milliseconds(150))
        }
        // The first send (or the node's own work) waits on Redis, three wait for the lane: the
        // rest are refused.
        func refusals(_ frames: [RoomFrameSeen]) -> [RoomFrameSeen] { frames.filter { $0.room == "chat:1" && $0.event == "error" } }
        #expect(sender.wait { refusals($0.frames).count >= 2 })
        let before = refusals(sender.frames).count
        // The joiner has used the lane less than the sender (whose join it ran): its join takes
        // the place of the sender's newest send, refused for it.
        joiner.join("chat:2", token: Tokens.make(room: "chat:2", user: "cy", rule: rule))
        #expect(sender.wait { refusals($0.frames).count == before + 1 })
        node.thaw()
        #expect(joiner.wait { $0.frames.contains { $0.room == "chat:2" && $0.event == "joined" } })
        // Every send is kept or refused: the first ones kept, in the order sent, once each; the
        // rest refused with store_full, each counted.
        func numbers(_ frames: [RoomFrameSeen]) -> [Int] {
            frames.filter { $0.room == "chat:1" && $0.event == "m" }.compactMap { $0.data["n"]?.number.map(Int.init) }
        }
        #expect(sender.wait { numbers($0.frames).count + refusals($0.frames).count >= 6 })
        let kept = numbers(sender.frames)
        let refused = refusals(sender.frames)
        #expect(refused.count >= 3 && refused.allSatisfy { $0.data["code"]?.string == "store_full" }, "\(refused.map(\.data))")
        #expect(kept == Array(0..<(6 - refused.count)), "\(kept); \(refused.map(\.data))")
        let counted = hub.metricsText().split(separator: "\n").first { $0.hasPrefix("realtime_room_lane_refused_total ") }
        #expect(counted.flatMap { Int($0.split(separator: " ")[1]) } ?? 0 >= refused.count, "\(String(describing: counted))")
        // Once the lane drains, a join is admitted again (what the Swift client's retry finds).
        var admitted = false
        for _ in 0..<20 where !admitted {
            admitted = try RoomClient(fixture).joined("chat:2", token: Tokens.make(room: "chat:2", user: "cy", rule: rule)) != nil
            if !admitted { try await Task.sleep(for: .milliseconds(250)) }
        }
        #expect(admitted)
    }

    @Test("while room requests wait on a frozen Redis: a kick removes a join on its way, a member that leaves after sending is refused not_joined and its event not kept, and a leave then a second join is answered once, for the second (issue 31)", .timeLimit(.minutes(1)))
    func requestsChangedWhileWaiting() async throws {
        let node = try RedisNodes()
        let fixture = node.fixture
        let hub = fixture.server.hub
        #expect(await node.ready())
        let rule = RoomRule(history: 100, membersSend: true)
        let holder = try RoomClient(fixture)
        #expect(holder.joined("chat:1", token: Tokens.make(room: "chat:1", user: "dee", rule: rule)) != nil)
        let leaver = try RoomClient(fixture)
        #expect(leaver.joined("chat:1", token: Tokens.make(room: "chat:1", user: "bob", rule: rule)) != nil)
        let kicked = try RoomClient(fixture)
        let rejoiner = try RoomClient(fixture)
        node.freeze()
        // The first send waits on Redis, and every request after it on the lane. The clients'
        // connections may be served by different service loops: the others start once the
        // first send is on the lane, or one of theirs could reach it first.
        holder.send(.roomSend, RoomSendRequest(room: "chat:1", event: "m", data: #"{"by":"dee"}"#))
        #expect(await eventually { hub.metricsText().contains("\nrealtime_room_lane_depth 1\n") })
        kicked.join("chat:1", token: Tokens.make(room: "chat:1", user: "ann", rule: rule))
        leaver.send(.roomSend, RoomSendRequest(room: "chat:1", event: "m", data: #"{"by":"bob"}"#))
        leaver.send(.roomLeave, RoomLeaveRequest(room: "chat:1"))
        rejoiner.join("chat:2", token: Tokens.make(room: "chat:2", user: "cy", rule: rule))
        rejoiner.send(.roomLeave, RoomLeaveRequest(room: "chat:2"))
        rejoiner.join("chat:2", token: Tokens.make(room: "chat:2", user: "cy", rule: rule))
        #expect(await eventually { hub.roomMembers(appID: "1", room: "chat:1").connections == 1 })
        #expect(try hub.kickRoomUser(appID: "1", room: "chat:1", userID: "ann") == 1)
        node.thaw()
        #expect(holder.wait { $0.frames.contains { $0.event == "m" && $0.data["by"]?.string == "dee" } })
        #expect(leaver.wait { $0.frames.contains { $0.room == "chat:1" && $0.event == "error" } })
        #expect(leaver.frames.first { $0.room == "chat:1" && $0.event == "error" }?.data["code"]?.string == "not_joined")
        #expect(kicked.wait { $0.frames.contains { $0.event == "kicked" } })
        #expect(rejoiner.wait { $0.frames.contains { $0.room == "chat:2" && $0.event == "joined" } })
        // The lane ran every job queued before the second join by the time it was answered.
        let page = try hub.roomHistory(appID: "1", room: "chat:1", limit: 10)
        #expect(page.events.map(\.data) == [#"{"by":"dee"}"#], "the send of a member that left is not kept")
        #expect(!kicked.frames.contains { $0.event == "joined" }, "the kicked join never finished")
        #expect(rejoiner.frames.filter { $0.room == "chat:2" && ($0.event == "joined" || $0.event == "error") }.map(\.event) == ["joined"])
        #expect(hub.roomMembers(appID: "1", room: "chat:2").users == ["cy"])
        #expect(hub.roomMembers(appID: "1", room: "chat:1").users == ["dee"])
    }

    @Test("a presence channel's first subscription on a node while its Redis is frozen: a channel client's ping stays under 50 ms; the subscription is confirmed once Redis answers, listing the members of both nodes (issue 31)", .timeLimit(.minutes(1)))
    func presenceSubscribeDuringFreeze() async throws {
        let cluster = try RedisNodes(count: 2)
        #expect(await cluster.ready())
        let (nodeA, nodeB) = (cluster.nodes[0], cluster.nodes[1])
        let bob = try RoomClient(nodeB)
        try bob.subscribePresence("presence-team", user: "bob")
        #expect(bob.wait { $0.messages.contains { $0.event == "bird_internal:subscription_succeeded" } })
        let pinger = try Self.channelClient(nodeA)
        let ann = try RoomClient(nodeA)
        cluster.freeze()
        let frozen = ContinuousClock.now
        try ann.subscribePresence("presence-team", user: "ann")
        var roundTrips: [Duration] = []
        while ContinuousClock.now - frozen < .seconds(3) {
            roundTrips += HostileRoomTests.pingRoundTrips(pinger)
            try await Task.sleep(for: .milliseconds(50))
        }
        #expect(!ann.messages.contains { $0.event == "bird_internal:subscription_succeeded" }, "confirmed before the members were read")
        cluster.thaw()
        let slowest = roundTrips.max() ?? .zero
        #expect(slowest < .milliseconds(50 * Sanitizers.slowdown), "the slowest of \(roundTrips.count) pings took \(slowest)")
        #expect(ann.wait { $0.messages.contains { $0.event == "bird_internal:subscription_succeeded" } })
        let confirmation = try #require(ann.messages.first { $0.event == "bird_internal:subscription_succeeded" })
        let ids = try confirmation.decodeData(PresenceSubscriptionData.self).presence.ids
        #expect(ids == ["ann", "bob"])
        // Bob's node announces Ann once.
        #expect(bob.wait { $0.messages.contains { $0.event == "bird_internal:member_added" } })
    }
}

