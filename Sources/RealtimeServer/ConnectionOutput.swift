/// Where the hub writes to one client connection: the transport (a WebSocket connection in
/// the server, a recorder in tests). Calls may come from any thread.
public protocol ConnectionOutput: AnyObject, Sendable {
    /// Sends one text frame.
    func send(text: String)
    /// Closes the connection with a close code and reason (RFC 6455 §5.5.1).
    func close(code: UInt16, reason: String)
    /// Drops the connection without a close frame (the client sees 1006, RFC 6455 §7.1.5).
    func abort()
    /// Bytes queued for the client and not yet handed to the transport (0 when unknown).
    var queuedBytes: Int { get }
}

extension ConnectionOutput {
    /// An output that keeps no queue of its own.
    public var queuedBytes: Int { 0 }
}
