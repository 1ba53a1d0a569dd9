import Dispatch
import Foundation
import Realtime

/// `realtime join --state FILE`: the rooms' positions kept in a file, so a process started
/// again rejoins from them (issue 34, "Saved positions").
///
/// The output is held back until the positions it reflects are in the file: lines queue here,
/// and a write (at most every 100 ms) puts the positions on disk (a temporary file, fsync,
/// rename: the file is always a whole, older or newer) and only then prints the lines it
/// covers. A process killed with SIGKILL has printed no line whose position is not saved, so
/// the process started after it prints every later event once (replayed) and none twice.
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
    private let printer: LinePrinter
    private var positions: Positions
    private var pending: [OutputLine] = []
    private var scheduled = false
    private var lastWrite = DispatchTime(uptimeNanoseconds: 0)

    /// Reads the file (absent: no positions yet).
    ///
    /// - Throws: `UsageError` when the file is unreadable, too large or not `{room: {epoch, id}}`.
    init(path: String, printer: LinePrinter) throws(UsageError) {
        self.path = path
        self.printer = printer
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

    /// Queues `line` and the room's position after it; they are written, then printed, within 100 ms.
    func record(_ line: OutputLine, room: String?, position: RoomPosition?) {
        if let room, let position { positions[room] = position }
        pending.append(line)
        guard !scheduled else { return }
        scheduled = true
        let due = lastWrite + Self.interval
        DispatchQueue.main.asyncAfter(deadline: max(due, .now())) { [self] in flush() }
    }

    /// Writes the positions, then prints what was held back for them. A write that fails is
    /// told on standard error and the lines are printed anyway (a full disk must not silence
    /// the room); the next write tries again.
    func flush() {
        scheduled = false
        lastWrite = .now()
        do {
            try write()
        } catch {
            FileHandle.standardError.write(Data("realtime: --state \(path): \(error)\n".utf8))
        }
        let lines = pending
        pending = []
        for line in lines { printer.print(line) }
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
