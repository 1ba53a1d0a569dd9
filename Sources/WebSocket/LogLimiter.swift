#if canImport(Glibc)
import Glibc
#endif
import SystemSupport

/// Where libwebsockets' own log lines go (its errors and warnings: "Ran out of header data
/// space", a failing `accept`), process-wide as lws' logging is. At most 10 lines a second are
/// handed over; the rest are counted, and their number handed over as one line when the next
/// second starts.
public enum WebSocketLog {
    private static let writer = Locked<@Sendable (String) -> Void>({ line in
        var text = line + "\n"
        text.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
    })

    /// Hands every later line to `writer`, without its newline, on the thread that logged it
    /// (an lws service thread); by default each is written to stderr as it is. A server that
    /// writes JSON log lines (`realtime-server --log-format json`) wraps them here.
    ///
    /// - Parameter writer: called with one line at a time; must not block for long.
    public static func setWriter(_ writer: @escaping @Sendable (String) -> Void) {
        self.writer.withLock { $0 = writer }
    }

    static func write(_ line: String) {
        let writer = writer.withLock { $0 }
        writer(line)
    }
}

/// libwebsockets' log lines, at most `linesPerSecond` a second to `WebSocketLog`; the rest are
/// counted and their number written when the next second starts. Process-wide, as lws' logging is.
enum LogLimiter {
    /// Lines written per one-second window.
    static let linesPerSecond = 10

    private struct Window {
        var start = ContinuousClock.now
        var written = 0
        var suppressed = 0
    }

    private static let window = Locked(Window())

    /// Writes `line` (lws' text, newline included) unless this second's lines are used up.
    static func emit(_ line: String) {
        let now = ContinuousClock.now
        let (write, suppressed) = window.withLock { window -> (Bool, Int) in
            var reported = 0
            if now - window.start >= .seconds(1) {
                reported = window.suppressed
                window = Window(start: now)
            }
            guard window.written < linesPerSecond else {
                window.suppressed += 1
                return (false, reported)
            }
            window.written += 1
            return (true, reported)
        }
        if suppressed > 0 { WebSocketLog.write("[lws] \(suppressed) more lines left out in the last second") }
        if write { WebSocketLog.write(line.hasSuffix("\n") ? String(line.dropLast()) : line) }
    }
}
