import RealtimeProtocol
import SystemSupport

/// Rooms' history and positions in an SQLite file (Debian's libsqlite3, write-ahead log), so a
/// single node restarted with SIGTERM or SIGKILL keeps every room's epoch and kept events
/// (`realtime-server --data DIR`, issue 34): a member rejoins from its position and gets what it
/// missed, as after a drop. Without it a restart starts every room in a new epoch.
///
/// The same rules as `InMemoryRoomStore`: per room a stream with an epoch and a last id, kept
/// events trimmed to the rule's span and count; `budget` bytes of kept events across rooms
/// (`RoomStoreError.full` past it), `maxRooms` rooms (`.tooManyRooms` past it; a stream that
/// keeps no event is dropped after `idleRetention` by `expire`). Each append is one transaction
/// (`synchronous=NORMAL` in WAL mode: what a call returned survives the process being killed;
/// a power loss may take the last transactions, which then come back as `unknown_position`).
/// One connection behind a lock: calls are serialised, as the hub's room lane makes them.
public final class SQLiteRoomStore: RoomHistoryStore, @unchecked Sendable {
    /// Bytes of kept events across rooms.
    public let budget: Int
    /// Most rooms with a stream.
    public let maxRooms: Int
    /// How long a stream that keeps no event keeps its epoch and last id, in milliseconds.
    public let idleRetention: Int64 = 24 * 3600 * 1000

    private struct Statements {
        let stream: SQLiteDatabase.Statement
        let streamSpan: SQLiteDatabase.Statement
        let createStream: SQLiteDatabase.Statement
        let updateStream: SQLiteDatabase.Statement
        let insertEvent: SQLiteDatabase.Statement
        let trimEvents: SQLiteDatabase.Statement
        let keptBytes: SQLiteDatabase.Statement
        let firstKept: SQLiteDatabase.Statement
        let eventsAfter: SQLiteDatabase.Statement
        let eventsBefore: SQLiteDatabase.Statement
        let expireEvents: SQLiteDatabase.Statement
        let expireStreams: SQLiteDatabase.Statement
        let counts: SQLiteDatabase.Statement
    }

    private struct State {
        let database: SQLiteDatabase
        let statements: Statements
        var bytes: Int
        var rooms: Int
    }

    private let state: Locked<State>

    /// Opens the store in `path` (created with its tables when absent).
    ///
    /// - Parameters:
    ///   - path: the database file (`DIR/rooms.sqlite3`); SQLite keeps `-wal` and `-shm` beside it.
    ///   - budget: bytes of kept events across rooms (1 GiB by default).
    ///   - maxRooms: most rooms with a stream (100,000 by default).
    /// - Throws: `RoomStoreError.unavailable` when the file cannot be opened or is not this
    ///   store's.
    public init(path: String, budget: Int = 1 << 30, maxRooms: Int = 100_000) throws(RoomStoreError) {
        self.budget = budget
        self.maxRooms = maxRooms
        do {
            let database = try SQLiteDatabase(path: path)
            try database.execute("""
                PRAGMA journal_mode=WAL;
                PRAGMA synchronous=NORMAL;
                CREATE TABLE IF NOT EXISTS streams(
                    app TEXT NOT NULL, room TEXT NOT NULL, epoch TEXT NOT NULL, last INTEGER NOT NULL,
                    span INTEGER NOT NULL, touched INTEGER NOT NULL, PRIMARY KEY(app, room)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS events(
                    app TEXT NOT NULL, room TEXT NOT NULL, id INTEGER NOT NULL, at INTEGER NOT NULL,
                    event TEXT NOT NULL, data TEXT NOT NULL, sender TEXT, size INTEGER NOT NULL,
                    PRIMARY KEY(app, room, id)) WITHOUT ROWID;
                """)
            let statements = Statements(
                stream: try database.prepare("SELECT epoch, last FROM streams WHERE app = ?1 AND room = ?2"),
                streamSpan: try database.prepare("SELECT span FROM streams WHERE app = ?1 AND room = ?2"),
                createStream: try database.prepare("INSERT INTO streams(app, room, epoch, last, span, touched) VALUES (?1, ?2, ?3, 0, ?4, ?5)"),
                updateStream: try database.prepare("UPDATE streams SET last = ?3, span = ?4, touched = ?5 WHERE app = ?1 AND room = ?2"),
                insertEvent: try database.prepare("INSERT INTO events(app, room, id, at, event, data, sender, size) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
                trimEvents: try database.prepare("DELETE FROM events WHERE app = ?1 AND room = ?2 AND (id <= ?3 OR at <= ?4) RETURNING size"),
                keptBytes: try database.prepare("SELECT COALESCE(SUM(size), 0) FROM events"),
                firstKept: try database.prepare("SELECT MIN(id) FROM events WHERE app = ?1 AND room = ?2"),
                eventsAfter: try database.prepare("SELECT id, at, event, data, sender, size FROM events WHERE app = ?1 AND room = ?2 AND id > ?3 ORDER BY id"),
                eventsBefore: try database.prepare("SELECT id, at, event, data, sender FROM events WHERE app = ?1 AND room = ?2 AND id < ?3 ORDER BY id DESC LIMIT ?4"),
                expireEvents: try database.prepare("""
                    DELETE FROM events WHERE at <= ?1 - (SELECT span FROM streams s WHERE s.app = events.app AND s.room = events.room) RETURNING size
                    """),
                expireStreams: try database.prepare("""
                    DELETE FROM streams WHERE touched <= ?1 AND NOT EXISTS (SELECT 1 FROM events e WHERE e.app = streams.app AND e.room = streams.room)
                    """),
                counts: try database.prepare("SELECT COUNT(*) FROM streams"))
            var bytes = 0
            try statements.keptBytes.run { bytes = Int($0.integer(0)) }
            var rooms = 0
            try statements.counts.run { rooms = Int($0.integer(0)) }
            state = Locked(State(database: database, statements: statements, bytes: bytes, rooms: rooms))
        } catch let failure as SQLiteDatabase.Failure {
            throw .unavailable("\(path): \(failure)")
        } catch {
            throw .unavailable("\(path): \(error)")
        }
    }

    /// Bytes of kept events now.
    public var bytes: Int { state.withLock { $0.bytes } }

    /// The room's position; a new stream (fresh epoch, id 0) when it has none (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.tooManyRooms` at the room limit, `.unavailable` when SQLite fails.
    public func position(app: String, room: String, now: Int64) throws(RoomStoreError) -> RoomPosition {
        try withState { state in try Self.stream(app, room, in: &state, limit: maxRooms, now: now) }
    }

    /// Keeps one event with the next id and trims the stream to the rule (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.full` over the byte budget (nothing kept), `.tooManyRooms`,
    ///   `.unavailable`.
    @discardableResult
    public func append(app: String, room: String, event: String, data: String, from: String?, rule: RoomRule, at: Int64) throws(RoomStoreError) -> (epoch: String, record: RoomEventRecord) {
        try withState { state in
            let statements = state.statements
            try state.database.execute("BEGIN IMMEDIATE")
            do {
                let stream = try Self.stream(app, room, in: &state, limit: maxRooms, now: at)
                let record = RoomEventRecord(id: stream.id + 1, at: at, event: event, data: data, from: from)
                let span = Int64(rule.span) * 1000
                if rule.history > 0 {
                    guard state.bytes + record.size <= budget else { throw RoomStoreError.full(budget: budget) }
                    try statements.insertEvent.run([.text(app), .text(room), .integer(Int64(record.id)), .integer(at), .text(event), .text(data),
                                                    from.map { .text($0) } ?? .null, .integer(Int64(record.size))])
                    state.bytes += record.size
                }
                // Past the count (ids up to the new one minus `history`) or the span.
                var freed = 0
                try statements.trimEvents.run([.text(app), .text(room), .integer(Int64(record.id) - Int64(rule.history)), .integer(at - span)]) {
                    freed += Int($0.integer(0))
                }
                state.bytes -= freed
                try statements.updateStream.run([.text(app), .text(room), .integer(Int64(record.id)), .integer(span), .integer(at)])
                try state.database.execute("COMMIT")
                return (stream.epoch, record)
            } catch {
                try? state.database.execute("ROLLBACK")
                var bytes = 0
                try? statements.keptBytes.run { bytes = Int($0.integer(0)) }
                state.bytes = bytes
                throw error
            }
        }
    }

    /// Every event after `position` if all are still kept, the epoch matches and they come to
    /// at most `maxBytes`, else why not (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.tooManyRooms` when the room has no stream and none can be
    ///   made, `.unavailable`.
    public func replay(app: String, room: String, after position: RoomPosition, now: Int64, maxBytes: Int) throws(RoomStoreError) -> RoomReplay {
        try withState { state in
            let current = try Self.stream(app, room, in: &state, limit: maxRooms, now: now)
            try Self.expire(app, room, in: &state, now: now)
            guard position.epoch == current.epoch else { return .unrecoverable(.epochChanged, current: current) }
            guard position.id <= current.id else { return .unrecoverable(.unknownPosition, current: current) }
            if position.id == current.id { return .events([], current: current) }
            var first: Int64?
            try state.statements.firstKept.run([.text(app), .text(room)]) { row in first = row.text(0) == nil ? nil : row.integer(0) }
            guard let first, first <= Int64(position.id) + 1 else { return .unrecoverable(.expired, current: current) }
            var records: [RoomEventRecord] = []
            var bytes = 0
            var tooLarge = false
            try state.statements.eventsAfter.run([.text(app), .text(room), .integer(Int64(position.id))]) { row in
                guard !tooLarge else { return }
                bytes += Int(row.integer(5))
                if bytes > maxBytes {
                    tooLarge = true
                } else {
                    records.append(Self.record(row))
                }
            }
            return tooLarge ? .unrecoverable(.tooLarge, current: current) : .events(records, current: current)
        }
    }

    /// The newest `limit` events before `before`, oldest first (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.unavailable` when SQLite fails.
    public func page(app: String, room: String, before: UInt64?, limit: Int, now: Int64) throws(RoomStoreError) -> RoomStorePage {
        try withState { state in
            try Self.expire(app, room, in: &state, now: now)
            let upper = Int64(min(before ?? UInt64(Int64.max), UInt64(Int64.max)))
            var records: [RoomEventRecord] = []
            try state.statements.eventsBefore.run([.text(app), .text(room), .integer(upper), .integer(Int64(max(0, limit)) + 1)]) { row in
                records.append(Self.record(row))
            }
            let more = records.count > max(0, limit)
            if more { records.removeLast() }
            return RoomStorePage(events: records.reversed(), more: more)
        }
    }

    /// Drops expired events in every room, and streams that kept nothing for `idleRetention`
    /// (`RoomHistoryStore`).
    public func expire(now: Int64) {
        try? withState { state in
            var freed = 0
            try state.statements.expireEvents.run([.integer(now)]) { freed += Int($0.integer(0)) }
            state.bytes -= freed
            try state.statements.expireStreams.run([.integer(now - idleRetention)])
            try state.statements.counts.run { state.rooms = Int($0.integer(0)) }
        }
    }

    // MARK: - Inside the lock

    private func withState<T>(_ body: (inout State) throws -> T) throws(RoomStoreError) -> T {
        do {
            return try state.withLock { state in try body(&state) }
        } catch let error as RoomStoreError {
            throw error
        } catch {
            throw .unavailable("\(error)")
        }
    }

    /// The room's position, its stream created (a fresh epoch) when it has none.
    private static func stream(_ app: String, _ room: String, in state: inout State, limit: Int, now: Int64) throws -> RoomPosition {
        var found: RoomPosition?
        try state.statements.stream.run([.text(app), .text(room)]) { row in
            found = RoomPosition(epoch: row.text(0) ?? "", id: UInt64(max(0, row.integer(1))))
        }
        if let found { return found }
        guard state.rooms < limit else { throw RoomStoreError.tooManyRooms(limit: limit) }
        let epoch = Crypto.hex(Crypto.randomBytes(8))
        try state.statements.createStream.run([.text(app), .text(room), .text(epoch), .integer(Int64(RoomRule.maxSpan) * 1000), .integer(now)])
        state.rooms += 1
        return RoomPosition(epoch: epoch, id: 0)
    }

    /// Drops the room's events past its span.
    private static func expire(_ app: String, _ room: String, in state: inout State, now: Int64) throws {
        var span: Int64?
        try state.statements.streamSpan.run([.text(app), .text(room)]) { span = $0.integer(0) }
        guard let span else { return }
        var freed = 0
        try state.statements.trimEvents.run([.text(app), .text(room), .integer(-1), .integer(now - span)]) { freed += Int($0.integer(0)) }
        state.bytes -= freed
    }

    private static func record(_ row: SQLiteDatabase.Statement) -> RoomEventRecord {
        RoomEventRecord(id: UInt64(max(0, row.integer(0))), at: row.integer(1), event: row.text(2) ?? "", data: row.text(3) ?? "null", from: row.text(4))
    }
}
