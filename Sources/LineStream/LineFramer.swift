/// Splits a byte stream into lines: `\n` ends a line and a `\r` before it is dropped.
/// Bytes that are not UTF-8 become U+FFFD; a line longer than `limit` bytes is an error
/// instead of unbounded buffering.
package struct LineFramer {
    /// A line reached `limit` bytes with no `\n`.
    package struct TooLong: Error {}

    package let limit: Int
    private var pending: [UInt8] = []

    package init(limit: Int) {
        self.limit = limit
    }

    /// Adds bytes and returns the lines they complete.
    package mutating func append(_ bytes: [UInt8]) throws(TooLong) -> [String] {
        pending += bytes
        var lines: [String] = []
        var start = 0
        while let end = pending[start...].firstIndex(of: UInt8(ascii: "\n")) {
            var line = pending[start..<end]
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            guard line.count <= limit else { throw TooLong() }
            lines.append(String(decoding: line, as: UTF8.self))
            start = end + 1
        }
        pending.removeFirst(start)
        guard pending.count <= limit else { throw TooLong() }
        return lines
    }

    /// Forgets a partial line (a new connection starts clean).
    package mutating func reset() {
        pending = []
    }
}
