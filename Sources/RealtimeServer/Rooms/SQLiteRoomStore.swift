import CSQLite
import RealtimeProtocol
import SystemSupport

/// The SQLite library's version, as a number (3.40.1 is 3040001).
private let sqlite3Version = Int(sqlite3_libversion_number())

/// Rooms' history and positions in an SQLite file (Debian's libsqlite3, write-ahead log), so a
/// single node restarted with SIGTERM or SIGKILL keeps every room's epoch and kept events
/// (`realtime-server --data DIR`): a member rejoins from its position and gets what it
/// missed, as after a drop. Without it a restart starts every room in a new epoch.
///
/// The same rules as `InMemoryRoomStore`: per room a stream with an epoch and a last id, kept
/// events trimmed to the rule's span and count; `budget` bytes of kept events across rooms
/// (`RoomStoreError.full` past it), `maxRooms` rooms (`.tooManyRooms` past it; a stream that
/// keeps no event is dropped after `idleRetention` by `expire`, and at the room limit the least
/// recently used of them goes at once). Each append is one transaction.
///
/// Durability: `synchronous=NORMAL` in WAL mode. What a call returned survives the process being
/// killed (SIGKILL, a crash). A power loss or a kernel crash may take the last transactions;
/// their ids are then given again to other events in the same epoch, and a member that had
/// them resumes without being told. Where that matters, keep the folder on storage that does
/// not lie about flushes, or run several nodes on Redis with its own persistence.
///
/// The file is this store's alone: it is marked (`PRAGMA application_id`), a file of another
/// program is refused, and the store holds it exclusively (a second server on the same folder
/// is refused). One connection behind a lock: calls are serialised, as the hub's room lane
/// makes them. Needs SQLite 3.35 or newer (`RETURNING`; Debian 12 has 3.40).
public final class SQLiteRoomStore: RoomHistoryStore, @unchecked Sendable {
    /// The mark in the file's header (`PRAGMA application_id`): "RTDS".
    static let applicationID: Int64 = 0x5254_4453
    /// Bytes of kept events across rooms.
    public let budget: Int
    /// Most rooms with a stream.
    public let maxRooms: Int
    /// How long a stream that keeps no event keeps its epoch and last id, in milliseconds.
    public let idleRetention: Int64 = 24 * 3600 * 1000

    private struct Statements {
        let stream: SQLiteDatabase.Statement
        let rule: SQLiteDatabase.Statement
        let keepRule: SQLiteDatabase.Statement
        let expireRules: SQLiteDatabase.Statement
        let touch: SQLiteDatabase.Statement
        let evictIdle: SQLiteDatabase.Statement
        let streamSpan: SQLiteDatabase.Statement
        let createStream: SQLiteDatabase.Statement
        let updateStream: SQLiteDatabase.Statement
        let insertEvent: SQLiteDatabase.Statement
        let trimEvents: SQLiteDatabase.Statement
        let keptBytes: SQLiteDatabase.Statement
        let firstKept: SQLiteDatabase.Statement
        let eventsAfter: SQLiteDatabase.Statement
        let eventsBefore: SQLiteDatabase.Statement
        let expiringRooms: SQLiteDatabase.Statement
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
    ///   - path: the database file (`DIR/rooms.sqlite3`); SQLite keeps its write-ahead log beside it (`-wal`).
    ///   - budget: bytes of kept events across rooms (1 GiB by default).
    ///   - maxRooms: most rooms with a stream (100,000 by default).
    /// - Throws: `RoomStoreError.unavailable` when the file cannot be opened or is not this
    ///   store's.
    public init(path: String, budget: Int = 1 << 30, maxRooms: Int = 100_000) throws(RoomStoreError) {
        self.budget = budget
        self.maxRooms = maxRooms
        guard sqlite3Version >= 3_035_000 else {
            throw .unavailable("SQLite 3.35 or newer is needed (this is \(sqlite3Version)): install a newer libsqlite3")
        }
        do {
            let database = try SQLiteDatabase(path: path)
            // Held by this process alone from the first transaction on (a second server on the
            // same folder waits a second, then is refused), so the cached counts stay true.
            try database.execute("PRAGMA locking_mode=EXCLUSIVE")
            do {
                try database.execute("BEGIN EXCLUSIVE; COMMIT")
            } catch let failure as SQLiteDatabase.Failure where failure.code == 5 || failure.code == 6 { // SQLITE_BUSY, SQLITE_LOCKED
                throw RoomStoreError.unavailable("\(path) is in use by another process (\(failure))")
            } catch let failure as SQLiteDatabase.Failure {
                throw RoomStoreError.unavailable("\(path) cannot be used (not a database, or not readable and writable by this user): \(failure)")
            }
            var mark: Int64 = 0
            try database.prepare("PRAGMA application_id").run { mark = $0.integer(0) }
            var others = 0
            try database.prepare("SELECT COUNT(*) FROM sqlite_master WHERE name NOT IN ('streams', 'events', 'rules', 'events_at', 'streams_touched')").run {
                others = Int($0.integer(0))
            }
            guard mark == Self.applicationID || (mark == 0 && others == 0) else {
                throw RoomStoreError.unavailable("\(path) is not a realtime-server data file (application_id \(mark), \(others) other tables)")
            }
            var mode = ""
            try database.prepare("PRAGMA journal_mode=WAL").run { mode = $0.text(0) ?? "" }
            guard mode.lowercased() == "wal" else { throw RoomStoreError.unavailable("\(path): the write-ahead log is not available (journal_mode \(mode))") }
            try database.execute("""
                PRAGMA application_id=\(Self.applicationID);
                PRAGMA synchronous=NORMAL;
                CREATE TABLE IF NOT EXISTS streams(
                    app TEXT NOT NULL, room TEXT NOT NULL, epoch TEXT NOT NULL, last INTEGER NOT NULL,
                    span INTEGER NOT NULL, touched INTEGER NOT NULL, PRIMARY KEY(app, room)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS events(
                    app TEXT NOT NULL, room TEXT NOT NULL, id INTEGER NOT NULL, at INTEGER NOT NULL,
                    event TEXT NOT NULL, data TEXT NOT NULL, sender TEXT, size INTEGER NOT NULL,
                    PRIMARY KEY(app, room, id)) WITHOUT ROWID;
                CREATE TABLE IF NOT EXISTS rules(
                    app TEXT NOT NULL, room TEXT NOT NULL, rule TEXT NOT NULL, issued INTEGER NOT NULL, PRIMARY KEY(app, room)) WITHOUT ROWID;
                CREATE INDEX IF NOT EXISTS events_at ON events(at);
                CREATE INDEX IF NOT EXISTS streams_touched ON streams(touched);
                """)
            let statements = Statements(
                stream: try database.prepare("SELECT epoch, last, touched FROM streams WHERE app = ?1 AND room = ?2"),
                rule: try database.prepare("SELECT rule, issued FROM rules WHERE app = ?1 AND room = ?2"),
                keepRule: try database.prepare("INSERT OR REPLACE INTO rules(app, room, rule, issued) VALUES (?1, ?2, ?3, ?4)"),
                expireRules: try database.prepare("DELETE FROM rules WHERE NOT EXISTS (SELECT 1 FROM streams s WHERE s.app = rules.app AND s.room = rules.room)"),
                touch: try database.prepare("UPDATE streams SET touched = ?3 WHERE app = ?1 AND room = ?2"),
                // The least recently used stream that keeps no event, among the 64 least recently used.
                evictIdle: try database.prepare("""
                    DELETE FROM streams WHERE (app, room) = (SELECT app, room FROM (SELECT app, room FROM streams ORDER BY touched LIMIT 64) s
                        WHERE NOT EXISTS (SELECT 1 FROM events e WHERE e.app = s.app AND e.room = s.room) LIMIT 1)
                    """),
                streamSpan: try database.prepare("SELECT span FROM streams WHERE app = ?1 AND room = ?2"),
                createStream: try database.prepare("INSERT INTO streams(app, room, epoch, last, span, touched) VALUES (?1, ?2, ?3, 0, ?4, ?5)"),
                updateStream: try database.prepare("UPDATE streams SET last = ?3, span = ?4, touched = ?5 WHERE app = ?1 AND room = ?2"),
                insertEvent: try database.prepare("INSERT INTO events(app, room, id, at, event, data, sender, size) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"),
                // A prefix of the room's ids, read through the primary key: up to ?3 (the count)
                // or up to the first event newer than ?4 (the span), whichever is further. An
                // `id <= ?3 OR at <= ?4` read every event of the room at every publish
                // (100,000 of them in a room that keeps that many), and could cut a hole in the
                // history where the clock had gone back.
                trimEvents: try database.prepare("""
                    DELETE FROM events WHERE app = ?1 AND room = ?2 AND id <= MAX(?3, COALESCE(
                        (SELECT id FROM events WHERE app = ?1 AND room = ?2 AND at > ?4 ORDER BY id LIMIT 1) - 1, 9223372036854775807))
                    RETURNING size
                    """),
                keptBytes: try database.prepare("SELECT COALESCE(SUM(size), 0) FROM events"),
                firstKept: try database.prepare("SELECT MIN(id) FROM events WHERE app = ?1 AND room = ?2"),
                eventsAfter: try database.prepare("SELECT id, at, event, data, sender, size FROM events WHERE app = ?1 AND room = ?2 AND id > ?3 ORDER BY id LIMIT ?4"),
                eventsBefore: try database.prepare("SELECT id, at, event, data, sender FROM events WHERE app = ?1 AND room = ?2 AND id < ?3 ORDER BY id DESC LIMIT ?4"),
                // The rooms holding an event past the shortest span, through `events_at` (named:
                // for the DISTINCT, SQLite 3.40 chose to read the whole table, 178 ms a pass at
                // 2,000,000 events); each is then trimmed as a publish trims it, a prefix of its ids.
                expiringRooms: try database.prepare("""
                    SELECT DISTINCT app, room FROM events INDEXED BY events_at WHERE at <= ?1 - (SELECT MIN(span) FROM streams)
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
        } catch let error as RoomStoreError {
            throw error
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
            // What a failed transaction leaves as it was (no recount of the whole table).
            let (bytesBefore, roomsBefore) = (state.bytes, state.rooms)
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
                (state.bytes, state.rooms) = (bytesBefore, roomsBefore)
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
            try state.statements.eventsAfter.run([.text(app), .text(room), .integer(Int64(position.id)), .integer(-1)]) { row in
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

    /// Up to `limit` kept events after `position`, oldest first, until they come to `maxBytes`,
    /// and the room's position (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.unavailable` when SQLite fails; `.tooManyRooms` for a new room
    ///   past the bound.
    public func replayPage(app: String, room: String, after position: RoomPosition, limit: Int, maxBytes: Int, now: Int64) throws(RoomStoreError) -> RoomReplayPage {
        try withState { state in
            let current = try Self.stream(app, room, in: &state, limit: maxRooms, now: now)
            try Self.expire(app, room, in: &state, now: now)
            guard position.epoch == current.epoch, position.id < current.id else { return RoomReplayPage(events: [], current: current) }
            var events: [RoomEventRecord] = []
            var bytes = 0
            let rows = Int64(min(max(1, limit), RoomRule.maxHistory))
            try state.statements.eventsAfter.run([.text(app), .text(room), .integer(Int64(position.id)), .integer(rows)]) { row in
                guard bytes < maxBytes else { return }
                bytes += Int(row.integer(5))
                events.append(Self.record(row))
            }
            return RoomReplayPage(events: events, current: current)
        }
    }

    /// The newest `limit` events before `before`, oldest first (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.unavailable` when SQLite fails.
    public func page(app: String, room: String, before: UInt64?, limit: Int, now: Int64) throws(RoomStoreError) -> RoomStorePage {
        try withState { state in
            try Self.expire(app, room, in: &state, now: now)
            let upper = Int64(min(before ?? UInt64(Int64.max), UInt64(Int64.max)))
            let limit = min(max(0, limit), RoomRule.maxHistory)
            var records: [RoomEventRecord] = []
            try state.statements.eventsBefore.run([.text(app), .text(room), .integer(upper), .integer(Int64(limit) + 1)]) { row in
                records.append(Self.record(row))
            }
            let more = records.count > limit
            if more { records.removeLast() }
            return RoomStorePage(events: records.reversed(), more: more)
        }
    }

    /// Drops expired events in every room, and streams that kept nothing for `idleRetention`
    /// (`RoomHistoryStore`).
    public func expire(now: Int64) {
        try? withState { state in
            var rooms: [(app: String, room: String)] = []
            try state.statements.expiringRooms.run([.integer(now)]) { rooms.append(($0.text(0) ?? "", $0.text(1) ?? "")) }
            if !rooms.isEmpty {
                // One transaction for the pass: one write of the log, not one per room.
                let bytesBefore = state.bytes
                try state.database.execute("BEGIN IMMEDIATE")
                do {
                    for (app, room) in rooms { try Self.expire(app, room, in: &state, now: now) }
                    try state.database.execute("COMMIT")
                } catch {
                    try? state.database.execute("ROLLBACK")
                    state.bytes = bytesBefore
                    throw error
                }
            }
            try state.statements.expireStreams.run([.integer(now - idleRetention)])
            try state.statements.expireRules.run()
            try state.statements.counts.run { state.rooms = Int($0.integer(0)) }
        }
    }

    /// The room's rule once `offered` is weighed, kept in the file so a restarted node applies
    /// the one the backend issued last, as before the restart (`RoomHistoryStore`): `offered`
    /// replaces the kept record only when issued later, or when `force`d (then kept with the
    /// later of the two times); with none kept, `offered` is kept.
    ///
    /// - Throws: `RoomStoreError.unavailable` when SQLite fails or the kept rule does not decode.
    public func settleRule(app: String, room: String, offered: RoomRuleRecord, force: Bool, now: Int64) throws(RoomStoreError) -> RoomRuleRecord {
        try withState { state in
            var kept: (text: String, issued: Int)?
            try state.statements.rule.run([.text(app), .text(room)]) { row in kept = (row.text(0) ?? "", Int(row.integer(1))) }
            if let kept, !force, offered.issuedAt <= kept.issued {
                do {
                    return RoomRuleRecord(rule: try StrictJSON.decode(RoomRule.self, from: kept.text.utf8), issuedAt: kept.issued)
                } catch {
                    throw RoomStoreError.unavailable("the room's kept rule does not decode: \(error)")
                }
            }
            // A hub that knows nothing of the room asks with the default rule, issued at 0:
            // nothing to keep.
            if kept == nil, !force, offered.issuedAt == 0 { return offered }
            let record = RoomRuleRecord(rule: offered.rule, issuedAt: max(offered.issuedAt, force ? (kept?.issued ?? 0) : 0))
            let text = try RealtimeMessage.jsonText(record.rule)
            if kept?.text != text || kept?.issued != record.issuedAt {
                try state.statements.keepRule.run([.text(app), .text(room), .text(text), .integer(Int64(record.issuedAt))])
            }
            return record
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

    /// The room's position, its stream created (a fresh epoch) when it has none; marked used
    /// now (at most once a minute), so `expire` and the room limit never drop a room in use.
    private static func stream(_ app: String, _ room: String, in state: inout State, limit: Int, now: Int64) throws -> RoomPosition {
        var found: (position: RoomPosition, touched: Int64)?
        try state.statements.stream.run([.text(app), .text(room)]) { row in
            found = (RoomPosition(epoch: row.text(0) ?? "", id: UInt64(max(0, row.integer(1)))), row.integer(2))
        }
        if let found {
            if found.touched < now - 60_000 { try state.statements.touch.run([.text(app), .text(room), .integer(now)]) }
            return found.position
        }
        if state.rooms >= limit {
            // The least recently used room that keeps no event makes room (its next resume is
            // told the epoch changed), as in memory.
            try state.statements.evictIdle.run()
            if state.database.changes > 0 { state.rooms -= 1 }
        }
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
