import Foundation

/// Writes output lines to standard output (`StandardOutput.writeLine`), as plain text or JSON.
struct LinePrinter: Sendable {
    /// JSON objects instead of plain text.
    var json: Bool

    /// Writes `line` and a newline.
    ///
    /// - Parameter line: the line to write.
    func print(_ line: OutputLine) {
        // The reader is gone (EPIPE; SIGPIPE is ignored): nothing printed will be seen, so
        // stop instead of reading and discarding the stream at full speed.
        if !StandardOutput.writeLine(json ? line.jsonText : line.plainText) {
            FileHandle.standardError.write(Data("realtime: standard output is closed\n".utf8))
            ConnectCommand.exitNow(1)
        }
    }
}
