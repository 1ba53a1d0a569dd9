import Foundation
import RealtimeCluster
import Redis
import SystemSupport
import TestSupport
import Testing

/// The Redis module's cluster routing (issue 35, build item 1): slots, the slot map, redirections
/// on plain values, and `RedisClusterConnection` against a real private Redis Cluster of three
/// masters and three replicas on loopback.
@Suite("Redis Cluster routing", .serialized)
struct RedisClusterTests {
    @Test("a key's slot is CRC16 (XMODEM) of its hash tag or whole key, modulo 16,384, as the specification's examples say")
    func slots() {
        // The specification: the CRC16 of "123456789" is 0x31C3; 0x31C3 % 16384 = 12739.
        #expect(RedisClusterSlot.of("123456789") == 12_739)
        #expect(RedisClusterSlot.of("{user1000}.following") == RedisClusterSlot.of("{user1000}.followers"))
        #expect(RedisClusterSlot.of("{user1000}.following") == RedisClusterSlot.of("user1000"))
        // "foo{}{bar}" hashes the whole key: checked against CLUSTER KEYSLOT in `routing`.
        #expect(RedisClusterSlot.of("foo{{bar}}zap") == RedisClusterSlot.of("{bar"))
        #expect(RedisClusterSlot.of("foo{bar}{zap}") == RedisClusterSlot.of("bar"))
        #expect(RedisClusterSlot.of("") == 0)
    }

    @Test("a CLUSTER SLOTS reply becomes a map: ranges by master, replicas, an empty host is the answering node's, an unknown one is left out; other shapes are refused")
    func slotMap() throws {
        func node(_ host: String, _ port: Int) -> RedisValue { .array([.bulk(Array(host.utf8)), .integer(Int64(port)), .bulk(Array("id".utf8))]) }
        let reply = RedisValue.array([
            .array([.integer(0), .integer(5460), node("127.0.0.1", 7000), node("127.0.0.1", 7003)]),
            .array([.integer(5461), .integer(10922), node("", 7001), node("?", 7004)]),
            .array([.integer(10923), .integer(16000), node("127.0.0.1", 7002)]),
            .array([.integer(16001), .integer(16383), node("127.0.0.1", 7000)]),
        ])
        let map = try RedisSlotMap(clusterSlots: reply, from: .tcp(host: "127.0.0.1", port: 7002))
        #expect(map.shards.count == 3 && map.coversEverySlot)
        #expect(map.shard(forSlot: 0)?.master == .tcp(host: "127.0.0.1", port: 7000))
        #expect(map.shard(forSlot: 16_383)?.master == .tcp(host: "127.0.0.1", port: 7000))
        #expect(map.shard(forSlot: 0)?.slots == [0...5460, 16001...16383])
        #expect(map.shard(forSlot: 0)?.replicas == [.tcp(host: "127.0.0.1", port: 7003)])
        #expect(map.shard(forSlot: 6000)?.master == .tcp(host: "127.0.0.1", port: 7001) && map.shard(forSlot: 6000)?.replicas == [])
        #expect(map.shard(forSlot: 16_384) == nil)
        let partial = try RedisSlotMap(clusterSlots: .array([.array([.integer(0), .integer(10), node("127.0.0.1", 7000)])]), from: .tcp(host: "127.0.0.1", port: 7000))
        #expect(!partial.coversEverySlot && partial.shard(forSlot: 11) == nil)
        for bad: RedisValue in [.status("OK"), .array([.array([.integer(10), .integer(5), node("h", 1)])]), .array([.array([.integer(0), .integer(16_384), node("h", 1)])]),
                                .array([.array([.integer(0), .integer(1), .bulk([])])]),
                                .array(Array(repeating: .array([.integer(0), .integer(16_383), node("h", 1)]), count: 2))] {
            #expect(throws: RedisError.self) { try RedisSlotMap(clusterSlots: bad, from: .tcp(host: "h", port: 1)) }
        }
    }

    @Test("a CLUSTER SLOTS reply naming thousands of replicas for one master keeps 16, read in linear time", .timeLimit(.minutes(1)))
    func manyReplicas() throws {
        func node(_ port: Int) -> RedisValue { .array([.bulk(Array("10.0.0.1".utf8)), .integer(Int64(port)), .bulk([])]) }
        var port = 1
        let entries: [RedisValue] = (0..<4096).map { slot in
            defer { port += 16 }
            return .array([.integer(Int64(slot)), .integer(Int64(slot)), node(65_000)] + (0..<16).map { node(port + $0) })
        }
        let began = ContinuousClock.now
        let map = try RedisSlotMap(clusterSlots: .array(entries), from: .tcp(host: "10.0.0.1", port: 65_000))
        #expect(map.shards.count == 1 && map.shards[0].replicas.count == RedisSlotMap.maxReplicas)
        #expect(ContinuousClock.now - began < .seconds(2), "\(ContinuousClock.now - began) for 65,536 replicas named")
    }

    @Test("a map read asks at most 6 nodes, seeds first: a seventh is never tried")
    func mapCandidates() throws {
        let cluster = try PrivateRedisCluster(masters: 3, replicasPerMaster: 0)
        defer { cluster.stop() }
        // Six seeds nothing listens on (loopback ports refuse at once), then a real node.
        let dead = (1...6).map { RedisEndpoint.tcp(host: "127.0.0.1", port: 9 + $0) }
        #expect(throws: RedisError.self) { try RedisClusterConnection(seeds: dead + [cluster.endpoints[0]]).command("GET", "k", key: "k") }
        #expect(try RedisClusterConnection(seeds: dead.prefix(5) + [cluster.endpoints[0]]).command("GET", "k", key: "k") == .null)
    }

    @Test("MOVED and ASK replies are read with their slot and node (an empty host is the answering node's); any other error is not a redirection")
    func redirects() {
        let node = RedisEndpoint.tcp(host: "127.0.0.1", port: 7000)
        let moved = RedisRedirect(error: "MOVED 3999 127.0.0.1:6381", from: node)
        #expect(moved?.kind == .moved && moved?.slot == 3999 && moved?.endpoint == .tcp(host: "127.0.0.1", port: 6381))
        let ask = RedisRedirect(error: "ASK 12 :7005", from: node)
        #expect(ask?.kind == .ask && ask?.slot == 12 && ask?.endpoint == .tcp(host: "127.0.0.1", port: 7005))
        for text in ["ERR unknown command", "MOVED 16384 h:1", "MOVED x h:1", "ASK 1 h:0", "MOVED 1", "CROSSSLOT Keys in request don't hash to the same slot"] {
            #expect(RedisRedirect(error: text, from: node) == nil, "\(text)")
        }
    }

    @Test("against a private cluster of 3 masters and 3 replicas: slots as CLUSTER KEYSLOT says, every key on its master, spread over all three; a slot migrated under the connection: ASK followed during the move, MOVED after it, nothing lost; a sharded subscriber follows a channel whose slot moves away and back, and a refused subscription leaves its master's other channels", .timeLimit(.minutes(2)))
    func routing() async throws {
        let cluster = try PrivateRedisCluster()
        defer { cluster.stop() }
        let redis = RedisClusterConnection(seeds: [cluster.endpoints[0]])
        let keys = (0..<300).map { "key:\($0)" } + ["{room:1}:events", "{room:1}:meta", "a{b}c", "foo{}{bar}"]
        let probe = RedisConnection(endpoint: cluster.endpoints[0])
        for key in keys {
            #expect(try probe.command("CLUSTER", "KEYSLOT", key).integer == Int64(RedisClusterSlot.of(key)), "\(key)")
            #expect(try redis.command("SET", key, "v-\(key)", key: key) == .status("OK"))
        }
        for key in keys { #expect(try redis.command("GET", key, key: key).string == "v-\(key)") }
        let map = try #require(redis.slotMap)
        #expect(map.shards.count == 3 && map.coversEverySlot && map.shards.allSatisfy { $0.replicas.count == 1 })
        let used = Set(keys.compactMap { map.shard(forSlot: RedisClusterSlot.of($0))?.master })
        #expect(used.count == 3, "keys on \(used.count) masters")
        // Each key is on the master the map names: asked directly, that master has it.
        for key in keys.prefix(30) {
            let master = try #require(map.shard(forSlot: RedisClusterSlot.of(key))?.master)
            #expect(try RedisConnection(endpoint: master).command("GET", key).string == "v-\(key)")
        }
        // Keys of one hash tag go to one slot: a script may use them together.
        #expect(try redis.evaluate("redis.call('SET', KEYS[1], 'x'); return redis.call('GET', KEYS[2])", keys: ["{room:1}:events", "{room:1}:meta"], arguments: []).string == "v-{room:1}:meta")
        #expect(throws: RedisError.self) { try redis.evaluate("return 1", keys: [], arguments: []) }
        // One script for 300 keys over the three masters: one round trip each, replies in order.
        let batch = try redis.evaluate("return redis.call('GET', KEYS[1])", calls: keys.prefix(300).map { ([$0], []) })
        #expect(batch.map(\.string) == keys.prefix(300).map { "v-\($0)" })
        #expect(throws: RedisError.self) { try redis.evaluate("return 1", calls: [(["a"], []), ([], [])]) }
        // The same cluster (one start is about 10 s): a slot migrated under the connection.
        try Self.migration(cluster, redis)
        try await Self.shardedSubscription(cluster, redis)
    }

    /// A sharded subscriber's channels on their masters: a channel whose slot moves away and
    /// back (its master dropping it each time, with `sunsubscribe`) is followed again where
    /// its slot is; a refused subscription never stops the master's other channels.
    static func shardedSubscription(_ cluster: PrivateRedisCluster, _ redis: RedisClusterConnection) async throws {
        let received = Locked<[String]>([])
        let refusals = Locked(0)
        let subscriber = RedisShardedSubscriber(cluster: RedisClusterConnection(seeds: cluster.endpoints), timeout: 500, pingInterval: 200) { _, event in
            switch event {
            case .message(let channel, let payload): received.withLock { $0.append("\(channel)=\(String(decoding: payload, as: UTF8.self))") }
            case .refused: refusals.withLock { $0 += 1 }
            default: break
            }
        }
        defer { subscriber.stop() }
        try redis.refreshSlotMap()
        let map = try #require(redis.slotMap)
        let home = map.shards[0].master
        // Two channels on one master, in two slots.
        let channels = (0..<5000).map { "{ch\($0)}:live" }.filter { map.shard(forSlot: RedisClusterSlot.of($0))?.master == home }
        let (moving, staying) = (channels[0], try #require(channels.first { RedisClusterSlot.of($0) != RedisClusterSlot.of(channels[0]) }))
        subscriber.start()
        subscriber.subscribe(moving)
        subscriber.subscribe(staying)
        func followed(_ channel: String, on master: RedisEndpoint) -> Bool {
            (try? RedisConnection(endpoint: master).command("PUBSUB", "SHARDNUMSUB", channel))?.array?.last?.integer == 1
        }
        #expect(await eventually { followed(moving, on: home) && followed(staying, on: home) })
        let away = try #require(map.shards.first { $0.master != home }?.master)
        let slot = RedisClusterSlot.of(moving)
        try await Task.detached { try cluster.migrate(slot: slot, to: away) }.value
        #expect(await eventually { followed(moving, on: away) }, "followed on the master its slot moved to")
        try await Task.detached { try cluster.migrate(slot: slot, to: home) }.value
        #expect(await eventually { followed(moving, on: home) && followed(staying, on: home) }, "and back home, beside the channel that never moved")
        try redis.refreshSlotMap()
        for channel in [moving, staying] { _ = try redis.command(["SPUBLISH", channel, "after"], key: channel) }
        #expect(await eventually { Set(received.withLock { $0 }) == ["\(moving)=after", "\(staying)=after"] })
        // A slot its master no longer serves while the others' maps still name it: SSUBSCRIBE
        // there is refused (CLUSTERDOWN), and the master's other channels go on.
        let orphan = try #require((0..<5000).map { "{orphan\($0)}:live" }.first { map.shard(forSlot: RedisClusterSlot.of($0))?.master == home })
        _ = try RedisConnection(endpoint: home).command("CLUSTER", "DELSLOTS", String(RedisClusterSlot.of(orphan)))
        subscriber.subscribe(orphan)
        #expect(await eventually { refusals.withLock { $0 } > 0 })
        _ = try redis.command(["SPUBLISH", staying, "still"], key: staying)
        #expect(await eventually { received.withLock { $0 }.contains("\(staying)=still") }, "the connection and its channels stayed")
        // Served again: the refused channel is tried again, and followed.
        _ = try RedisConnection(endpoint: home).command("CLUSTER", "ADDSLOTS", String(RedisClusterSlot.of(orphan)))
        #expect(await eventually { followed(orphan, on: home) }, "the refused channel followed once its slot is served")
        _ = try redis.command(["SPUBLISH", orphan, "served"], key: orphan)
        #expect(await eventually { received.withLock { $0 }.contains("\(orphan)=served") })
    }

    /// A slot migrated while the connection holds an old map: ASK is followed during the
    /// move, MOVED after it, nothing lost.
    static func migration(_ cluster: PrivateRedisCluster, _ redis: RedisClusterConnection) throws {
        let key = "moving:1"
        let slot = RedisClusterSlot.of(key)
        try redis.command("SET", key, "before", key: key)
        let map = try #require(redis.slotMap)
        let source = try #require(map.shard(forSlot: slot)?.master)
        let target = try #require(map.shards.first { $0.master != source }?.master)
        let sourceConnection = RedisConnection(endpoint: source)
        let targetConnection = RedisConnection(endpoint: target)
        let sourceID = try #require(try sourceConnection.command("CLUSTER", "MYID").string)
        let targetID = try #require(try targetConnection.command("CLUSTER", "MYID").string)
        #expect(try targetConnection.command("CLUSTER", "SETSLOT", String(slot), "IMPORTING", sourceID) == .status("OK"))
        #expect(try sourceConnection.command("CLUSTER", "SETSLOT", String(slot), "MIGRATING", targetID) == .status("OK"))
        // A key the source does not have, in the migrating slot: the source answers ASK.
        let newKey = Self.key(inSlot: slot, other: key)
        #expect(try redis.command("SET", newKey, "asked", key: newKey) == .status("OK"), "written through ASK on the target")
        #expect(try targetConnection.pipeline([["ASKING"], ["GET", newKey]])[1].string == "asked")
        // A script on a key the source no longer has: ASK, then the whole script on the target;
        // in a batch too, beside a call the source still answers.
        #expect(try redis.evaluate("return redis.call('GET', KEYS[1])", keys: [newKey], arguments: []).string == "asked")
        #expect(try redis.evaluate("return redis.call('GET', KEYS[1])", calls: [([key], []), ([newKey], [])]).map(\.string) == ["before", "asked"])
        // The old key moves, then the slot is the target's for every node.
        guard case .tcp(_, let targetPort) = target else { Issue.record("a TCP cluster"); return }
        #expect(try sourceConnection.command("MIGRATE", "127.0.0.1", String(targetPort), key, "0", "5000") == .status("OK"))
        for endpoint in cluster.endpoints {
            _ = try? RedisConnection(endpoint: endpoint).command("CLUSTER", "SETSLOT", String(slot), "NODE", targetID)
        }
        // The connection's map still names the source: MOVED is followed, and the map learns it.
        #expect(try redis.command("GET", key, key: key).string == "before")
        #expect(try redis.command("GET", newKey, key: newKey).string == "asked")
        #expect(redis.slotMap?.shard(forSlot: slot)?.master == target)
    }

    /// A key other than `other` whose slot is `slot`: `other` with a suffix found by trying.
    static func key(inSlot slot: Int, other: String) -> String {
        var index = 0
        while RedisClusterSlot.of("\(other):\(index)") != slot { index += 1 }
        return "\(other):\(index)"
    }
}
