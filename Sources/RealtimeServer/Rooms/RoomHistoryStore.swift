import RealtimeProtocol

/// Where rooms keep their events: one ordered stream per room with an epoch and a last id,
/// trimmed by the room rule's span and count, so a busy room never evicts a quiet one's
/// history (DESIGN.md, "Rooms: the mechanisms to build on"). `InMemoryRoomStore` is the
/// embedded default; a cluster puts Redis behind the same protocol.
///
/// The hub never calls the store under its lock nor on the WebSocket service thread (issue
/// 31): appends, joins' reads and the sweep's checks run on its lane (`RoomLane`, one call at
/// a time, so on one node the order of appends is the order of live delivery), the HTTP API's
/// history pages on the HTTP handlers' threads. A store may therefore wait on a remote server,
/// must be thread-safe, and must not call back into the hub.
public protocol RoomHistoryStore: Sendable {
    /// The room's current position, creating its stream (a new epoch, id 0) when it has none:
    /// a room joined before any event was published can then be resumed.
    ///
    /// - Parameters:
    ///   - app: the app's id.
    ///   - room: the room's name.
    ///   - now: milliseconds since 1970.
    /// - Throws: `RoomStoreError.tooManyRooms` when a new stream cannot be created.
    func position(app: String, room: String, now: Int64) throws(RoomStoreError) -> RoomPosition

    /// Keeps one event with the next id, then trims the stream to `rule`'s span and count.
    ///
    /// - Parameters:
    ///   - app: the app's id.
    ///   - room: the room's name.
    ///   - event: the event's name.
    ///   - data: the event's data as JSON text.
    ///   - from: the sending user's id, or `nil` (the app's server).
    ///   - rule: the room's rule: its count and span trim the stream.
    ///   - at: the event's time, in milliseconds since 1970.
    /// - Returns: the stream's epoch and the kept record.
    /// - Throws: `RoomStoreError.full` over the memory budget (nothing kept), `.tooManyRooms`.
    @discardableResult
    func append(app: String, room: String, event: String, data: String, from: String?, rule: RoomRule, at: Int64) throws(RoomStoreError) -> (epoch: String, record: RoomEventRecord)

    /// Every event after `position`, oldest first, if all of them are still kept, the epoch is
    /// the same and their records come to at most `maxBytes`; otherwise why not. Never a
    /// partial answer.
    ///
    /// - Parameters:
    ///   - app: the app's id.
    ///   - room: the room's name.
    ///   - position: where the reader is.
    ///   - now: milliseconds since 1970 (events older than the span are gone).
    ///   - maxBytes: most bytes of records (`RoomEventRecord.size`) to read: past it the answer
    ///     is `.unrecoverable(.tooLarge, …)`, and a remote store sends none of them, so one
    ///     request costs its reader at most this much whatever the store keeps.
    func replay(app: String, room: String, after position: RoomPosition, now: Int64, maxBytes: Int) throws(RoomStoreError) -> RoomReplay

    /// One page of a streamed replay (docs/rooms-protocol.md "Replay"): up to `limit` kept
    /// events after `position`, oldest first, ending with the first that brings their records
    /// (`RoomEventRecord.size`) to `maxBytes` or more, and the room's current position, read
    /// in one step. The first event may come after `position.id + 1`: the events between are
    /// no longer kept (a gap). When `position.epoch` is not the room's, no event is returned
    /// and `current` names the room's epoch (ids of another epoch are never handed out as the
    /// asked one's). Creates the room's stream when it has none, as `position` does.
    ///
    /// - Parameters:
    ///   - app: the app's id.
    ///   - room: the room's name.
    ///   - position: where the page starts after.
    ///   - limit: most events (at least 1 is asked for).
    ///   - maxBytes: bytes of records after which the page ends.
    ///   - now: milliseconds since 1970 (events older than the span are gone).
    /// - Throws: as `position`; `.unavailable` for a remote store that cannot be reached.
    func replayPage(app: String, room: String, after position: RoomPosition, limit: Int, maxBytes: Int, now: Int64) throws(RoomStoreError) -> RoomReplayPage

    /// The newest `limit` events before the id `before` (all when `nil`), oldest first.
    ///
    /// - Parameters:
    ///   - app: the app's id.
    ///   - room: the room's name.
    ///   - before: the id the page ends before, or `nil` for the newest.
    ///   - limit: most events.
    ///   - now: milliseconds since 1970.
    func page(app: String, room: String, before: UInt64?, limit: Int, now: Int64) throws(RoomStoreError) -> RoomStorePage

    /// The current positions of several rooms of one app, in the order asked, creating the
    /// streams of those that have none (a cluster node compares them with what it delivered).
    ///
    /// - Parameters:
    ///   - app: the app's id.
    ///   - rooms: the rooms' names.
    ///   - now: milliseconds since 1970.
    /// - Throws: as `position`.
    func positions(app: String, rooms: [String], now: Int64) throws(RoomStoreError) -> [RoomPosition]

    /// `positions`, each room's apart: `nil` for a room whose part of the store cannot be
    /// reached now (a Redis Cluster shard down), so the others are compared without it.
    ///
    /// - Throws: as `position`, when no room's position could be read.
    func reachablePositions(app: String, rooms: [String], now: Int64) throws(RoomStoreError) -> [RoomPosition?]

    /// Drops events past their room's span in every room, so an idle room's expired events do
    /// not hold the store's memory. The hub calls it every few seconds.
    ///
    /// - Parameter now: milliseconds since 1970.
    func expire(now: Int64)

    /// The room's rule once `offered` is weighed (docs/rooms-protocol.md "Where the rules
    /// travel"): a store shared by a cluster's nodes keeps the record the backend issued last,
    /// so every node applies the backend's newest word whichever node saw it, and no node that
    /// has not seen the room lets an older token set it. `offered` replaces the kept record only
    /// when issued later, or when `force`d (the app's server speaking: then kept with the later
    /// of the two times).
    ///
    /// - Parameters:
    ///   - app: the app's id.
    ///   - room: the room's name.
    ///   - offered: the rule a token or publish brings, with when the backend issued it.
    ///   - force: the app's server speaking: `offered` replaces the kept record whatever its time.
    ///   - now: milliseconds since 1970.
    /// - Returns: the record kept now.
    /// - Throws: `RoomStoreError.unavailable`; `.tooManyRooms` for a new room past the bound
    ///   (unless forced).
    func settleRule(app: String, room: String, offered: RoomRuleRecord, force: Bool, now: Int64) throws(RoomStoreError) -> RoomRuleRecord

    /// The room's position, in a new epoch when its history went back below `seen` in the
    /// same epoch: the store lost writes a node saw (a Redis failover promoted a replica that
    /// lacked them: replication is asynchronous; or a restore from an older copy). Its ids
    /// after the kept last would otherwise be given again to other events; in a new epoch a
    /// member who saw them is told exactly what it misses (an `epoch_changed` gap from its
    /// position). Only positions this node saw from the store or its bus are passed, never a
    /// client's claim (a forged position would end every member's epoch).
    ///
    /// - Parameters:
    ///   - app: the app's id.
    ///   - room: the room's name.
    ///   - seen: the furthest position this node saw the room at.
    ///   - now: milliseconds since 1970.
    /// - Returns: the room's position now (a new epoch, id 0, when it went back).
    /// - Throws: as `position`.
    func forkIfBehind(app: String, room: String, seen: RoomPosition, now: Int64) throws(RoomStoreError) -> RoomPosition

    /// `append(app:room:event:data:from:rule:at:)`, in a new epoch first when the room's
    /// history went back below `seen` (as `forkIfBehind`, in the same step): a node that saw
    /// ids a failover lost never has them given to its own new events.
    ///
    /// - Parameters:
    ///   - app: the app's id.
    ///   - room: the room's name.
    ///   - event: the event's name.
    ///   - data: the event's data as JSON text.
    ///   - from: the sending user's id, or `nil` (the app's server).
    ///   - rule: the room's rule: its count and span trim the stream.
    ///   - at: the event's time, in milliseconds since 1970.
    ///   - seen: the furthest position this node saw the room at, or `nil`.
    /// - Returns: the stream's epoch and the kept record.
    /// - Throws: as `append(app:room:event:data:from:rule:at:)`.
    @discardableResult
    func append(app: String, room: String, event: String, data: String, from: String?, rule: RoomRule, at: Int64,
                seen: RoomPosition?) throws(RoomStoreError) -> (epoch: String, record: RoomEventRecord)

    /// Which part of the store serves the room: a Redis Cluster master's address, as the slot
    /// map last read says, or `""` for a store reached whole (one Redis, SQLite, memory). The
    /// hub's room lane keeps one serial lane per shard, so a shard that stops answering holds
    /// only its own rooms' requests. Answered from memory, never by asking the
    /// store.
    func shard(app: String, room: String) -> String

    /// Whether the shard (`shard(app:room:)`'s name) answered its last request in time, known
    /// without asking it, or `nil` when the store cannot tell (the hub then goes by how long its
    /// lane has run one request: `RealtimeHub.stalledStoreShards`).
    func isAnswering(shard: String) -> Bool?
}

extension RoomHistoryStore {
    /// `""`: a store reached whole, one lane for every room.
    public func shard(app: String, room: String) -> String { "" }

    /// `nil`: the store cannot tell.
    public func isAnswering(shard: String) -> Bool? { nil }

    /// `append(app:room:event:data:from:rule:at:)`, `seen` left aside: for a store whose
    /// history never goes back (one process's memory).
    ///
    /// - Throws: as `append(app:room:event:data:from:rule:at:)`.
    @discardableResult
    public func append(app: String, room: String, event: String, data: String, from: String?, rule: RoomRule, at: Int64,
                       seen: RoomPosition?) throws(RoomStoreError) -> (epoch: String, record: RoomEventRecord) {
        try append(app: app, room: room, event: event, data: data, from: from, rule: rule, at: at)
    }

    /// The room's position as it is (`position`): for a store whose history never goes back
    /// (one process's memory).
    ///
    /// - Throws: as `position`.
    public func forkIfBehind(app: String, room: String, seen: RoomPosition, now: Int64) throws(RoomStoreError) -> RoomPosition {
        try position(app: app, room: room, now: now)
    }

    /// `offered` as it is: a store that keeps no rules (one node's memory, whose hub keeps
    /// them itself).
    public func settleRule(app: String, room: String, offered: RoomRuleRecord, force: Bool, now: Int64) throws(RoomStoreError) -> RoomRuleRecord {
        offered
    }

    /// Every event after `position` however large (`replay(app:room:after:now:maxBytes:)`
    /// with no byte bound): for a node catching up its own cursor, never for a peer's request.
    ///
    /// - Throws: as `replay(app:room:after:now:maxBytes:)`.
    public func replay(app: String, room: String, after position: RoomPosition, now: Int64) throws(RoomStoreError) -> RoomReplay {
        try replay(app: app, room: room, after: position, now: now, maxBytes: .max)
    }

    /// `positions`, all or none (a store that is reached whole or not at all).
    ///
    /// - Throws: as `positions`.
    public func reachablePositions(app: String, rooms: [String], now: Int64) throws(RoomStoreError) -> [RoomPosition?] {
        try positions(app: app, rooms: rooms, now: now).map { $0 }
    }

    /// One `position` per room (a store with a cheaper batch overrides it).
    ///
    /// - Throws: as `position`.
    public func positions(app: String, rooms: [String], now: Int64) throws(RoomStoreError) -> [RoomPosition] {
        var positions: [RoomPosition] = []
        positions.reserveCapacity(rooms.count)
        for room in rooms { positions.append(try position(app: app, room: room, now: now)) }
        return positions
    }
}

/// A room's rule and when the backend issued it: the `iat` of the token it came from (capped
/// at the time it was seen), or the time of the app-server publish that named it, in seconds
/// since 1970.
public struct RoomRuleRecord: Hashable, Sendable {
    /// The rule.
    public var rule: RoomRule
    /// When the backend issued it, in seconds since 1970: only a later one replaces it.
    public var issuedAt: Int

    /// Creates a record.
    public init(rule: RoomRule, issuedAt: Int) {
        self.rule = rule
        self.issuedAt = issuedAt
    }
}

/// One page of a streamed replay (`RoomHistoryStore.replayPage`).
public struct RoomReplayPage: Hashable, Sendable {
    /// Kept events after the asked position, oldest first, each id one more than the last.
    public var events: [RoomEventRecord]
    /// The room's position when the page was read.
    public var current: RoomPosition

    /// Creates a page.
    public init(events: [RoomEventRecord], current: RoomPosition) {
        self.events = events
        self.current = current
    }
}

/// The answer to a resume.
public enum RoomReplay: Hashable, Sendable {
    /// The position is recoverable: these events (possibly none) bring it to `current`.
    case events([RoomEventRecord], current: RoomPosition)
    /// It is not: nothing is replayed.
    case unrecoverable(RoomUnrecoverableReason, current: RoomPosition)
}

/// Why a position cannot be resumed: the `reason` of a `joined` with `recovered: false`.
public enum RoomUnrecoverableReason: String, Hashable, Sendable {
    /// The room's history was lost since (another epoch).
    case epochChanged = "epoch_changed"
    /// Some events after the position are no longer kept (older than the span or the count).
    case expired
    /// The position is ahead of the stream (an id never given out).
    case unknownPosition = "unknown_position"
    /// The missed events come to more than the `maxBytes` of `RoomHistoryStore.replay`. A
    /// member is never told it: the hub streams a replay of any length (`replayPage`); servers
    /// before that told it for a replay over 2 MiB, and clients still accept it.
    case tooLarge = "too_large"
}

/// One page of a room's history as the store keeps it: records, oldest first (the client decodes
/// a page into `Realtime.RoomHistoryPage`; the names differ so a program importing both modules
/// names each without qualification).
public struct RoomStorePage: Hashable, Sendable {
    /// Oldest first.
    public var events: [RoomEventRecord]
    /// Whether older events are kept.
    public var more: Bool
    /// Creates a page.
    public init(events: [RoomEventRecord], more: Bool) {
        self.events = events
        self.more = more
    }
}

/// Why the store refused.
public enum RoomStoreError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Keeping the event would pass the store's memory budget, in bytes.
    case full(budget: Int)
    /// The store holds as many rooms as it may.
    case tooManyRooms(limit: Int)
    /// The store cannot be reached (a remote store).
    case unavailable(String)

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .full(let budget): return "the history store is at its budget of \(budget) bytes"
        case .tooManyRooms(let limit): return "the history store holds its limit of \(limit) rooms"
        case .unavailable(let why): return "the history store is unavailable: \(why)"
        }
    }
}
