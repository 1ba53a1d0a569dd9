/// A room refusal: the code and message of a room's `error` event, of a failed history request
/// or of an HTTP API answer (docs/rooms-protocol.md "Error codes"). The server throws it for a
/// refused request; the client reports it for a room that failed, a refused history request or
/// something the room did not accept, with the client's own codes beside the server's
/// (`notRecovered`, `authFailed`, `unauthorized`, `kicked`, `left`, `disconnected`, `timedOut`,
/// `badData`, in the `Realtime` module).
public struct RoomError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The code.
    public var code: RoomErrorCode
    /// A human-readable explanation.
    public var message: String
    /// For `not_recovered` told before a replay: exactly which events will not come (the
    /// server's `gap` event); `nil` otherwise.
    public var gap: RoomGap?

    /// Creates an error.
    public init(_ code: RoomErrorCode, _ message: String, gap: RoomGap? = nil) {
        self.code = code
        self.message = message
        self.gap = gap
    }

    /// `code: message`.
    public var description: String { "\(code.rawValue): \(message)" }
}
