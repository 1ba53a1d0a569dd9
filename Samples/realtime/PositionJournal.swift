import Dispatch
import Foundation
import Realtime

/// `realtime join --state FILE`: the rooms' positions kept in a file, so a process started
/// again rejoins from them (issue 34, "Saved positions").
///
/// Lines are printed as events come; a room's position is recorded after its line was printed,
/// and the positions are written at most every 100 ms and at exit (a temporary file, fsync,
/// rename: the file is always a whole, older or newer). So the file never holds a position past
/// what was printed: a process killed with SIGKILL loses nothing, and the process started after
/// it prints every later event (replayed). It may print again the events of the killed one's
/// last 100 ms, with the same `meta.id`: a reader that keeps what it read drops those by id.
/// Exactly once across a SIGKILL would need the reader's part: printing a line and renaming
/// the file are two steps, and a kill between them either repeats the line or, saved first,
/// loses it (an earlier version saved first, and a chaos run's client restart lost a line).
///
/// Used on the main queue only (the client's delivery queue and the signal handler's flush).
final class PositionJournal: @unchecked Sendable {
    /// The file's shape: room name → position.
    typealias Positions = [String: RoomPosition]

    /// Shortest time between two writes.
    static let interval: DispatchTimeInterval = .milliseconds(100)
    /// Largest state file read (100 rooms' positions are about 10 KB).
    static let maxFileBytes = 1 << 20

    /// The state file.
    let path: String
    private var positions: Positions
    private var scheduled = false
    private var lastWrite = DispatchTime(uptimeNanoseconds: 0)

    /// Reads the file (absent: no positions yet).
    ///
    /// - Throws: `UsageError` when the file is unreadable, too large or not `{room: {epoch, id}}`.
    init(path: String) throws(UsageError) {
        self.path = path
        positions = try Self.read(path)
    }

    /// The saved position of `room`, if any.
    func position(of room: String) -> RoomPosition? { positions[room] }

    /// The positions in `path`: none when the file does not exist yet.
    ///
    /// - Throws: `UsageError` when it is unreadable, over `maxFileBytes` or not `{room: {epoch, id}}`.
    static func read(_ path: String) throws(UsageError) -> Positions {
        guard FileManager.default.fileExists(atPath: path) else { return [:] }
        guard let data = FileManager.default.contents(atPath: path), data.count <= maxFileBytes,
              let positions = try? JSONDecoder().decode(Positions.self, from: data) else {
            throw UsageError("--state \(path): not a readable JSON object of room positions ({\"room\": {\"epoch\", \"id\"}}, at most 1 MiB)")
        }
        return positions
    }

    /// Records the room's position after an event whose line is printed already; it is written
    /// within 100 ms.
    func advance(room: String, to position: RoomPosition?) {
        guard let position else { return }
        positions[room] = position
        guard !scheduled else { return }
        scheduled = true
        let due = lastWrite + Self.interval
        DispatchQueue.main.asyncAfter(deadline: max(due, .now())) { [self] in flush() }
    }

    /// Writes the positions. A write that fails is told on standard error (a full disk must not
    /// silence the room); the next write tries again.
    func flush() {
        scheduled = false
        lastWrite = .now()
        do {
            try write()
        } catch {
            FileHandle.standardError.write(Data("realtime: --state \(path): \(error)\n".utf8))
        }
    }

    private func write() throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        let data = try encoder.encode(positions)
        let temporary = "\(path).\(getpid()).tmp"
        guard FileManager.default.createFile(atPath: temporary, contents: data) else {
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: temporary])
        }
        let descriptor = open(temporary, O_RDONLY)
        if descriptor >= 0 {
            fsync(descriptor)
            close(descriptor)
        }
        guard rename(temporary, path) == 0 else {
            let failure = errno
            unlink(temporary)
            throw POSIXError(POSIXErrorCode(rawValue: failure) ?? .EIO)
        }
    }
}
