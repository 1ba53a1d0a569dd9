/// What a realtime transport reports about one socket, in order: `open` once, then frames,
/// then exactly one of `closed` (it was open) or `failed` (it never opened).
public enum RealtimeTransportEvent: Sendable, Hashable {
    /// The socket is open (the WebSocket upgrade completed, RFC 6455 §4).
    case open
    /// A text frame: one protocol message.
    case text(String)
    /// A binary frame, which the protocol does not use; its size in bytes.
    case binary(Int)
    /// The socket closed: the peer's close code and reason, or 1006 with an empty reason for
    /// a connection that ended without a close frame (RFC 6455 §7.1.5).
    case closed(code: UInt16, reason: String)
    /// The socket never opened (refused connection, DNS or TLS failure, bad upgrade answer).
    case failed(String)
}

/// One socket of a realtime transport. Calls may come from any thread and never block.
public protocol RealtimeSocket: AnyObject, Sendable {
    /// Queues one text frame.
    ///
    /// - Returns: `false` if the socket can no longer send (closing or closed).
    @discardableResult
    func send(text: String) -> Bool
    /// Starts the closing handshake with `code` (RFC 6455 §5.5.1, 1000 or 3000–4999) and
    /// `reason` (at most 123 bytes).
    func close(code: UInt16, reason: String)
    /// Drops the connection without a close frame.
    func abort()
    /// Pauses (`false`) or resumes (`true`) reading. The client pauses while the app is far
    /// behind with its events, so a flood waits in the network (TCP flow control), not in
    /// memory. The default does nothing.
    func setReceiving(_ enabled: Bool)
}

extension RealtimeSocket {
    /// A socket that cannot pause reads.
    public func setReceiving(_ enabled: Bool) {}
}

/// Opens sockets for the realtime client: WebSocket in production, an in-memory pair in tests
/// (`InMemoryTransport` in ReconnectTesting).
///
/// Contract: `open` and the socket's methods never call `onEvent` synchronously; events come
/// later, one at a time, in order.
public protocol RealtimeTransport: Sendable {
    /// Starts opening a socket to `url`.
    ///
    /// - Parameters:
    ///   - url: `ws://` or `wss://` URL of the app endpoint (`…/app/{key}?…`).
    ///   - onEvent: receives the socket's events.
    /// - Returns: the socket, not yet open.
    /// - Throws: an error when the attempt cannot even start (an invalid URL, a transport that
    ///   was shut down); the client treats it like a failed connect.
    func open(url: String, onEvent: @escaping @Sendable (RealtimeTransportEvent) -> Void) throws -> any RealtimeSocket

    /// Runs `work` once the events the transport is delivering now were all delivered (for
    /// WebSocket: the frames of the current read), so a client can hand a burst of frames to
    /// its app in one go.
    ///
    /// - Parameter work: what to run, on the thread that delivers events; it must not block.
    /// - Returns: true when `work` was queued (the caller is inside `onEvent` of this transport);
    ///   false when the transport cannot tell, and `work` is not kept: the caller then does the
    ///   work itself. The default returns false.
    func afterCurrentEvents(_ work: @escaping @Sendable () -> Void) -> Bool
}

extension RealtimeTransport {
    /// Not supported: returns false (the caller does the work at once).
    public func afterCurrentEvents(_ work: @escaping @Sendable () -> Void) -> Bool { false }
}
