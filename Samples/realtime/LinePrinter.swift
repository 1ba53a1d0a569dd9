import Foundation

/// Writes output lines to standard output (`StandardOutput.writeLine`), as plain text or JSON.
struct LinePrinter: Sendable {
    /// JSON objects instead of plain text.
    var json: Bool
    /// `join --state`: lines wait there until the positions they reflect are saved (main queue only).
    var journal: PositionJournal?

    /// Writes `line` and a newline (through the journal, when there is one).
    ///
    /// - Parameter line: the line to write.
    func print(_ line: OutputLine) {
        if let journal {
            journal.record(line, room: nil, position: nil)
            return
        }
        // The reader is gone (EPIPE; SIGPIPE is ignored): nothing printed will be seen, so
        // stop instead of reading and discarding the stream at full speed.
        if !StandardOutput.writeLine(json ? line.jsonText : line.plainText) {
            FileHandle.standardError.write(Data("realtime: standard output is closed\n".utf8))
            ConnectCommand.exitNow(1)
        }
    }
}
