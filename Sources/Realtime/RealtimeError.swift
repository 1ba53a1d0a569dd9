import RealtimeProtocol

/// A connection-level error, as given to `onError { error in error.code, error.message }`
/// (realtime-connection-lifecycle seed, "Connection errors versus channel errors"), or a
/// channel's error.
public struct RealtimeError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Where the error comes from.
    public enum Kind: String, Sendable, Hashable {
        /// The server sent an `<ns>:error` event (its `code` and `message` are kept).
        case server
        /// The server closed the connection with a close code (`code` is that code).
        case closed
        /// A frame that is not a valid protocol message (bad JSON, missing fields, a binary
        /// frame): reported and skipped; the connection stays up.
        case protocolViolation
        /// The handshake was invalid (no socket id): the socket is closed and retried.
        case handshake
        /// The socket could not be opened (refused, DNS, TLS) or dropped without a close frame.
        case transport
        /// No pong arrived in time: the connection was considered dead.
        case pongTimeout
        /// An event on an encrypted channel did not open with the channel's key (altered, or
        /// encrypted with another key): reported, never delivered.
        case decryption
        /// A room event could not reach the app: its data does not decode into the type an
        /// `events(_:as:)` sequence asked for, or a sequence's consumer fell too far behind.
        case room
    }

    /// What kind of error this is.
    public var kind: Kind
    /// The protocol error code or close code, when there is one (4009, 4201, 1006 …).
    public var code: Int?
    /// A human-readable explanation.
    public var message: String

    /// Creates an error.
    public init(kind: Kind, code: Int? = nil, message: String) {
        self.kind = kind
        self.code = code
        self.message = message
    }

    /// `kind code: message`.
    public var description: String {
        if let code { return "\(kind.rawValue) \(code): \(message)" }
        return "\(kind.rawValue): \(message)"
    }
}
