import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport

/// Rooms' history in Redis (DESIGN.md, "Scale-out"), so every node of a cluster answers a
/// resume or a history page for any room, and a node restart loses nothing.
///
/// Per room, under one hash tag (`rt:{<app length>:<app>:<room>}`, so a Redis Cluster keeps a
/// room's keys on one shard): a hash `…:meta` with the epoch, the last id, the rule's span and
/// when it was last used, and a stream `…:events` whose entry ids are the event ids (`N-0`)
/// with fields `t` (time, ms), `e` (event), `d` (data) and `f` (sender, when there is one).
/// Every step is one Lua script, so an append's id, its entry and the trim happen atomically
/// and ids stay contiguous whichever node appends.
///
/// Every append also publishes the kept event to the room's pub/sub channel (`liveChannel`),
/// in the same script: the nodes following the room deliver in the history's order.
///
/// Memory: each stream is trimmed to the rule's count (`XADD … MAXLEN`) and span (entries older
/// than the span, on every use), and expires by Redis TTL one span after its last append, so an
/// idle room's events free themselves; a room's meta expires after `idleRetention` unused.
/// Rooms per app are bounded as in memory (`maxRooms`): each app's rooms are listed in a sorted
/// set `rt:rooms:<app length>:<app>` by last known use, and a new room past the bound evicts the
/// least recently used room that keeps no event (its epoch is lost: a resume there is told
/// `epoch_changed`); a join that finds only rooms keeping events is refused (`tooManyRooms`). A
/// Redis at its `maxmemory` (with `noeviction`) refuses an append: `RoomStoreError.full`,
/// nothing kept. A flushed or restarted Redis without persistence loses the epochs: a resume
/// is then told `epoch_changed`, never replayed partially.
public final class RedisRoomStore: RoomHistoryStore {
    /// How long a room's epoch and last id are kept after its last use, in milliseconds
    /// (24 hours, as `InMemoryRoomStore.idleRetention`): an idle room whose events expired
    /// still resumes.
    public let idleRetention: Int64 = 24 * 3600 * 1000

    /// Most rooms with a meta per app (100,000 by default, as `InMemoryRoomStore.maxRooms`):
    /// anyone holding a public grant can join any room its pattern matches, and each join of a
    /// new room would otherwise leave keys in Redis for `idleRetention`.
    public let maxRooms: Int

    /// Where the store's commands run: one Redis (one at a time) or a Redis Cluster (each
    /// room's on the master of its hash tag's slot).
    let redis: any RedisClient
    /// The scripts' sources for `redis` (its pub/sub verb: `PUBLISH`, or `SPUBLISH` on a
    /// cluster), made once.
    let scripts: [Script: String]

    /// How many times an append is sent when the connection breaks before its answer (a
    /// frozen Redis times out after the connection's deadline): three, so an append rides out
    /// a freeze of about twice that deadline (4 s by default) and is kept once.
    public static let appendAttempts = 3
    /// This store's name in its append marks (random, per process).
    private let instance = Crypto.hex(Crypto.randomBytes(8))
    /// The last append token given out (random start).
    private let appendTokens = Locked(UInt64.random(in: 0...UInt64.max / 2))

    /// This store's last append to each room (its epoch and id), passed to the next append as
    /// what was seen: a node that publishes to a room it does not follow still never has an id
    /// it was given handed out again after a failover lost it. At most `maxLastAppends` rooms
    /// (then forgotten all at once, and remembered again as they are appended to).
    let lastAppends = Locked<[String: RoomPosition]>([:])
    /// Most rooms `lastAppends` remembers.
    static let maxLastAppends = 10_000

    /// Rooms admitted while their app's list was unreachable (its Redis Cluster shard down),
    /// by app, to list at the next admission or `expire` (`maxUnlisted` in all).
    let unlisted = Locked<[String: [String]]>([:])

    /// Most rooms one new room makes the store look at for eviction (those used since they
    /// were listed, or keeping events, are listed again).
    static let maxEvictionProbes = 64

    /// Creates a store on `redis` (the connection is opened by the first call).
    ///
    /// - Parameters:
    ///   - redis: one Redis (`RedisConnection`) or a Redis Cluster (`RedisClusterConnection`:
    ///     a room's keys and live channel share its hash tag's slot, and its events are
    ///     published with `SPUBLISH` on that slot's shard).
    ///   - maxRooms: most rooms per app (at least 1).
    public init(redis: any RedisClient, maxRooms: Int = 100_000) {
        self.redis = redis
        self.maxRooms = max(1, maxRooms)
        self.scripts = Dictionary(uniqueKeysWithValues: Script.allCases.map { ($0, $0.source(sharded: redis.isSharded)) })
    }

    /// The master serving the room's keys as the slot map last read says, `""` on one Redis
    /// (`RoomHistoryStore`).
    public func shard(app: String, room: String) -> String {
        redis.shard(forKey: Self.keys(app: app, room: room)[0])
    }

    /// Whether the shard's Redis answered its last command in time (`RedisClient.isAnswering`):
    /// a long job of many quick commands is not a stall (`RoomHistoryStore`).
    public func isAnswering(shard: String) -> Bool? {
        redis.isAnswering(shard: shard)
    }

    /// The room's position, creating its meta (a new epoch, id 0) when it has none
    /// (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses,
    ///   `.tooManyRooms` when the room is new and every room listed for the app keeps events.
    public func position(app: String, room: String, now: Int64) throws(RoomStoreError) -> RoomPosition {
        let reply = try run(.position, app: app, room: room, [Self.newEpoch(), String(now), String(idleRetention)])
        guard let values = reply.array, values.count >= 3, let epoch = values[0].string, let last = values[1].integer, last >= 0 else {
            throw Self.malformed(reply)
        }
        if values[2].integer == 1 { try admitNewRooms(app: app, [room], now: now) }
        return RoomPosition(epoch: epoch, id: UInt64(last))
    }

    /// Keeps one event with the next id and trims the stream to `rule` (`RoomHistoryStore`).
    /// When the connection breaks before the answer, the append is sent again (up to
    /// `appendAttempts` in all) with the same token, which the script finds in the store's
    /// mark (`…:a:<store>`, a minute's key) if an earlier attempt ran: kept once.
    ///
    /// - Throws: `RoomStoreError.full` when Redis is at its `maxmemory` (nothing kept),
    ///   `.unavailable` when it cannot be reached or refuses otherwise (after the last
    ///   attempt, the event may still be kept: Redis may run it once it answers again).
    @discardableResult
    public func append(app: String, room: String, event: String, data: String, from: String?, rule: RoomRule, at: Int64) throws(RoomStoreError) -> (epoch: String, record: RoomEventRecord) {
        try append(app: app, room: room, event: event, data: data, from: from, rule: rule, at: at, seen: nil)
    }

    /// Keeps one event as `append(app:room:event:data:from:rule:at:)` does, in a new epoch
    /// first when the room's last id is below `seen` in the same epoch (`RoomHistoryStore`;
    /// the append script forks as `forkIfBehind` does, in the same step).
    ///
    /// - Throws: as `append(app:room:event:data:from:rule:at:)`.
    @discardableResult
    public func append(app: String, room: String, event: String, data: String, from: String?, rule: RoomRule, at: Int64,
                       seen: RoomPosition?) throws(RoomStoreError) -> (epoch: String, record: RoomEventRecord) {
        let token = appendTokens.withLock { counter -> String in
            counter &+= 1
            return String(counter)
        }
        // What the node saw, or this store's own last append to the room if further.
        let roomKey = "\(app.utf8.count):\(app):\(room)"
        let furthest = Self.furthest(seen, lastAppends.withLock { $0[roomKey] })
        let arguments = [
            event, data, from ?? "", from == nil ? "0" : "1", String(at), String(rule.history),
            String(Int64(rule.span) * 1000), Self.newEpoch(), String(idleRetention), Self.liveChannel(app: app, room: room), token,
            furthest?.epoch ?? "", String(min(furthest?.id ?? 0, 1 << 53)),
        ]
        let keys = Self.keys(app: app, room: room) + [Self.appendMarkKey(app: app, room: room, store: instance)]
        var reply = RedisValue.null
        // Sent again while the connection broke before the answer came (a Redis frozen past
        // the deadline, a dropped connection): the same token, so it is kept once whichever
        // attempts ran.
        for attempt in 1...Self.appendAttempts {
            do {
                reply = try checked(try redis.evaluate(source(.append), keys: keys, arguments: arguments), .append, app: app, room: room)
                break
            } catch let error as RoomStoreError {
                throw error
            } catch RedisError.connectionLost where attempt < Self.appendAttempts {
                continue
            } catch {
                throw .unavailable("\(error)")
            }
        }
        guard let values = reply.array, values.count >= 3, let epoch = values[0].string, let id = values[1].integer, id > 0 else {
            throw Self.malformed(reply)
        }
        // The app's server made the room: listed and counted, never refused.
        if values[2].integer == 1 { try? admitNewRooms(app: app, [room], now: at, refusing: false) }
        lastAppends.withLock { appends in
            if appends[roomKey] == nil, appends.count >= Self.maxLastAppends { appends.removeAll(keepingCapacity: true) }
            appends[roomKey] = RoomPosition(epoch: epoch, id: UInt64(id))
        }
        return (epoch, RoomEventRecord(id: UInt64(id), at: at, event: event, data: data, from: from))
    }

    /// Every event after `position` if all are still kept, the epoch matches and they come to
    /// at most `maxBytes`, else why not (`RoomHistoryStore`); creates the room's meta when it
    /// has none. The script reads the stream a page at a time and stops past `maxBytes`, so a
    /// position far back sends nothing out of Redis.
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses.
    public func replay(app: String, room: String, after position: RoomPosition, now: Int64, maxBytes: Int) throws(RoomStoreError) -> RoomReplay {
        let arguments = [
            Self.newEpoch(), String(now), String(idleRetention), position.epoch, String(position.id), String(RoomRule.maxHistory),
            String(min(maxBytes, Int(Int32.max))),
        ]
        let reply = try run(.replay, app: app, room: room, arguments)
        guard let values = reply.array, values.count >= 5, let epoch = values[0].string, let last = values[1].integer, last >= 0,
              let verdict = values[2].string else {
            throw Self.malformed(reply)
        }
        if values[4].integer == 1 { try admitNewRooms(app: app, [room], now: now) }
        let current = RoomPosition(epoch: epoch, id: UInt64(last))
        if let reason = RoomUnrecoverableReason(rawValue: verdict) { return .unrecoverable(reason, current: current) }
        guard verdict == "ok", values.count >= 4, let entries = values[3].array else { throw Self.malformed(reply) }
        return .events(try entries.map(Self.record), current: current)
    }

    /// Up to `limit` kept events after `position`, oldest first, until they come to `maxBytes`,
    /// and the room's position, read in one script (`RoomHistoryStore`); creates the room's
    /// meta when it has none.
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses.
    public func replayPage(app: String, room: String, after position: RoomPosition, limit: Int, maxBytes: Int, now: Int64) throws(RoomStoreError) -> RoomReplayPage {
        let arguments = [
            Self.newEpoch(), String(now), String(idleRetention), position.epoch, String(min(position.id, 1 << 53)),
            String(min(max(1, limit), RoomRule.maxHistory)), String(min(max(1, maxBytes), Int(Int32.max))),
        ]
        let reply = try run(.replayPage, app: app, room: room, arguments)
        guard let values = reply.array, values.count >= 4, let epoch = values[0].string, let last = values[1].integer, last >= 0,
              let entries = values[2].array else {
            throw Self.malformed(reply)
        }
        if values[3].integer == 1 { try admitNewRooms(app: app, [room], now: now) }
        return RoomReplayPage(events: try entries.map(Self.record), current: RoomPosition(epoch: epoch, id: UInt64(last)))
    }

    /// The newest `limit` events before `before`, oldest first (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses.
    public func page(app: String, room: String, before: UInt64?, limit: Int, now: Int64) throws(RoomStoreError) -> RoomStorePage {
        let limit = min(max(0, limit), RoomRule.maxHistory)
        // Ids are below 2^53 (a Lua number is a double): a larger `before` is past every id.
        let reply = try run(.page, app: app, room: room, [String(now), before.map { String(min($0, 1 << 53)) } ?? "", String(limit)])
        guard let values = reply.array, values.count >= 2, let entries = values[0].array, let more = values[1].integer else {
            throw Self.malformed(reply)
        }
        return RoomStorePage(events: try entries.reversed().map(Self.record), more: more == 1)
    }

    /// The room's rule once `offered` is weighed, kept in its meta (fields `rule`, the rule as
    /// JSON, and `ri`, when the backend issued it) so every node of the cluster applies the
    /// one issued last (`RoomHistoryStore`); creates the room's meta when it has none.
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses, or its
    ///   kept rule does not decode; `.tooManyRooms` for a new room past `maxRooms` (unless forced).
    public func settleRule(app: String, room: String, offered: RoomRuleRecord, force: Bool, now: Int64) throws(RoomStoreError) -> RoomRuleRecord {
        let text: String
        do {
            text = try RealtimeMessage.jsonText(offered.rule)
        } catch {
            throw .unavailable("the rule does not encode: \(error)")
        }
        let reply = try run(.rule, app: app, room: room, [Self.newEpoch(), String(now), String(idleRetention), text, String(offered.issuedAt), force ? "1" : "0"])
        guard let values = reply.array, values.count >= 3, let kept = values[0].string, let issuedAt = values[1].integer else {
            throw Self.malformed(reply)
        }
        if values[2].integer == 1 { try admitNewRooms(app: app, [room], now: now, refusing: !force) }
        guard kept != text else { return RoomRuleRecord(rule: offered.rule, issuedAt: Int(issuedAt)) }
        do {
            return RoomRuleRecord(rule: try StrictJSON.decode(RoomRule.self, from: kept.utf8), issuedAt: Int(issuedAt))
        } catch {
            throw .unavailable("the room's kept rule does not decode: \(error)")
        }
    }


    /// Lists the rooms admitted while their app's list was unreachable; nothing else: Redis
    /// frees an idle room's events by their TTL, and each use trims its room
    /// (`RoomHistoryStore`).
    public func expire(now: Int64) { listUnlisted(now: now) }

    // MARK: - Keys, scripts, replies

    /// The room's two keys, sharing one hash tag.
    static func keys(app: String, room: String) -> [String] {
        let tag = FanoutTopic.room(app: app, room: room).hashTag
        return [tag + ":meta", tag + ":events"]
    }

    /// The key of one store's mark of its last append to a room (same hash tag as the room's
    /// keys; expires a minute after that append).
    static func appendMarkKey(app: String, room: String, store: String) -> String {
        FanoutTopic.room(app: app, room: room).hashTag + ":a:\(store)"
    }

    /// The pub/sub channel the append script publishes a room's kept events to (same hash
    /// tag as its keys): `RedisFanout` follows it while the node has members there.
    static func liveChannel(app: String, room: String) -> String {
        FanoutTopic.room(app: app, room: room).hashTag + ":live"
    }

    /// A new epoch: 16 random hex digits.
    static func newEpoch() -> String { Crypto.hex(Crypto.randomBytes(8)) }

    /// A script's source for this store's Redis.
    func source(_ script: Script) -> String { scripts[script] ?? script.source(sharded: redis.isSharded) }

    /// Runs one of the store's scripts on the room's keys (`RedisClient.evaluate`).
    func run(_ script: Script, app: String, room: String, _ arguments: [String]) throws(RoomStoreError) -> RedisValue {
        let reply: RedisValue
        do {
            reply = try redis.evaluate(source(script), keys: Self.keys(app: app, room: room), arguments: arguments)
        } catch {
            throw .unavailable("\(error)")
        }
        return try checked(reply, script, app: app, room: room)
    }

    /// A reply, or the error it is: `full` for Redis's `OOM`, else `unavailable`.
    func checked(_ reply: RedisValue, _ script: Script, app: String, room: String) throws(RoomStoreError) -> RedisValue {
        guard case .error(let message) = reply else { return reply }
        if message.hasPrefix("OOM") { throw .full(budget: maxMemory(app: app, room: room)) }
        throw .unavailable("Redis refused the \(script) script: \(message)")
    }

    /// The `maxmemory` in bytes of the Redis holding the room, for the `full` error (0 when it
    /// cannot be read).
    private func maxMemory(app: String, room: String) -> Int {
        guard let reply = try? redis.command(["CONFIG", "GET", "maxmemory"], key: Self.keys(app: app, room: room)[0]), let values = reply.array, values.count == 2,
              let bytes = values[1].integer else { return 0 }
        return Int(bytes)
    }

    /// A stream entry `[id, [field, value, …]]` as a record.
    private static func record(_ entry: RedisValue) throws(RoomStoreError) -> RoomEventRecord {
        guard let parts = entry.array, parts.count == 2, let id = parts[0].string, let fields = parts[1].array, fields.count % 2 == 0,
              let number = UInt64(id.prefix { $0 != "-" }) else {
            throw malformed(entry)
        }
        var at: Int64?
        var event: String?
        var data: String?
        var from: String?
        for index in stride(from: 0, to: fields.count, by: 2) {
            switch fields[index].string {
            case "t": at = fields[index + 1].integer
            case "e": event = fields[index + 1].string
            case "d": data = fields[index + 1].string
            case "f": from = fields[index + 1].string
            default: break
            }
        }
        guard let at, let event, let data else { throw malformed(entry) }
        return RoomEventRecord(id: number, at: at, event: event, data: data, from: from)
    }

    /// The error for a reply of another shape than the script's.
    static func malformed(_ reply: RedisValue) -> RoomStoreError {
        .unavailable("an unexpected answer from Redis: \(String(describing: reply).prefix(200))")
    }
}
