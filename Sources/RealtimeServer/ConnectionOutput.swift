/// Where the hub writes to one client connection: the transport (a WebSocket connection in
/// the server, a recorder in tests). Calls may come from any thread.
public protocol ConnectionOutput: AnyObject, Sendable {
    /// Sends one text frame.
    func send(text: String)
    /// Closes the connection with a close code and reason (RFC 6455 §5.5.1).
    func close(code: UInt16, reason: String)
}
