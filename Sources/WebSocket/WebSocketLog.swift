#if canImport(Glibc)
import Glibc
#endif
import SystemSupport

/// Where libwebsockets' own log lines go (its errors and warnings: "Ran out of header data
/// space", a failing `accept`), process-wide as lws' logging is: nowhere unless a program asks.
/// An app's output is its own: a client reports each failed attempt as its own error, with the
/// attempt's reason (`WebSocketError.handshakeFailed` carries the status and lws' words), so
/// lws' `lws_client_handshake: got bad HTTP response '502'` never reaches it unasked.
/// `realtime-server` writes them to its log. At most 10 lines a second are handed over
/// (`LogLimiter`); the rest are counted, and their number handed over as one line when the next
/// second starts.
public enum WebSocketLog {
    private static let writer = Locked<(@Sendable (String) -> Void)?>(nil)

    /// Writes each line to stderr as it is: `setWriter(WebSocketLog.standardError)`.
    public static let standardError: @Sendable (String) -> Void = { line in
        var text = line + "\n"
        text.withUTF8 { bytes in _ = Glibc.write(2, bytes.baseAddress, bytes.count) }
    }

    /// Hands every later line to `writer`, without its newline, on the thread that logged it
    /// (an lws service thread), or drops them again (`nil`, the default). A server that writes
    /// JSON log lines (`realtime-server --log-format json`) wraps them here.
    ///
    /// - Parameter writer: called with one line at a time; must not block for long.
    public static func setWriter(_ writer: (@Sendable (String) -> Void)?) {
        self.writer.withLock { $0 = writer }
    }

    /// Whether anybody takes the lines (the limiter does no work for nobody).
    static var isWanted: Bool { writer.withLock { $0 != nil } }

    static func write(_ line: String) {
        let writer = writer.withLock { $0 }
        writer?(line)
    }
}
