import RealtimeProtocol

/// A room request refused, by a client's frame or the HTTP API: the code and message of the
/// room's `error` event (docs/rooms-protocol.md "Error codes").
public struct RoomRequestError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The code.
    public var code: RoomErrorCode
    /// A human-readable explanation.
    public var message: String

    /// Creates an error.
    public init(_ code: RoomErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    /// `code: message`.
    public var description: String { "\(code): \(message)" }
}
