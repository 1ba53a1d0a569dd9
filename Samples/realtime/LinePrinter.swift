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
    }
}
