/// Why a room refused something: the `code` of a room's `error` event, of a failed history
/// request, and of the backend's per-room auth answer (rooms seed: "forbidden, no_rule, full,
/// expired …"; docs/rooms-protocol.md "Error codes"). A struct over the text: the set is open.
public struct RoomErrorCode: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The code as sent (`"forbidden"`).
    public let rawValue: String
    /// Creates a code.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Decodes a code from its text.
    ///
    /// - Throws: `DecodingError` when it is not a string.
    public init(from decoder: any Decoder) throws { rawValue = try decoder.singleValueContainer().decode(String.self) }
    /// Encodes the code as its text.
    ///
    /// - Throws: `EncodingError` (never for a string).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(rawValue)
    }

    /// The backend's authoriser said no, or the token names another room (final: never retried).
    public static let forbidden = RoomErrorCode(rawValue: "forbidden")
    /// No rule of the backend matches the room name.
    public static let noRule = RoomErrorCode(rawValue: "no_rule")
    /// The room is at its capacity in distinct users.
    public static let full = RoomErrorCode(rawValue: "full")
    /// The token's `exp` has passed (at join, or while joined without a refresh).
    public static let expired = RoomErrorCode(rawValue: "expired")
    /// The token's signature does not verify under the app secret.
    public static let badSignature = RoomErrorCode(rawValue: "bad_signature")
    /// The token is not a well-formed HS256 JWT with `room` and `exp`, or its rule is out of range.
    public static let invalidToken = RoomErrorCode(rawValue: "invalid_token")
    /// The room name is not a valid name.
    public static let invalidRoom = RoomErrorCode(rawValue: "invalid_room")
    /// The request names a room this connection has not joined.
    public static let notJoined = RoomErrorCode(rawValue: "not_joined")
    /// The room keeps no history (its rule's `history` is 0).
    public static let noHistory = RoomErrorCode(rawValue: "no_history")
    /// The room's rule does not let members send, or the event name is reserved or invalid.
    public static let notAllowed = RoomErrorCode(rawValue: "not_allowed")
    /// The connection sends events faster than the server allows.
    public static let rateLimited = RoomErrorCode(rawValue: "rate_limited")
    /// The connection has joined as many rooms as the server allows.
    public static let tooManyRooms = RoomErrorCode(rawValue: "too_many_rooms")
    /// The history store is at its memory limit: the event was not kept nor delivered.
    public static let storeFull = RoomErrorCode(rawValue: "store_full")
    /// A malformed request (a field missing or of the wrong type, data that is not JSON, too large).
    public static let badRequest = RoomErrorCode(rawValue: "bad_request")
    /// The room's stream changed under a member (a cluster node found its history lost, or
    /// events it missed no longer kept): the member is sent nothing more until it rejoins from
    /// its position, whose `joined` says what was lost (docs/rooms-protocol.md, "Replay").
    public static let resync = RoomErrorCode(rawValue: "resync")

    /// The text.
    public var description: String { rawValue }
}

/// The names of a room's own events (rooms seed, "The events of the room itself"): sent by
/// the server only; nobody, not even the app's server, may publish an event with one of them.
public enum RoomSystemEvent {
    /// The join (or rejoin) is complete: `{epoch, id, recovered?, reason?, members?, count}`.
    public static let joined = "joined"
    /// A user's first connection joined a presence room: `{id, info?}`.
    public static let join = "join"
    /// A user's last connection left a presence room: `{id}`.
    public static let leave = "leave"
    /// How many users are in the room, at most once a second: `{n}`.
    public static let count = "count"
    /// Something the room refused: `{code, message}`.
    public static let error = "error"
    /// The app's server removed this user from the room: `{reason?}`.
    public static let kicked = "kicked"
    /// Before a replay, the missed events it cannot bring (docs/rooms-protocol.md "Replay"):
    /// `{reason, epoch, first?, last?, before?, previous?}`. A client tells it on the room as a
    /// `not_recovered` error; it is not reserved (a kept event carries `meta`, this never does).
    public static let gap = "gap"

    /// All six.
    public static let reserved: Set<String> = [joined, join, leave, count, error, kicked]

    /// Whether `name` may be used for an app event in a room: 1…200 bytes, not reserved, no
    /// protocol namespace prefix, no control characters.
    public static func isValidEventName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 200 && !reserved.contains(name) && ProtocolNamespace.split(name) == nil
            && !name.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }
}
