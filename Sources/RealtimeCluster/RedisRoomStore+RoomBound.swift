import Redis
import RealtimeServer

/// Rooms per app bounded in Redis as in memory (`RedisRoomStore.maxRooms`): each app's rooms
/// listed by last known use in a sorted set, the least recently used room keeping no event
/// evicted past the bound.
extension RedisRoomStore {
    /// The key of the sorted set listing an app's rooms by last known use (milliseconds since
    /// 1970), which bounds them to `maxRooms`.
    ///
    /// - Parameter app: the app id.
    public static func roomsKey(app: String) -> String { "rt:rooms:\(app.utf8.count):\(app)" }

    /// Most rooms one store keeps admitted but not yet listed (their app's list unreachable).
    static let maxUnlisted = 10_000

    /// Lists the rooms admitted while their app's list was unreachable (`expire`, on the
    /// hub's lane every few seconds).
    func listUnlisted(now: Int64) {
        for app in unlisted.withLock({ Array($0.keys) }) {
            try? admitNewRooms(app: app, [], now: now, refusing: false)
            // Still waiting: the list is still unreachable; the lane is not held for the rest.
            if unlisted.withLock({ $0[app] != nil }) { return }
        }
    }

    /// Whether `rooms`, on other masters than their app's list, are left to the next `expire`
    /// to list (they are then counted unlisted), with room for them under `maxUnlisted`.
    private func deferListing(app: String, _ rooms: [String], list: String) -> Bool {
        guard !rooms.isEmpty, redis.isSharded else { return false }
        let listShard = redis.shard(forKey: list)
        guard rooms.allSatisfy({ redis.shard(forKey: Self.keys(app: app, room: $0)[0]) != listShard }) else { return false }
        return unlisted.withLock { unlisted in
            guard unlisted.values.reduce(0, { $0 + $1.count }) + rooms.count <= Self.maxUnlisted else { return false }
            unlisted[app, default: []] += rooms
            return true
        }
    }

    /// Lists rooms whose meta was just made, and evicts past `maxRooms`: the least recently
    /// listed rooms are looked at, at most `maxEvictionProbes`; one used since it was listed
    /// (its meta's `touched`: every join, append and node check of the room) or keeping events
    /// is listed again by its last use, one neither goes. Not atomic with the scripts (the
    /// list may name a room that expired since): it bounds the app's keys, it never decides a
    /// replay.
    ///
    /// - Parameter refusing: whether rooms still over the bound are taken back and refused
    ///   (a join), or kept (the app's server published there).
    /// - Throws: `RoomStoreError.tooManyRooms` (refusing), `.unavailable`.
    ///
    /// The list is one key per app, on one shard of a Redis Cluster. New rooms on another
    /// master than the list's are admitted unlisted and listed by the next `expire` (on the
    /// hub's node lane), so a room's requests never wait on another master: the
    /// bound then holds within an expiry (5 s) by eviction, the join past it is not refused.
    /// While the list's shard is down (or taken for frozen: `RedisClient.isAnswering`), its own
    /// rooms are admitted unlisted too. At most `maxUnlisted` wait per store; past it, rooms
    /// are listed at once, and refused when that fails.
    func admitNewRooms(app: String, _ rooms: [String], now: Int64, refusing: Bool = true) throws(RoomStoreError) {
        let index = Self.roomsKey(app: app)
        if deferListing(app: app, rooms, list: index) { return }
        let earlier = unlisted.withLock { unlisted in unlisted.removeValue(forKey: app) ?? [] }
        let listing = rooms + earlier.filter { !rooms.contains($0) }
        guard !listing.isEmpty else { return }
        do throws(RedisError) {
            // One ZADD for all (a batch of positions may make `maxPipeline` rooms at once).
            let commands = [["ZADD", index] + listing.flatMap { [String(now), $0] }, ["PEXPIRE", index, String(idleRetention)], ["ZCARD", index]]
            var excess: Int
            do throws(RedisError) {
                // A list whose master is taken for frozen is not asked: the lane of the rooms'
                // own shard is never held by another's (issue 48).
                guard redis.isAnswering(forKey: index) else {
                    throw .connectFailed(endpoint: redis.shard(forKey: index), message: "not answering")
                }
                excess = Int(try redis.pipeline(commands, key: index).last?.integer ?? 0) - maxRooms
            } catch {
                // The list's shard is down, not the rooms': admitted, listed later; past
                // `maxUnlisted`, the new rooms are refused and the earlier ones kept waiting.
                let kept = unlisted.withLock { unlisted -> Bool in
                    let count = unlisted.values.reduce(0) { $0 + $1.count }
                    guard count + listing.count <= Self.maxUnlisted else {
                        if !earlier.isEmpty { unlisted[app, default: []] += earlier }
                        return false
                    }
                    unlisted[app, default: []] += listing
                    return true
                }
                if kept { return }
                throw error
            }
            var probes = 0
            while excess > 0, probes < Self.maxEvictionProbes {
                let popped = try redis.command(["ZPOPMIN", index, String(min(Self.maxEvictionProbes - probes, excess + 8))], key: index).array ?? []
                // [room, score, room, score, …]: each room with the use it was listed at.
                let listed = stride(from: 0, to: popped.count - 1, by: 2).compactMap { index -> (room: String, score: String)? in
                    guard let room = popped[index].string, let score = popped[index + 1].string else { return nil }
                    return (room, score)
                }
                guard !listed.isEmpty else { break }
                probes += listed.count
                // The rooms just made are not candidates: they go back on the list.
                var relist = listed.filter { listing.contains($0.room) }.map { ["ZADD", index, String(now), $0.room] }
                let candidates = listed.filter { !listing.contains($0.room) }
                if !candidates.isEmpty {
                    // Each candidate apart: one whose shard is down goes back on the list as it
                    // was, and counts as kept.
                    let verdicts = try redis.evaluateEach(source(.evict), calls: candidates.map { (Self.keys(app: app, room: $0.room), [$0.score]) })
                    for (candidate, verdict) in zip(candidates, verdicts) {
                        switch verdict {
                        case .success(let reply) where (reply.integer ?? 0) < 0:
                            excess -= 1
                        case .success(let reply):
                            relist.append(["ZADD", index, reply.integer.map(String.init) ?? candidate.score, candidate.room])
                        case .failure:
                            relist.append(["ZADD", index, candidate.score, candidate.room])
                        }
                    }
                }
                if !relist.isEmpty { _ = try redis.pipeline(relist, key: index) }
            }
            guard excess > 0, refusing else { return }
            // Every room looked at keeps events: the new ones are taken back, and refused.
            _ = try redis.evaluate(source(.evict), calls: rooms.map { (Self.keys(app: app, room: $0), [String(now)]) })
            _ = try redis.pipeline([["ZREM", index] + rooms], key: index)
        } catch {
            throw .unavailable("\(error)")
        }
        throw .tooManyRooms(limit: maxRooms)
    }
}
