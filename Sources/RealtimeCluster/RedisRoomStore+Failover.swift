import RealtimeProtocol
import RealtimeServer
import Redis

/// What a Redis Cluster failover may take from the store (DESIGN.md, "Scale-out"): a promoted
/// replica can lack its master's last writes, since replication is asynchronous. A room whose
/// history went back below what a node saw (or what this store was given) moves to a new
/// epoch, so those ids are not given to other events; and the rooms' positions are read by
/// shard, so one down stops only its own.
extension RedisRoomStore {
    /// The room's position, in a new epoch when its last id is below `seen` in the same epoch
    /// (`RoomHistoryStore`): a failover promoted a replica that lacked the last writes, and
    /// the ids after its last would be given again. One script (`fork`): the events go, the
    /// new epoch starts at id 0.
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses.
    public func forkIfBehind(app: String, room: String, seen: RoomPosition, now: Int64) throws(RoomStoreError) -> RoomPosition {
        let reply = try run(.fork, app: app, room: room, [Self.newEpoch(), String(now), String(idleRetention), seen.epoch, String(min(seen.id, 1 << 53))])
        guard let values = reply.array, values.count >= 3, let epoch = values[0].string, let last = values[1].integer, last >= 0 else {
            throw Self.malformed(reply)
        }
        if values[2].integer == 1 { try? admitNewRooms(app: app, [room], now: now, refusing: false) }
        return RoomPosition(epoch: epoch, id: UInt64(last))
    }

    /// The further of two positions of one room in the same epoch, else the first given.
    static func furthest(_ seen: RoomPosition?, _ appended: RoomPosition?) -> RoomPosition? {
        guard let appended else { return seen }
        guard let seen else { return appended }
        return seen.epoch == appended.epoch && appended.id > seen.id ? appended : seen
    }

    /// Several rooms' positions in one round trip per Redis (`RoomHistoryStore`): the position
    /// script pipelined once per room.
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses, for any
    ///   of the rooms.
    public func positions(app: String, rooms: [String], now: Int64) throws(RoomStoreError) -> [RoomPosition] {
        var positions: [RoomPosition] = []
        positions.reserveCapacity(rooms.count)
        for position in try reachablePositions(app: app, rooms: rooms, now: now, strict: true) {
            guard let position else { throw .unavailable("a room's Redis cannot be reached") }
            positions.append(position)
        }
        return positions
    }

    /// Several rooms' positions, `nil` for those whose Redis Cluster shard cannot be reached
    /// (`RoomHistoryStore`): the others are read.
    ///
    /// - Throws: `RoomStoreError.unavailable` when no room's position could be read.
    public func reachablePositions(app: String, rooms: [String], now: Int64) throws(RoomStoreError) -> [RoomPosition?] {
        try reachablePositions(app: app, rooms: rooms, now: now, strict: false)
    }

    /// The positions, batch by batch (`RedisClient.evaluateEach`); `strict`: the first room
    /// that cannot be read throws.
    private func reachablePositions(app: String, rooms: [String], now: Int64, strict: Bool) throws(RoomStoreError) -> [RoomPosition?] {
        var positions: [RoomPosition?] = []
        positions.reserveCapacity(rooms.count)
        var firstFailure: RoomStoreError?
        for start in stride(from: 0, to: rooms.count, by: RedisConnection.maxPipeline) {
            let calls = rooms[start..<min(start + RedisConnection.maxPipeline, rooms.count)].map { room in
                (keys: Self.keys(app: app, room: room), arguments: [Self.newEpoch(), String(now), String(idleRetention)])
            }
            let results: [Result<RedisValue, RedisError>]
            do {
                results = try redis.evaluateEach(source(.position), calls: calls)
            } catch {
                throw .unavailable("\(error)")
            }
            var created: [String] = []
            for (room, result) in zip(rooms[start...], results) {
                do throws(RoomStoreError) {
                    let reply: RedisValue
                    switch result {
                    case .success(let value): reply = value
                    case .failure(let error): throw .unavailable("\(error)")
                    }
                    let value = try checked(reply, .position, app: app, room: room)
                    guard let values = value.array, values.count >= 3, let epoch = values[0].string, let last = values[1].integer, last >= 0 else {
                        throw Self.malformed(value)
                    }
                    if values[2].integer == 1 { created.append(room) }
                    positions.append(RoomPosition(epoch: epoch, id: UInt64(last)))
                } catch {
                    if strict { throw error }
                    firstFailure = firstFailure ?? error
                    positions.append(nil)
                }
            }
            if !created.isEmpty { try? admitNewRooms(app: app, created, now: now, refusing: false) }
        }
        if let firstFailure, !positions.contains(where: { $0 != nil }) { throw firstFailure }
        return positions
    }
}
