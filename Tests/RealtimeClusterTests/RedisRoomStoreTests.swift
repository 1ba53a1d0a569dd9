import Foundation
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import Spawn
import Testing

/// The history store contract, held by the in-memory store, by the SQLite store in a file of its
/// own (`realtime-server --data`) and by the Redis store against a real private `redis-server`
/// (each test its own).
@Suite("Room history stores: in memory, in SQLite and on Redis")
struct RoomStoreContractTests {
    enum Kind: String, CaseIterable, CustomStringConvertible {
        case memory, sqlite, redis
        var description: String { rawValue }
    }

    /// A fresh SQLite file in the temporary folder.
    static func sqlitePath() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("rooms-\(getpid())-\(UUID().uuidString).sqlite3").path
    }

    /// A store of `kind`, and what keeps it alive.
    func make(_ kind: Kind) throws -> (store: any RoomHistoryStore, redis: PrivateRedis?) {
        switch kind {
        case .memory: return (InMemoryRoomStore(), nil)
        case .sqlite: return (try SQLiteRoomStore(path: Self.sqlitePath()), nil)
        case .redis:
            let redis = try PrivateRedis()
            return (RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint)), redis)
        }
    }

    @Test("streams are trimmed by their own count and span; an idle room whose events expired still resumes", arguments: Kind.allCases)
    func trimming(_ kind: Kind) throws {
        let (store, redis) = try make(kind)
        defer { redis?.stop() }
        let busy = RoomRule(history: 10)
        let quiet = RoomRule(history: 10, span: 60)
        let start = try store.append(app: "1", room: "quiet", event: "e", data: "1", from: nil, rule: quiet, at: 0)
        for index in 0..<200 { try store.append(app: "1", room: "busy", event: "e", data: "\(index)", from: nil, rule: busy, at: 1000) }
        #expect(try store.page(app: "1", room: "busy", before: nil, limit: 100, now: 1000).events.map(\.id) == Array(191...200))
        #expect(try store.page(app: "1", room: "quiet", before: nil, limit: 100, now: 1000).events.map(\.id) == [1])
        #expect(try store.page(app: "1", room: "quiet", before: nil, limit: 100, now: 61_001).events.isEmpty)
        let position = RoomPosition(epoch: start.epoch, id: 1)
        #expect(try store.replay(app: "1", room: "quiet", after: position, now: 61_001) == .events([], current: position))
        #expect(try store.replay(app: "1", room: "quiet", after: RoomPosition(epoch: start.epoch, id: 0), now: 61_001) == .unrecoverable(.expired, current: position))
    }

    @Test("a clock that went back never cuts a hole: a room's span and count trim a prefix of its ids, on publish and on expire", arguments: Kind.allCases)
    func trimsAPrefix(_ kind: Kind) throws {
        let (store, redis) = try make(kind)
        defer { redis?.stop() }
        let rule = RoomRule(history: 100, span: 1)
        try store.append(app: "1", room: "r", event: "e", data: "1", from: nil, rule: rule, at: 2_000)
        try store.append(app: "1", room: "r", event: "e", data: "2", from: nil, rule: rule, at: 500)   // the clock went back
        try store.append(app: "1", room: "r", event: "e", data: "3", from: nil, rule: rule, at: 2_600)  // 500 is past the span, 2,000 is not
        #expect(try store.page(app: "1", room: "r", before: nil, limit: 10, now: 2_600).events.map(\.id) == [1, 2, 3])
        store.expire(now: 2_700)
        #expect(try store.page(app: "1", room: "r", before: nil, limit: 10, now: 2_700).events.map(\.id) == [1, 2, 3])
        store.expire(now: 3_100)   // 2,000 is past the span now: 1 and 2 go, 3 stays
        #expect(try store.page(app: "1", room: "r", before: nil, limit: 10, now: 3_100).events.map(\.id) == [3])
    }

    @Test("replay: every event after the position, or why not; never partial", arguments: Kind.allCases)
    func replay(_ kind: Kind) throws {
        let (store, redis) = try make(kind)
        defer { redis?.stop() }
        let rule = RoomRule(history: 5)
        let joined = try store.position(app: "1", room: "r", now: 0)
        #expect(joined.id == 0)
        var records: [RoomEventRecord] = []
        for index in 1...8 {
            records.append(try store.append(app: "1", room: "r", event: "e\(index)", data: #"{"n":\#(index)}"#, from: index.isMultiple(of: 2) ? "u\(index)" : nil, rule: rule, at: Int64(index)).record)
        }
        let current = RoomPosition(epoch: joined.epoch, id: 8)
        #expect(records.map(\.id) == Array(1...8))
        #expect(try store.replay(app: "1", room: "r", after: RoomPosition(epoch: joined.epoch, id: 5), now: 10) == .events(Array(records[5...]), current: current))
        #expect(try store.replay(app: "1", room: "r", after: RoomPosition(epoch: joined.epoch, id: 3), now: 10) == .events(Array(records[3...]), current: current))
        #expect(try store.replay(app: "1", room: "r", after: RoomPosition(epoch: joined.epoch, id: 2), now: 10) == .unrecoverable(.expired, current: current))
        #expect(try store.replay(app: "1", room: "r", after: RoomPosition(epoch: joined.epoch, id: 9), now: 10) == .unrecoverable(.unknownPosition, current: current))
        #expect(try store.replay(app: "1", room: "r", after: RoomPosition(epoch: "other", id: 8), now: 10) == .unrecoverable(.epochChanged, current: current))
        #expect(try store.replay(app: "1", room: "r", after: current, now: 10) == .events([], current: current))
    }

    @Test("replay pages: the kept events after a position, oldest first, at most limit and about maxBytes, with the room's position; from the first kept one past a gap; none of another epoch", arguments: Kind.allCases)
    func replayPages(_ kind: Kind) throws {
        let (store, redis) = try make(kind)
        defer { redis?.stop() }
        let rule = RoomRule(history: 50)
        var records: [RoomEventRecord] = []
        var epoch = ""
        for index in 1...60 {
            let kept = try store.append(app: "1", room: "r", event: "e", data: #"{"n":\#(index)}"#, from: index.isMultiple(of: 2) ? "u" : nil, rule: rule, at: Int64(index))
            records.append(kept.record)
            epoch = kept.epoch
        }
        let current = RoomPosition(epoch: epoch, id: 60)
        let page = { (id: UInt64, limit: Int, bytes: Int) in
            try store.replayPage(app: "1", room: "r", after: RoomPosition(epoch: epoch, id: id), limit: limit, maxBytes: bytes, now: 100)
        }
        #expect(try page(20, 5, 1 << 20) == RoomReplayPage(events: Array(records[20..<25]), current: current))
        // Bytes: the page ends with the record that reaches them.
        let size = records[20].size
        #expect(try page(20, 100, 2 * size + 1).events.map(\.id) == [21, 22])
        #expect(try page(20, 100, 2 * size + 2).events.map(\.id) == [21, 22, 23])
        #expect(try page(20, 100, 1).events.map(\.id) == [21])
        // Ids 1…10 were trimmed by the count: a position before them gets the first kept on.
        #expect(try page(3, 4, 1 << 20).events.map(\.id) == [11, 12, 13, 14])
        #expect(try page(58, 100, 1 << 20).events.map(\.id) == [59, 60])
        #expect(try page(60, 100, 1 << 20) == RoomReplayPage(events: [], current: current))
        #expect(try page(70, 100, 1 << 20) == RoomReplayPage(events: [], current: current))
        #expect(try store.replayPage(app: "1", room: "r", after: RoomPosition(epoch: "other", id: 0), limit: 10, maxBytes: 1 << 20, now: 100)
                == RoomReplayPage(events: [], current: current))
        // A room with no stream gets one (id 0), as `position` makes it.
        let fresh = try store.replayPage(app: "1", room: "new", after: RoomPosition(epoch: "x", id: 0), limit: 10, maxBytes: 1 << 20, now: 100)
        #expect(fresh.events.isEmpty && fresh.current.id == 0)
        #expect(try store.position(app: "1", room: "new", now: 100) == fresh.current)
    }

    @Test("history pages: newest first by page, oldest first within one, with more", arguments: Kind.allCases)
    func pages(_ kind: Kind) throws {
        let (store, redis) = try make(kind)
        defer { redis?.stop() }
        let rule = RoomRule(history: 100)
        for index in 1...25 { try store.append(app: "1", room: "r", event: "e", data: "\(index)", from: nil, rule: rule, at: 5) }
        let newest = try store.page(app: "1", room: "r", before: nil, limit: 10, now: 5)
        #expect(newest.events.map(\.id) == Array(16...25) && newest.more)
        let older = try store.page(app: "1", room: "r", before: 16, limit: 10, now: 5)
        #expect(older.events.map(\.id) == Array(6...15) && older.more)
        let oldest = try store.page(app: "1", room: "r", before: 6, limit: 10, now: 5)
        #expect(oldest.events.map(\.id) == Array(1...5) && !oldest.more)
        #expect(try store.page(app: "1", room: "r", before: 1, limit: 10, now: 5) == RoomStorePage(events: [], more: false))
        #expect(try store.page(app: "1", room: "none", before: nil, limit: 10, now: 5) == RoomStorePage(events: [], more: false))
        #expect(newest.events.last == RoomEventRecord(id: 25, at: 5, event: "e", data: "25", from: nil))
    }

    @Test("a rule with history 0 keeps no event but still numbers them", arguments: Kind.allCases)
    func noHistory(_ kind: Kind) throws {
        let (store, redis) = try make(kind)
        defer { redis?.stop() }
        let rule = RoomRule(history: 0)
        let first = try store.append(app: "1", room: "r", event: "e", data: "1", from: nil, rule: rule, at: 0)
        let second = try store.append(app: "1", room: "r", event: "e", data: "2", from: nil, rule: rule, at: 0)
        #expect(first.record.id == 1 && second.record.id == 2)
        #expect(try store.page(app: "1", room: "r", before: nil, limit: 10, now: 0).events.isEmpty)
    }

    @Test("apps and rooms whose names would run together keep separate streams", arguments: Kind.allCases)
    func separateKeys(_ kind: Kind) throws {
        let (store, redis) = try make(kind)
        defer { redis?.stop() }
        let rule = RoomRule(history: 10)
        try store.append(app: "a:b", room: "c", event: "e", data: "1", from: nil, rule: rule, at: 0)
        try store.append(app: "a", room: "b:c", event: "e", data: "2", from: nil, rule: rule, at: 0)
        #expect(try store.page(app: "a:b", room: "c", before: nil, limit: 10, now: 0).events.map(\.data) == ["1"])
        #expect(try store.page(app: "a", room: "b:c", before: nil, limit: 10, now: 0).events.map(\.data) == ["2"])
    }
}

@Suite("Redis room store: what only a shared, remote store does")
struct RedisRoomStoreTests {
    @Test("two nodes on one Redis: ids continue across them, and a node that never saw the room pages and replays it")
    func twoNodes() throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let nodeA = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
        let nodeB = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
        let rule = RoomRule(history: 100)
        let first = try nodeA.append(app: "1", room: "order:1", event: "e", data: "1", from: nil, rule: rule, at: 1)
        let second = try nodeB.append(app: "1", room: "order:1", event: "e", data: "2", from: "u", rule: rule, at: 2)
        #expect(first.epoch == second.epoch && second.record.id == 2)
        #expect(try nodeB.page(app: "1", room: "order:1", before: nil, limit: 10, now: 3).events.map(\.data) == ["1", "2"])
        let replay = try nodeA.replay(app: "1", room: "order:1", after: RoomPosition(epoch: first.epoch, id: 0), now: 3)
        #expect(replay == .events([first.record, second.record], current: RoomPosition(epoch: first.epoch, id: 2)))
    }

    @Test("after FLUSHALL a room has a new epoch: an old position is told epoch_changed, nothing partial")
    func flushed() throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let connection = RedisConnection(endpoint: redis.endpoint)
        let store = RedisRoomStore(redis: connection)
        let rule = RoomRule(history: 100)
        let before = try store.append(app: "1", room: "r", event: "e", data: "1", from: nil, rule: rule, at: 1)
        #expect(try connection.command("FLUSHALL") == .status("OK"))
        // The script cache survives FLUSHALL; SCRIPT FLUSH too is survived (NOSCRIPT → reload).
        #expect(try connection.command("SCRIPT", "FLUSH") == .status("OK"))
        let replay = try store.replay(app: "1", room: "r", after: RoomPosition(epoch: before.epoch, id: 1), now: 2)
        guard case .unrecoverable(.epochChanged, let current) = replay else {
            Issue.record("expected epoch_changed, got \(replay)")
            return
        }
        #expect(current.epoch != before.epoch && current.id == 0)
        #expect(try store.append(app: "1", room: "r", event: "e", data: "2", from: nil, rule: rule, at: 3).record.id == 1)
    }

    @Test("Redis at its maxmemory refuses an append with full; what was kept stays readable")
    func full() throws {
        let redis = try PrivateRedis(maxMemory: 3 * 1024 * 1024)
        defer { redis.stop() }
        let store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
        let rule = RoomRule(history: 1000)
        let data = String(repeating: "x", count: 4000)
        var kept = 0
        var refusal: RoomStoreError?
        for index in 0..<5000 {
            do {
                try store.append(app: "1", room: "r\(index % 50)", event: "e", data: data, from: nil, rule: rule, at: 1)
                kept += 1
            } catch {
                refusal = error
                break
            }
        }
        #expect(refusal == .full(budget: 3 * 1024 * 1024))
        #expect(kept > 0)
        #expect(try store.page(app: "1", room: "r0", before: nil, limit: 5, now: 1).events.count == 5)
    }

    @Test("Redis gone: a typed unavailable error; restarted empty: the same store reconnects and reports a new epoch")
    func redisGoneAndBack() throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint, timeout: 500))
        let before = try store.append(app: "1", room: "r", event: "e", data: "1", from: nil, rule: RoomRule(history: 10), at: 1)
        try redis.restart()
        // The restart broke the store's connection; with the server back, the next call
        // reconnects by itself, its script cache reloaded (NOSCRIPT) and the lost history told.
        let replay = try store.replay(app: "1", room: "r", after: RoomPosition(epoch: before.epoch, id: 1), now: 2)
        guard case .unrecoverable(.epochChanged, let current) = replay else {
            Issue.record("expected epoch_changed after the restart, got \(replay)")
            return
        }
        #expect(current.epoch != before.epoch)
        redis.stop()
        #expect {
            try store.position(app: "1", room: "r", now: 3)
        } throws: { error in
            guard case .unavailable = error as? RoomStoreError else { return false }
            return true
        }
    }

    @Test("A persistent Redis killed with SIGKILL and restarted keeps every answered write: the same epoch, the history whole, ids going on")
    func persistentRedisRestarted() throws {
        let redis = try PrivateRedis(persistent: true)
        defer { redis.stop() }
        let store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint, timeout: 500))
        var last: (epoch: String, record: RoomEventRecord)?
        for n in 1...50 { last = try store.append(app: "1", room: "r", event: "e", data: "\(n)", from: nil, rule: RoomRule(history: 100), at: Int64(n)) }
        let before = try #require(last)
        try redis.restart()
        let replay = try store.replay(app: "1", room: "r", after: RoomPosition(epoch: before.epoch, id: 10), now: 60)
        guard case .events(let events, let position) = replay else {
            Issue.record("expected the events after id 10 from the same epoch, got \(replay)")
            return
        }
        #expect(position.epoch == before.epoch && events.map(\.id) == Array(11...50))
        let next = try store.append(app: "1", room: "r", event: "e", data: "51", from: nil, rule: RoomRule(history: 100), at: 61)
        #expect(next.epoch == before.epoch && next.record.id == 51)
    }

    @Test("SQLite: a store opened again on the same file (a process killed and started again) keeps every room's epoch, kept events and ids; its budget refuses with full")
    func sqliteReopened() throws {
        let path = RoomStoreContractTests.sqlitePath()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let rule = RoomRule(history: 5, span: 600)
        var first: SQLiteRoomStore? = try SQLiteRoomStore(path: path)
        var records: [RoomEventRecord] = []
        for n in 1...8 { records.append(try first!.append(app: "1", room: "r", event: "e", data: #"{"n":\#(n)}"#, from: n == 8 ? "ann" : nil, rule: rule, at: Int64(n)).record) }
        let before = try first!.position(app: "1", room: "r", now: 9)
        let bytes = first!.bytes
        let issued = RoomRuleRecord(rule: RoomRule(history: 5, span: 600, presence: true), issuedAt: 1_700_000_000)
        #expect(try first!.settleRule(app: "1", room: "r", offered: issued, force: false, now: 9) == issued)
        first = nil
        let second = try SQLiteRoomStore(path: path, budget: bytes + 100)
        #expect(second.bytes == bytes)
        // The rule the backend issued last outlives the process; an older one does not replace it.
        let older = RoomRuleRecord(rule: RoomRule(history: 50), issuedAt: 1_600_000_000)
        #expect(try second.settleRule(app: "1", room: "r", offered: older, force: false, now: 10) == issued)
        #expect(try second.settleRule(app: "1", room: "r", offered: RoomRuleRecord(rule: RoomRule(), issuedAt: 0), force: false, now: 10) == issued)
        #expect(try second.position(app: "1", room: "r", now: 10) == before)
        #expect(try second.replay(app: "1", room: "r", after: RoomPosition(epoch: before.epoch, id: 3), now: 10) == .events(Array(records[3...]), current: before))
        #expect(try second.replay(app: "1", room: "r", after: RoomPosition(epoch: before.epoch, id: 2), now: 10) == .unrecoverable(.expired, current: before))
        let ninth = try second.append(app: "1", room: "r", event: "e", data: "{}", from: nil, rule: rule, at: 11)
        #expect(ninth.epoch == before.epoch && ninth.record.id == 9)
        #expect(throws: RoomStoreError.full(budget: bytes + 100)) {
            try second.append(app: "1", room: "r2", event: "e", data: String(repeating: "x", count: 500), from: nil, rule: rule, at: 12)
        }
        #expect(throws: RoomStoreError.self) { try SQLiteRoomStore(path: "/proc/no/such/folder/rooms.sqlite3") }
        // The file is held by this store alone: a second one on it is refused, not let in to
        // keep counts of its own.
        #expect(throws: RoomStoreError.self) { try SQLiteRoomStore(path: path) }
    }

    @Test("SQLite: a file of another program is refused, untouched; at the room limit the least recently used room that keeps nothing makes room")
    func sqliteOwnFileAndRoomLimit() throws {
        let path = RoomStoreContractTests.sqlitePath()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let other = try ChildProcess.run("/usr/bin/env", ["python3", "-c", "import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); c.execute('create table notes(x)'); c.commit()", path],
                                         timeout: .seconds(20))
        try #require(other.status == 0, "\(other.standardError)")
        #expect(throws: RoomStoreError.self) { try SQLiteRoomStore(path: path) }

        let own = RoomStoreContractTests.sqlitePath()
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: own + suffix) } }
        let store = try SQLiteRoomStore(path: own, maxRooms: 2)
        let rule = RoomRule(history: 5, span: 60)
        try store.append(app: "1", room: "a", event: "e", data: "1", from: nil, rule: rule, at: 0)
        _ = try store.position(app: "1", room: "b", now: 10)
        // b keeps nothing and a keeps an event: b goes, a stays.
        let c = try store.position(app: "1", room: "c", now: 20)
        #expect(c.id == 0)
        #expect(try store.page(app: "1", room: "a", before: nil, limit: 10, now: 30).events.count == 1)
        // a and c: c keeps nothing but was used last; a keeps its event: with both kept busy, refused.
        try store.append(app: "1", room: "c", event: "e", data: "1", from: nil, rule: rule, at: 40)
        #expect(throws: RoomStoreError.tooManyRooms(limit: 2)) { try store.position(app: "1", room: "d", now: 50) }
    }

    @Test("Redis URLs and socket paths parse; anything else is refused")
    func endpoints() throws {
        #expect(try RedisEndpoint(parsing: "redis://127.0.0.1:6380") == .tcp(host: "127.0.0.1", port: 6380))
        #expect(try RedisEndpoint(parsing: "redis://localhost") == .tcp(host: "localhost", port: 6379))
        #expect(try RedisEndpoint(parsing: "redis://[::1]:7000/") == .tcp(host: "::1", port: 7000))
        #expect(try RedisEndpoint(parsing: "/run/redis.sock") == .unix(path: "/run/redis.sock"))
        #expect(try RedisEndpoint(parsing: "unix:///run/redis.sock") == .unix(path: "/run/redis.sock"))
        for bad in ["http://x", "redis://", "redis://h:0", "redis://h:70000", "redis://user@h", "redis://h/1", "relative.sock", "redis://[::1"] {
            #expect(throws: RedisError.invalidEndpoint(bad)) { try RedisEndpoint(parsing: bad) }
        }
    }
}

/// A Redis that lost writes a node saw (a failover promoted a replica without them), played on
/// a real private `redis-server` by taking the last entries out of a room's stream and meta.
@Suite("Redis room store: lost writes")
struct RedisLostWritesTests {
    /// A store whose room `r` kept 5 events, then lost the last 2 as a replica without them
    /// would have it: its position.
    static func roomThatLostTwo(_ redis: PrivateRedis, room: String = "r") throws -> (RedisRoomStore, RoomPosition) {
        let store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
        var epoch = ""
        for seq in 1...5 { epoch = try store.append(app: "1", room: room, event: "e", data: "\(seq)", from: nil, rule: RoomRule(history: 100), at: 1000).epoch }
        let connection = RedisConnection(endpoint: redis.endpoint)
        _ = try connection.command("XDEL", "rt:{1:1:\(room)}:events", "4-0", "5-0")
        #expect(try connection.command("XSETID", "rt:{1:1:\(room)}:events", "3-0") == .status("OK"), "the stream's top as the replica has it")
        _ = try connection.command("HSET", "rt:{1:1:\(room)}:meta", "last", "3")
        return (store, RoomPosition(epoch: epoch, id: 5))
    }

    @Test("a room behind what a node saw in its epoch moves to a new epoch at 0, its events gone; one at or past it, or in another epoch, stays")
    func forkIfBehind() throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let (store, seen) = try Self.roomThatLostTwo(redis)
        #expect(try store.forkIfBehind(app: "1", room: "r", seen: RoomPosition(epoch: seen.epoch, id: 3), now: 1000) == RoomPosition(epoch: seen.epoch, id: 3))
        #expect(try store.forkIfBehind(app: "1", room: "r", seen: RoomPosition(epoch: "another", id: 9), now: 1000) == RoomPosition(epoch: seen.epoch, id: 3))
        let forked = try store.forkIfBehind(app: "1", room: "r", seen: seen, now: 1000)
        #expect(forked.epoch != seen.epoch && forked.id == 0)
        #expect(try store.page(app: "1", room: "r", before: nil, limit: 10, now: 1000).events.isEmpty)
        #expect(try store.forkIfBehind(app: "1", room: "r", seen: seen, now: 1000) == forked, "once: the seen epoch is gone")
        let next = try store.append(app: "1", room: "r", event: "e", data: "6", from: nil, rule: RoomRule(history: 100), at: 1000)
        #expect(next.epoch == forked.epoch && next.record.id == 1)
    }

    @Test("an append from a node that saw further, or from the store that was given those ids, starts the new epoch first: never id 4 again; one from a node that did neither is given 4 again")
    func appendForks() throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let (store, seen) = try Self.roomThatLostTwo(redis)
        // Another node's store, which never appended there and was told nothing.
        let other = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
        let unaware = try other.append(app: "1", room: "r", event: "e", data: "a", from: nil, rule: RoomRule(history: 100), at: 1000, seen: nil)
        #expect(unaware.epoch == seen.epoch && unaware.record.id == 4, "the window the nodes' checks close")
        // The store that was given ids 4 and 5 remembers them, with no position passed.
        let own = try store.append(app: "1", room: "r", event: "e", data: "b", from: nil, rule: RoomRule(history: 100), at: 1000)
        #expect(own.epoch != seen.epoch && own.record.id == 1)
        #expect(try store.page(app: "1", room: "r", before: nil, limit: 10, now: 1000).events.map(\.data) == ["b"])
        // A third node's store, passed the position its node saw, forks as well; then appends in
        // the epoch as it is once it saw no further.
        let (_, seenAgain) = try Self.roomThatLostTwo(redis, room: "q")
        let third = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
        let kept = try third.append(app: "1", room: "q", event: "e", data: "c", from: nil, rule: RoomRule(history: 100), at: 1000, seen: seenAgain)
        #expect(kept.epoch != seenAgain.epoch && kept.record.id == 1)
        let after = try third.append(app: "1", room: "q", event: "e", data: "d", from: nil, rule: RoomRule(history: 100), at: 1000, seen: RoomPosition(epoch: kept.epoch, id: 1))
        #expect(after.epoch == kept.epoch && after.record.id == 2)
    }
}
