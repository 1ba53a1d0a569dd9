#if canImport(Glibc)
import Glibc
#endif
import SystemSupport

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
        guard WebSocketLog.isWanted else { return }
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
