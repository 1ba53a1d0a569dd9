import Foundation

/// Writes output lines to standard output (line-buffered, set up in `main.swift`), as plain
/// text or JSON.
struct LinePrinter: Sendable {
    /// JSON objects instead of plain text.
    var json: Bool

    /// Writes `line` and a newline.
    ///
    /// - Parameter line: the line to write.
    func print(_ line: OutputLine) {
        Swift.print(json ? line.jsonText : line.plainText)
        // The reader is gone (EPIPE; SIGPIPE is ignored): nothing printed will be seen, so
        // stop instead of reading and discarding the stream at full speed.
        if StandardOutput.hasFailed {
            FileHandle.standardError.write(Data("realtime: standard output is closed\n".utf8))
            ConnectCommand.exitNow(1)
        }
    }
}
