import Dispatch
import Foundation
import Reachability
import Realtime
import RealtimeCluster
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
