import Dispatch
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport
import Testing

/// The history store on a Redis Cluster with one master frozen (SIGSTOP): work on the healthy
/// masters never waits on it (issue 48).
@Suite("A frozen Redis Cluster master and the history store", .serialized)
struct FrozenShardStoreTests {
    @Test("a new room on a healthy master is kept while the master holding its app's room list is frozen (listed by the next expiry, not by the room's request), and listed once it answers again; a master whose command ran into its deadline is taken for not answering until it answers",
          .timeLimit(.minutes(1)))
    func newRoomWhileListMasterFrozen() async throws {
        let cluster = try PrivateRedisCluster(masters: 3, replicasPerMaster: 0, nodeTimeout: 15_000)
        defer { cluster.stop() }
        // A deadline far past the test's time limit: a call that waits on the frozen master
        // fails the test by its limit, never by a timeout that hides the wait.
        let redis = RedisClusterConnection(seeds: cluster.endpoints, timeout: 120_000)
        try redis.refreshSlotMap()
        let map = try #require(redis.slotMap)
        let app = "1"
        let listKey = RedisRoomStore.roomsKey(app: app)
        let listMaster = try #require(map.shard(forSlot: RedisClusterSlot.of(listKey))?.master)
        let room = try #require((1...1000).map { "order:\($0)" }.first { room in
            map.shard(forSlot: RedisClusterSlot.of("rt:{\(app.utf8.count):\(app):\(room)}:meta"))?.master != listMaster
        })
        let store = RedisRoomStore(redis: redis)
        #expect(redis.isAnswering(forKey: listKey))

        // Frozen while a command waits on it: taken for not answering once it waited 100 ms.
        cluster.setRunning(listMaster, false)
        let waiting = Locked<Result<RedisValue, RedisError>?>(nil)
        let waited = DispatchSemaphore(value: 0)
        DispatchQueue.global().async {
            let result = Result { () throws(RedisError) in try redis.command(["PING"], key: listKey) }
            waiting.withLock { $0 = result }
            waited.signal()
        }
        let deadline = ContinuousClock.now + .seconds(10)
        while redis.isAnswering(forKey: listKey), ContinuousClock.now < deadline { try await Task.sleep(for: .milliseconds(10)) }
        #expect(!redis.isAnswering(forKey: listKey))
        // What the health check asks of the store, shard by shard (`RealtimeHub.stalledStoreShards`).
        #expect(store.isAnswering(shard: listMaster.description) == false)
        #expect(store.isAnswering(shard: store.shard(app: app, room: room)) == true)
        #expect(store.isAnswering(shard: "") == false, "work over every shard waits on the frozen one")

        // Kept on its own master while the list's is still frozen.
        let kept = try store.append(app: app, room: room, event: "placed", data: "{}", from: nil, rule: RoomRule(history: 10), at: 1_000)
        #expect(kept.record.id == 1)
        #expect(waiting.withLock { $0 } == nil, "the list's master answered: the test froze nothing")

        // A command that runs into its deadline leaves the master taken for not answering
        // until one is answered.
        let short = RedisClusterConnection(seeds: cluster.endpoints, timeout: 300)
        // (Its map may come from the frozen master's seed after that one's deadline: the master
        // is then taken for not answering already.)
        try short.refreshSlotMap()
        #expect(throws: RedisError.self) { try short.command(["PING"], key: listKey) }
        #expect(!short.isAnswering(forKey: listKey), "taken for not answering after its deadline")

        cluster.setRunning(listMaster, true)
        waited.wait()
        #expect(try short.command(["PING"], key: listKey) == .status("PONG"))
        #expect(short.isAnswering(forKey: listKey))
        #expect(try waiting.withLock { $0 }?.get() == .status("PONG"))
        #expect(redis.isAnswering(forKey: listKey))
        #expect(store.isAnswering(shard: listMaster.description) == true)
        // The next expiry lists it.
        store.expire(now: 2_000)
        let score = try redis.command(["ZSCORE", listKey, room], key: listKey)
        #expect(score.string != nil, "listed after the thaw: \(score)")
    }
}
