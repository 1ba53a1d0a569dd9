import CSQLite

/// One SQLite connection (Debian's libsqlite3) with its prepared statements, used by one thread
/// at a time (its owner holds a lock around every use). Only what `SQLiteRoomStore` needs: run
/// a statement, bind integers and text, read the rows.
final class SQLiteDatabase {
    /// An error of SQLite: its result code and message.
    struct Failure: Error, CustomStringConvertible {
        var code: Int32
        var message: String
        var description: String { "SQLite \(code): \(message)" }
    }

    /// A prepared statement, reset and rebound for every use.
    final class Statement {
        fileprivate let handle: OpaquePointer
        fileprivate unowned let database: SQLiteDatabase

        fileprivate init(handle: OpaquePointer, database: SQLiteDatabase) {
            self.handle = handle
            self.database = database
        }

        deinit { sqlite3_finalize(handle) }

        /// A value a statement takes.
        enum Value {
            case integer(Int64)
            case text(String)
            case null
        }

        /// Runs the statement with `values` bound to its parameters in order; `row` is called
        /// for each row the statement gives (read with `integer(_:)` and `text(_:)`).
        ///
        /// - Throws: `Failure` when SQLite refuses.
        func run(_ values: [Value] = [], row: (Statement) throws -> Void = { _ in }) throws {
            sqlite3_reset(handle)
            sqlite3_clear_bindings(handle)
            for (index, value) in values.enumerated() {
                let position = Int32(index + 1)
                let result: Int32
                switch value {
                case .integer(let number): result = sqlite3_bind_int64(handle, position, number)
                case .text(let text):
                    // With its byte length: text with a NUL inside is kept whole.
                    result = sqlite3_bind_text(handle, position, text, Int32(text.utf8.count), SQLiteDatabase.transient)
                case .null: result = sqlite3_bind_null(handle, position)
                }
                guard result == SQLITE_OK else { throw database.failure(result) }
            }
            defer { sqlite3_reset(handle) }
            while true {
                let result = sqlite3_step(handle)
                if result == SQLITE_DONE { return }
                guard result == SQLITE_ROW else { throw database.failure(result) }
                try row(self)
            }
        }

        /// The integer in column `index` of the current row.
        func integer(_ index: Int32) -> Int64 { sqlite3_column_int64(handle, index) }

        /// The text in column `index` of the current row, `nil` for NULL.
        func text(_ index: Int32) -> String? {
            guard let bytes = sqlite3_column_text(handle, index) else { return nil }
            let count = Int(sqlite3_column_bytes(handle, index))
            return String(decoding: UnsafeBufferPointer(start: bytes, count: count), as: UTF8.self)
        }
    }

    /// SQLite copies bound text at once (`SQLITE_TRANSIENT`, a macro Swift cannot import).
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)

    private var handle: OpaquePointer?

    /// Opens (or creates) the database at `path`.
    ///
    /// - Throws: `Failure` when it cannot be opened.
    init(path: String) throws {
        let result = sqlite3_open_v2(path, &handle, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard result == SQLITE_OK else {
            let failure = Failure(code: result, message: handle.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory")
            sqlite3_close_v2(handle)
            throw failure
        }
        sqlite3_busy_timeout(handle, 1000)
    }

    deinit { sqlite3_close_v2(handle) }

    /// Runs `sql` (one or more statements, no parameters).
    ///
    /// - Throws: `Failure` when SQLite refuses.
    func execute(_ sql: String) throws {
        var message: UnsafeMutablePointer<CChar>?
        let result = sqlite3_exec(handle, sql, nil, nil, &message)
        guard result == SQLITE_OK else {
            let text = message.map { String(cString: $0) } ?? "error"
            sqlite3_free(message)
            throw Failure(code: result, message: text)
        }
    }

    /// Prepares `sql` once, to be run many times.
    ///
    /// - Throws: `Failure` when it does not compile.
    func prepare(_ sql: String) throws -> Statement {
        var statement: OpaquePointer?
        let result = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard result == SQLITE_OK, let statement else { throw failure(result) }
        return Statement(handle: statement, database: self)
    }

    /// Rows changed by the last statement.
    var changes: Int { Int(sqlite3_changes(handle)) }

    fileprivate func failure(_ code: Int32) -> Failure {
        Failure(code: code, message: handle.map { String(cString: sqlite3_errmsg($0)) } ?? "error")
    }
}
