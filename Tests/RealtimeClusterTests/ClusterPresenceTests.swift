import Dispatch
import Foundation
import Reachability
import Realtime
@testable import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport
import TestSupport
import Testing

/// Presence across nodes on one private Redis: members listed from every node, arrivals and
/// departures once per user whichever nodes its connections are on.
@Suite("Presence across nodes", .serialized)
struct ClusterPresenceTests {
    final class Seen: Sendable {
        let added = Locked<[String]>([])
        let removed = Locked<[String]>([])
    }

    @Test("a presence channel lists the members of every node; member_added and member_removed come once per user, not per connection")
    func presenceChannel() async throws {
        let bed = try ClusterBed(nodes: 3)
        #expect(await bed.ready())
        let users = ["ann", "bob", "cy"]
        let clients = (0..<3).map { bed.client($0, user: users[$0]) }
        defer { clients.forEach { $0.disconnect() } }
        var tokens: [ObservationToken] = []
        let seen = (0..<3).map { _ in Seen() }
        for (index, client) in clients.enumerated() {
            let channel = try #require(client.subscribe("presence-team") as? PresenceChannel)
            let log = seen[index]
            tokens.append(channel.onMemberAdded { member in log.added.withLock { $0.append(member.userID) } })
            tokens.append(channel.onMemberRemoved { id in log.removed.withLock { $0.append(id) } })
            client.connect()
            // One at a time, so each later member is an arrival for the earlier ones.
            #expect(await eventually { client.channel(named: "presence-team")?.subscribed == true })
        }
        for client in clients {
            #expect(await eventually { Set(client.channel(named: "presence-team")?.members.map(\.userID) ?? []) == Set(users) },
                    "every node's members listed: \(client.channel(named: "presence-team")?.members.map(\.userID) ?? [])")
        }
        #expect(clients[0].channel(named: "presence-team")?.members.first { $0.userID == "cy" }?.userInfo?["name"] == .string("cy"))
        #expect(await eventually { seen[0].added.withLock { $0 } == ["bob", "cy"] && seen[1].added.withLock { $0 } == ["cy"] })

        // bob again, from another node: not a new member anywhere.
        let second = bed.client(2, user: "bob")
        defer { second.disconnect() }
        _ = second.subscribe("presence-team")
        second.connect()
        #expect(await eventually { second.channel(named: "presence-team")?.subscribed == true })
        // bob's first connection goes: still present through the second.
        clients[1].disconnect()
        try? await Task.sleep(for: .milliseconds(300))
        #expect(seen[0].removed.withLock { $0 }.isEmpty, "bob is still here (on node C)")
        second.disconnect()
        #expect(await eventually { seen[0].removed.withLock { $0 } == ["bob"] && seen[2].removed.withLock { $0 } == ["bob"] })
        try? await Task.sleep(for: .milliseconds(200))
        #expect(seen[0].added.withLock { $0 } == ["bob", "cy"], "no second member_added for bob")
        #expect(seen[0].removed.withLock { $0 } == ["bob"], "one member_removed for bob")
        #expect(await eventually { Set(clients[0].channel(named: "presence-team")?.members.map(\.userID) ?? []) == ["ann", "cy"] })
        _ = tokens
    }

    /// Users on node A subscribed to `channel` one after another, then a watcher (`wes`) on
    /// node B, whose view lists them all when this returns.
    func watched(_ bed: ClusterBed, _ channel: String, usersOnA: [String]) async throws -> (onA: [BirdRealtime], watcher: BirdRealtime, view: PresenceChannel) {
        #expect(await bed.ready())
        let onA = usersOnA.map { bed.client(0, user: $0) }
        for client in onA {
            _ = client.subscribe(channel)
            client.connect()
            #expect(await eventually { client.channel(named: channel)?.subscribed == true })
        }
        let watcher = bed.client(1, user: "wes")
        let view = try #require(watcher.subscribe(channel) as? PresenceChannel)
        watcher.connect()
        #expect(await eventually { Set(view.members.map(\.userID)) == Set(usersOnA + ["wes"]) })
        return (onA, watcher, view)
    }

    @Test("a member who leaves while another node's bus is cut is gone from that node's view once the bus is back")
    func viewsAfterBusCut() async throws {
        let bed = try ClusterBed(nodes: 2)
        let (onA, watcher, view) = try await watched(bed, "presence-cut", usersOnA: ["ann"])
        let ann = onA[0]
        defer { (onA + [watcher]).forEach { $0.disconnect() } }
        _ = try RedisConnection(endpoint: bed.redis.endpoint).command("CLIENT", "KILL", "TYPE", "pubsub")
        ann.disconnect()
        #expect(await eventually { view.members.map(\.userID) == ["wes"] }, "\(view.members.map(\.userID))")
    }

    @Test("a leave whose Redis call timed out (Redis paused) leaves no ghost: the next sweep reconciles the node's registration")
    func noGhostAfterFailedLeave() async throws {
        let bed = try ClusterBed(nodes: 2)
        let (onA, watcher, view) = try await watched(bed, "presence-ghost", usersOnA: ["ann", "kim"])
        let ann = onA[0]
        defer { (onA + [watcher]).forEach { $0.disconnect() } }
        // Redis answers nothing for 1.5 s: node A's leave script times out (its deadline is 500 ms).
        let probe = RedisConnection(endpoint: bed.redis.endpoint)
        _ = try probe.command("CLIENT", "PAUSE", "1500", "ALL")
        ann.disconnect()
        #expect(await eventually { bed.logged(0, "left to the next sweep") })
        #expect(await eventually { Set(view.members.map(\.userID)) == ["kim", "wes"] }, "\(view.members.map(\.userID))")
        let fields = try probe.command("HKEYS", "rt:{ch:1:1:presence-ghost}:presence").array?.compactMap(\.string) ?? []
        #expect(!fields.contains { $0.hasSuffix("\nann") }, "no registration of ann left: \(fields)")
    }

    @Test("after Redis lost everything (FLUSHALL), a node registers its members again, even when a join came first; a newcomer lists them")
    func registeredAgainAfterFlush() async throws {
        let bed = try ClusterBed(nodes: 2)
        let (onA, watcher, _) = try await watched(bed, "presence-flush", usersOnA: ["ann"])
        let joe = bed.client(0, user: "joe")
        defer { (onA + [watcher, joe]).forEach { $0.disconnect() } }
        let probe = RedisConnection(endpoint: bed.redis.endpoint)
        _ = try probe.command("FLUSHALL")
        // A join on node A before its next sweep brings its liveness key back.
        _ = joe.subscribe("presence-other")
        joe.connect()
        #expect(await eventually {
            let fields = (try? probe.command("HKEYS", "rt:{ch:1:1:presence-flush}:presence"))?.array?.compactMap(\.string) ?? []
            return fields.contains { $0.hasSuffix("\nann") } && fields.contains { $0.hasSuffix("\nwes") }
        }, "ann (node A) and wes (node B) registered again: \(bed.logs.withLock { $0.suffix(12) })")
        let newcomer = bed.client(1, user: "neo")
        defer { newcomer.disconnect() }
        let view = try #require(newcomer.subscribe("presence-flush") as? PresenceChannel)
        newcomer.connect()
        #expect(await eventually { Set(view.members.map(\.userID)) == ["ann", "neo", "wes"] })
    }

    @Test("a presence room's joined lists members from every node; join and leave reach the other nodes once")
    func presenceRoom() async throws {
        let bed = try ClusterBed(nodes: 2)
        let (onA, roomA, _) = try await bed.member(0, user: "ann", room: "team:1")
        defer { onA.disconnect() }
        let events = Locked<[String]>([])
        roomA.bindAll { event, data, _ in
            if event == RoomSystemEvent.join || event == RoomSystemEvent.leave { events.withLock { $0.append("\(event) \(data["id"]?.string ?? "?")") } }
        }
        let (onB, roomB, _) = try await bed.member(1, user: "bob", room: "team:1")
        #expect(Set(roomB.members.map(\.id)) == ["ann", "bob"], "joined on B lists A's member")
        #expect(await eventually { events.withLock { $0 } == ["join bob"] })
        onB.disconnect()
        #expect(await eventually { events.withLock { $0 } == ["join bob", "leave bob"] })
        #expect(await eventually { roomA.members.map(\.id) == ["ann"] })
    }
}

/// The presence scripts on a real private `redis-server`, driven through two buses without
/// servers: the sweep's cleanup and the live-node list.
@Suite("Presence registrations in Redis")
struct PresenceRegistrationTests {
    static let topic = FanoutTopic.channel(app: "1", channel: "presence-room")
    static let keys = ["rt:{ch:1:1:presence-room}:presence", "rt:{ch:1:1:presence-room}:presence-users"]

    @Test("a sweep renews the topic's hashes and keeps the members of a node that registered after another node read its list; a node whose registration ended loses its members at the next sweep")
    func sweep() throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let zed = RedisFanout(endpoint: redis.endpoint)
        let yul = RedisFanout(endpoint: redis.endpoint)
        defer { zed.stop(); yul.stop() }
        let probe = RedisConnection(endpoint: redis.endpoint)
        #expect(try zed.presenceJoin(Self.topic, user: "zed", info: nil, excluding: "1.1"))
        // Zed's sweep reads its list of dead nodes; yul registers and joins only after.
        #expect(try zed.presenceSweep(local: [Self.topic: ["zed": nil]]).isEmpty)
        #expect(try yul.presenceJoin(Self.topic, user: "yul", info: nil, excluding: "2.1"))
        for key in Self.keys { _ = try probe.command("PEXPIRE", key, "1000") }
        #expect(try zed.presenceSweep(local: [Self.topic: ["zed": nil]]).isEmpty, "yul is not dead: it is missing from no list")
        for key in Self.keys {
            let ttl = try #require(try probe.command("PTTL", key).integer)
            #expect(ttl > 20_000, "\(key) renewed by the sweep: \(ttl) ms left")
        }
        #expect(Set(try zed.presenceMembers(Self.topic, limit: 10).map(\.user)) == ["zed", "yul"])
        // Yul's registration ends (its node stopped sweeping): the next sweep takes yul out.
        let fields = try #require(try probe.command("HKEYS", Self.keys[0]).array).compactMap(\.string)
        let yulNode = try #require(fields.first { $0.hasSuffix("\nyul") }?.split(separator: "\n").first.map(String.init))
        // Ended a second ago by Redis' clock (one ended past `deadRetention` is forgotten).
        let time = try #require(try probe.command("TIME").array?.compactMap(\.string).compactMap { Int64($0) })
        _ = try probe.command("ZADD", "rt:{nodes}:live", String(time[0] * 1000 + time[1] / 1000 - 1000), yulNode)
        #expect(try zed.presenceSweep(local: [Self.topic: ["zed": nil]]).map(\.user) == ["yul"])
        #expect(try zed.presenceMembers(Self.topic, limit: 10).map(\.user) == ["zed"])
    }

    @Test("a user who joined on a live node while a dead node still counted it (no arrival, nothing published) is published as present again when the dead node's members are taken out, with its info; nobody is returned as gone; a node found taken for dead announces its users again", .timeLimit(.minutes(1)))
    func presentAgain() async throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let killed = RedisFanout(endpoint: redis.endpoint)
        let live = RedisFanout(endpoint: redis.endpoint)
        defer { killed.stop(); live.stop() }
        let probe = RedisConnection(endpoint: redis.endpoint)
        let messages = Locked<[[UInt8]]>([])
        let subscribed = Locked(false)
        let subscriber = RedisSubscriber(endpoint: redis.endpoint) { event in
            switch event {
            case .message(_, let payload): messages.withLock { $0.append(payload) }
            // A channel asked before the start is followed once the subscriber is ready.
            case .subscribed, .ready: subscribed.withLock { $0 = true }
            default: break
            }
        }
        subscriber.subscribe(RedisFanout.channel(of: Self.topic))
        subscriber.start()
        defer { subscriber.stop() }
        #expect(await eventually { subscribed.withLock { $0 } })
        let info = #"{"name":"Ann"}"#
        #expect(try killed.presenceJoin(Self.topic, user: "ann", info: info, excluding: "1.1"))
        #expect(await eventually { messages.withLock { $0.count } == 1 }, "the first arrival is published")
        // The killed node's registration ended a second ago by Redis' clock.
        let fields = try #require(try probe.command("HKEYS", Self.keys[0]).array).compactMap(\.string)
        let killedNode = try #require(fields.first?.split(separator: "\n").first.map(String.init))
        let time = try #require(try probe.command("TIME").array?.compactMap(\.string).compactMap { Int64($0) })
        _ = try probe.command("ZADD", "rt:{nodes}:live", String(time[0] * 1000 + time[1] / 1000 - 1000), killedNode)
        // Ann's client lands on the live node: the killed node still counts her, no arrival.
        #expect(try !live.presenceJoin(Self.topic, user: "ann", info: info, excluding: "2.1"))
        try? await Task.sleep(for: .milliseconds(100))
        #expect(messages.withLock { $0.count } == 1, "no arrival published")
        #expect(try live.presenceSweep(local: [Self.topic: ["ann": info]]).isEmpty, "nobody gone")
        #expect(await eventually { messages.withLock { $0.count } == 2 })
        let again = try FanoutCodec.decode(try #require(messages.withLock { $0.last }), topic: Self.topic).message
        #expect(again == .presence(PresenceFanoutEvent(topic: Self.topic, user: "ann", info: info, joined: true)), "\(again)")
        #expect(try live.presenceMembers(Self.topic, limit: 10).map(\.user) == ["ann"])
        // A second sweep finds no dead node's member left: nothing more published.
        _ = try live.presenceSweep(local: [Self.topic: ["ann": info]])
        try? await Task.sleep(for: .milliseconds(100))
        #expect(messages.withLock { $0.count } == 2)

        // The live node is itself taken for dead a while (Redis unreachable for its sweeps): a
        // node that read the members meanwhile left ann out. When it finds that out, its
        // reconcile announces ann again, though her registration did not change.
        let liveNode = try #require(try probe.command("HKEYS", Self.keys[0]).array?.compactMap(\.string).first?.split(separator: "\n").first.map(String.init))
        let now = try #require(try probe.command("TIME").array?.compactMap(\.string).compactMap { Int64($0) })
        _ = try probe.command("ZADD", "rt:{nodes}:live", String(now[0] * 1000 + now[1] / 1000 - 1000), liveNode)
        #expect(try killed.presenceMembers(Self.topic, limit: 10).isEmpty, "ann is on no live node for another reader")
        #expect(try live.presenceSweep(local: [Self.topic: ["ann": info]]).isEmpty)
        #expect(live.presenceNeedsReconcile, "found taken for dead: every topic is reconciled")
        #expect(try live.presenceReconcile(local: [Self.topic: ["ann": info]]).isEmpty, "no change to return")
        #expect(await eventually { messages.withLock { $0.count } == 3 })
        let announced = try FanoutCodec.decode(try #require(messages.withLock { $0.last }), topic: Self.topic).message
        #expect(announced == .presence(PresenceFanoutEvent(topic: Self.topic, user: "ann", info: info, joined: true)), "\(announced)")
    }
}
