/// What happens on a WebSocket connection, in order.
///
/// A connection reports `open` once, then messages and pongs, and ends with exactly one of
/// `closed` (it was open) or `failed` (it never opened); nothing follows either.
public enum WebSocketEvent: Hashable, Sendable {
    /// The opening handshake completed (RFC 6455 §4).
    case open
    /// A complete text message, reassembled from its fragments (RFC 6455 §5.4).
    case text(String)
    /// A complete binary message, reassembled from its fragments (RFC 6455 §5.4).
    case binary([UInt8])
    /// A pong arrived, with its payload (0–125 bytes, RFC 6455 §5.5.3). libwebsockets answers
    /// the peer's pings itself; they are not reported.
    case pong([UInt8])
    /// The connection closed after it was open.
    ///
    /// `code` and `reason` come from the peer's close frame when the peer closed first (1005
    /// `noStatusReceived` when that frame had no code); they are this side's own when this side
    /// closed first (libwebsockets does not report the peer's answering close frame); and
    /// they are 1006 `abnormalClosure` with an empty reason when the TCP connection ended with
    /// no close frame: a peer that dropped, `abort()`, or the context shutting down
    /// (RFC 6455 §7.1.5).
    case closed(code: WebSocketCloseCode, reason: String)
    /// The connection never opened: connect, TLS or handshake failure, or cancellation.
    case failed(WebSocketError)
}
