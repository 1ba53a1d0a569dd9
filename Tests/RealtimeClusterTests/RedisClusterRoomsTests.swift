import Foundation
import Realtime
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport
import TestSupport
import Testing

/// Two server nodes on a private Redis Cluster (3 masters, 3 replicas): rooms' history and the
/// bus sharded by room, a slot migrated while publishing, a master killed, every node
/// restarted. One cluster for the whole run (a start takes about 10 s), its phases in order.
@Suite("Rooms on a Redis Cluster", .serialized)
struct RedisClusterRoomsTests {
    /// `count` rooms named `prefix:N` whose slots spread over every master of `map`, the same
    /// number on each.
    static func spreadRooms(_ prefix: String, perShard: Int, map: RedisSlotMap) -> [String] {
        var byMaster: [RedisEndpoint: [String]] = [:]
        for index in 1...2000 {
            let room = "\(prefix):\(index)"
            let key = "rt:{\(ClusterBed.app.id.utf8.count):\(ClusterBed.app.id):\(room)}:meta"
            guard let master = map.shard(forSlot: RedisClusterSlot.of(key))?.master, byMaster[master, default: []].count < perShard else { continue }
            byMaster[master, default: []].append(room)
            if byMaster.count == map.shards.count, byMaster.values.allSatisfy({ $0.count == perShard }) { break }
        }
        return byMaster.values.flatMap { $0 }.sorted()
    }

    /// The master serving a room's keys.
    static func master(of room: String, _ map: RedisSlotMap) -> RedisEndpoint? {
        map.shard(forSlot: slot(of: room))?.master
    }

    static func slot(of room: String) -> Int {
        RedisClusterSlot.of("rt:{\(ClusterBed.app.id.utf8.count):\(ClusterBed.app.id):\(room)}:meta")
    }

    @Test("--redis-cluster's seeds: host:port or redis://host:port, by commas; a socket path, a bad port, an empty seed or more than 6 are refused")
    func seeds() throws {
        #expect(try ClusterNode.clusterSeeds("127.0.0.1:7000, redis://[::1]:7001") == [.tcp(host: "127.0.0.1", port: 7000), .tcp(host: "::1", port: 7001)])
        #expect(try ClusterNode.clusterSeeds("redis.example:7000") == [.tcp(host: "redis.example", port: 7000)])
        for bad in ["/run/redis.sock", "127.0.0.1:0", "127.0.0.1:7000,", "unix:///x", (1...7).map { "127.0.0.1:\(7000 + $0)" }.joined(separator: ",")] {
            #expect(throws: RedisError.self, "\(bad)") { try ClusterNode.clusterSeeds(bad) }
        }
    }

    @Test("two nodes on 3 masters: rooms on every shard delivered, replayed and paged as on one Redis, presence and channels across nodes; a slot migrated while publishing loses nothing; a master killed after writes its replica never took stops only its rooms, which come back in a new epoch with each member's loss told; the whole cluster restarted: every epoch changes, members told",
          .timeLimit(.minutes(3)))
    func roomsOnRedisCluster() async throws {
        let cluster = try PrivateRedisCluster()
        defer { cluster.stop() }
        let routing = RedisClusterConnection(seeds: cluster.endpoints)
        try routing.refreshSlotMap()
        let map = try #require(routing.slotMap)
        let rooms = Self.spreadRooms("order", perShard: 2, map: map)
        #expect(rooms.count == 6 && Set(rooms.compactMap { Self.master(of: $0, map) }).count == 3, "rooms on every shard: \(rooms)")

        let bed = try ClusterBed(nodes: 2, cluster: cluster)
        #expect(await bed.ready())
        let clientA = bed.client(0, user: "ann")
        let clientB = bed.client(1, user: "bob")
        defer { clientA.disconnect(); clientB.disconnect() }
        let logsA = rooms.map { RoomLog(clientA.join($0)) }
        let roomsB = rooms.map { clientB.join($0) }
        let logsB = roomsB.map(RoomLog.init)
        clientA.connect()
        clientB.connect()
        for room in roomsB { try await room.ready() }

        // Delivered: publishers on both nodes, every member sees the history's order.
        for seq in 1...10 {
            for (index, room) in rooms.enumerated() { try bed.publish((seq + index) % 2, room: room, seqs: seq...seq) }
        }
        #expect(await eventually { (logsA + logsB).allSatisfy { $0.count >= 10 } })
        for (logA, logB) in zip(logsA, logsB) {
            #expect(logA.ids.withLock { $0 } == Array(1...10) && logB.ids.withLock { $0 } == Array(1...10))
            #expect(logA.seqs.withLock { $0 } == logB.seqs.withLock { $0 })
        }
        // Each room's live channel is followed on its own shard's master (SSUBSCRIBE).
        for room in rooms {
            let master = try #require(Self.master(of: room, map))
            let numsub = try RedisConnection(endpoint: master).command("PUBSUB", "SHARDNUMSUB", RedisFanoutProbe.roomChannel(room))
            #expect(numsub.array?.last?.integer == 2, "\(room) followed by both nodes on \(master)")
        }

        // Replayed: B away while 5 more events per room are kept, then back from its positions.
        clientB.disconnect()
        for room in rooms { try bed.publish(0, room: room, seqs: 11...15) }
        clientB.connect()
        #expect(await eventually { logsB.allSatisfy { $0.count >= 15 } })
        #expect(logsB.allSatisfy { $0.ids.withLock { $0 } == Array(1...15) && $0.errors.withLock { $0 }.isEmpty })
        #expect(logsB.allSatisfy { $0.replayed.withLock { $0 } == 5 })
        // Paged through node B, from whichever shard keeps the room.
        for room in roomsB {
            let page = try await room.history(limit: 10)
            #expect(page.events.map(\.meta.id) == Array(6...15) && page.more)
        }

        try await Self.presenceAndChannels(bed, routing)
        try await Self.migrationWhilePublishing(cluster, routing, bed, room: rooms[0], logs: [logsA[0], logsB[0]])
        try await Self.failover(cluster, routing, bed, rooms: rooms, members: roomsB, logs: logsB)
        try await Self.wholeClusterRestarted(cluster, bed, rooms: rooms, members: roomsB, logs: logsB)
    }

    /// Every node of the Redis Cluster killed and started again with nothing kept: each room's
    /// epoch changes, every member is told (a gap from its position) and gets the new epoch's
    /// events.
    static func wholeClusterRestarted(_ cluster: PrivateRedisCluster, _ bed: ClusterBed, rooms: [String], members: [Room], logs: [RoomLog]) async throws {
        let before = members.map(\.position)
        let resyncs = logs.map { $0.errors.withLock { $0.filter { $0 == "resync" }.count } }
        try await Task.detached { try cluster.restartAll() }.value
        #expect(await bed.ready(), "both nodes' buses back")
        for room in rooms {
            var kept = false
            for _ in 0..<200 where !kept {
                kept = (try? bed.publish(1, room: room, seqs: 400...400)) != nil
                if !kept { try await Task.sleep(for: .milliseconds(50)) }
            }
            #expect(kept, "\(room) takes events again")
        }
        #expect(await eventually(timeout: .seconds(20)) { logs.allSatisfy { $0.seqs.withLock { $0.last } == 400 } })
        for index in rooms.indices {
            let gap = members[index].error?.gap
            #expect(logs[index].errors.withLock { $0.filter { $0 == "resync" }.count } == resyncs[index] + 1, "\(rooms[index]) told to resync once")
            #expect(members[index].position?.epoch != before[index]?.epoch && gap?.reason == "epoch_changed" && gap?.previous == before[index],
                    "\(rooms[index]): a new epoch, the member told everything after its position is lost")
        }
    }

    /// A room's slot moved to another master while both nodes publish to it: `ASK`, `TRYAGAIN`
    /// and `MOVED` met by the store (a refused publish is sent again), the nodes' subscriptions
    /// moved to the new master; every member gets every kept event once, in order.
    static func migrationWhilePublishing(_ cluster: PrivateRedisCluster, _ routing: RedisClusterConnection, _ bed: ClusterBed, room: String,
                                         logs: [RoomLog]) async throws {
        try routing.refreshSlotMap()
        let map = try #require(routing.slotMap)
        let slot = Self.slot(of: room)
        let source = try #require(map.shard(forSlot: slot)?.master)
        let target = try #require(map.shards.first { $0.master != source }?.master)
        let before = logs.map(\.count)
        let refusals = Locked(0)
        let publisher = Task.detached {
            var seq = 100
            while seq < 160 {
                do {
                    try bed.publish(seq % 2, room: room, seqs: seq...seq)
                    seq += 1
                } catch {
                    refusals.withLock { $0 += 1 }
                }
                try? await Task.sleep(for: .milliseconds(5))
            }
        }
        try await Task.detached { try cluster.migrate(slot: slot, to: target, pause: .milliseconds(150)) }.value
        await publisher.value
        #expect(await eventually { logs.allSatisfy { $0.count >= before[0] + 60 } })
        try await Task.sleep(for: .milliseconds(200))
        for (log, count) in zip(logs, before) {
            #expect(log.ids.withLock { $0 } == Array(1...UInt64(count + 60)), "every event once, in order")
            #expect(log.seqs.withLock { Array($0.suffix(60)) } == Array(100..<160))
            #expect(log.errors.withLock { $0 }.isEmpty)
        }
        let channel = RedisFanoutProbe.roomChannel(room)
        #expect(await eventually { (try? RedisConnection(endpoint: target).command("PUBSUB", "SHARDNUMSUB", channel))?.array?.last?.integer == 2 },
                "both nodes follow the room on its new master (\(refusals.withLock { $0 }) publish(es) refused during the move)")
    }

    /// A shard's master killed after writes its replica never took (frozen meanwhile): the
    /// other shards' rooms go on before the replica is promoted, `/health` says which shard is
    /// down; after the failover its rooms are in a new epoch (the ids the nodes saw are never
    /// given again), every member told exactly what it lost, and they deliver again.
    static func failover(_ cluster: PrivateRedisCluster, _ routing: RedisClusterConnection, _ bed: ClusterBed, rooms: [String], members: [Room],
                         logs: [RoomLog]) async throws {
        try routing.refreshSlotMap()
        let map = try #require(routing.slotMap)
        // The shard that also holds the app's list of rooms (`RedisRoomStore.roomsKey`).
        let listKey = RedisRoomStore.roomsKey(app: ClusterBed.app.id)
        let victim = try #require(map.shard(forSlot: RedisClusterSlot.of(listKey))?.master)
        let replica = try #require(map.shards.first { $0.master == victim }?.replicas.first)
        let doomed = rooms.indices.filter { Self.master(of: rooms[$0], map) == victim }
        let others = rooms.indices.filter { !doomed.contains($0) }
        // Writes the replica never takes, kept by the master and delivered to the members: the
        // replica frozen and its link cut (a frozen process still takes what its socket gets).
        cluster.setRunning(replica, false)
        #expect(try RedisConnection(endpoint: victim).command("CLIENT", "KILL", "TYPE", "replica").integer == 1)
        for index in doomed { try bed.publish(0, room: rooms[index], seqs: 250...252) }
        #expect(await eventually { doomed.allSatisfy { logs[$0].seqs.withLock { $0.last } == 252 } })
        let seen = doomed.map { members[$0].position }
        cluster.kill(victim)
        cluster.setRunning(replica, true)
        let counts = logs.map(\.count)
        // The other shards' rooms are delivered while the victim's slots have no master.
        for index in others { try bed.publish(0, room: rooms[index], seqs: 200...204) }
        #expect(await eventually { others.allSatisfy { logs[$0].count == counts[$0] + 5 } })
        // A batch over every shard reads the rooms it can reach: those of the dead shard apart.
        let store = RedisRoomStore(redis: RedisClusterConnection(seeds: cluster.endpoints, timeout: 500))
        let reached = try store.reachablePositions(app: ClusterBed.app.id, rooms: rooms, now: Int64(Date().timeIntervalSince1970 * 1000))
        #expect(rooms.indices.filter { reached[$0] == nil } == doomed, "only the dead shard's rooms unread")
        #expect(throws: RoomStoreError.self) { try store.positions(app: ClusterBed.app.id, rooms: rooms, now: 0) }
        try routing.refreshSlotMap()
        #expect(routing.slotMap?.shards.contains { $0.master == victim } == true, "delivered before the failover")
        let health = await eventually {
            let response = bed.nodes[1].api.handle(HTTPRequest(method: "GET", path: "/health", query: [], body: []))
            return response.status == 200 && response.body.contains("degraded") && response.body.contains(victim.description)
        }
        #expect(health, "/health names the shard that is down")
        // A room new to the cluster, on another shard, is joined while the list of rooms is
        // down (listed once it is back).
        let fresh = Self.spreadRooms("chat", perShard: 1, map: map).first { Self.master(of: $0, map) != victim }
        let (freshClient, freshRoom, _) = try await bed.member(1, user: "flo", room: try #require(fresh))
        defer { freshClient.disconnect() }
        #expect(freshRoom.state == .joined)
        let victimSlots = try #require(map.shards.first { $0.master == victim }?.slots).sorted { $0.lowerBound < $1.lowerBound }.map { "\($0.lowerBound)-\($0.upperBound)" }.joined(separator: ",")
        #expect(bed.nodes[1].hub.metricsText().contains("realtime_redis_shard_up{shard=\"\(victimSlots)\",master=\"\(victim)\"} 0"))

        // The replica takes over without the last writes; the victim's rooms deliver again.
        #expect(await eventually(timeout: .seconds(30)) {
            (try? routing.refreshSlotMap()) != nil && routing.slotMap.map { map in !map.shards.contains { $0.master == victim } && map.coversEverySlot } == true
        }, "the replica promoted")
        for index in doomed {
            var kept: (epoch: String, record: RoomEventRecord)?
            for _ in 0..<300 where kept == nil {
                kept = try? bed.nodes[0].hub.publishRoom(appID: ClusterBed.app.id, room: rooms[index], event: "updated", data: #"{"seq":300}"#)
                if kept == nil { try await Task.sleep(for: .milliseconds(50)) }
            }
            let position = try #require(seen[doomed.firstIndex(of: index)!])
            #expect(kept.map { $0.epoch != position.epoch } == true, "\(rooms[index]): a new epoch, not id \(position.id - 2) again")
        }
        #expect(await eventually(timeout: .seconds(20)) { doomed.allSatisfy { logs[$0].seqs.withLock { $0.last } == 300 } })
        #expect(await eventually { (try? routing.command(["ZSCORE", listKey, fresh ?? ""], key: listKey))?.string != nil }, "listed after the failover")
        for (index, position) in zip(doomed, seen) {
            let gap = members[index].error?.gap
            #expect(logs[index].errors.withLock { $0 }.contains("resync"), "\(rooms[index]) told to resync")
            #expect(gap?.reason == "epoch_changed" && gap?.previous == position && gap?.epoch == members[index].position?.epoch,
                    "\(rooms[index]): told everything after \(String(describing: position)) is lost")
        }
        #expect(await eventually { bed.nodes[1].api.handle(HTTPRequest(method: "GET", path: "/health", query: [], body: [])).body.contains(#""status":"ok""#) })
    }

    /// A presence room's members and a channel event across the two nodes (the presence
    /// scripts and the channel's SPUBLISH on the topic's own shard).
    static func presenceAndChannels(_ bed: ClusterBed, _ routing: RedisClusterConnection) async throws {
        let (annA, teamA, _) = try await bed.member(0, user: "ann", room: "team:1")
        defer { annA.disconnect() }
        let (bobB, teamB, _) = try await bed.member(1, user: "bob", room: "team:1")
        defer { bobB.disconnect() }
        #expect(Set(teamB.members.map(\.id)) == ["ann", "bob"], "joined on B lists A's member")
        #expect(await eventually { Set(teamA.members.map(\.id)) == ["ann", "bob"] })
        let seen = Locked<[String]>([])
        let token = bobB.subscribe("news").bind("headline") { event in seen.withLock { $0.append(event.data ?? "") } }
        #expect(await eventually { bobB.channel(named: "news")?.subscribed == true })
        // Node B follows the channel on its shard (SSUBSCRIBE) before anything is published.
        let channel = "rt:{ch:\(ClusterBed.app.id.utf8.count):\(ClusterBed.app.id):news}:live"
        #expect(await eventually { (try? routing.command(["PUBSUB", "SHARDNUMSUB", channel], key: channel))?.array?.last?.integer == 1 })
        bed.nodes[0].hub.publish(appID: ClusterBed.app.id, channels: ["news"], event: "headline", data: #"{"n":1}"#)
        #expect(await eventually { seen.withLock { $0 } == [#"{"n":1}"#] })
        _ = token
    }
}
