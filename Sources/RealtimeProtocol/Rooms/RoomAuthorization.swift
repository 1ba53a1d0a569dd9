/// The batched answer of a room auth route (`POST /rooms/auth` in the sample backend;
/// docs/rooms-protocol.md "Auth route"): one request names every room joined in the same
/// moment, the answer is per room. `time` is the backend's clock, so a client computes expiry
/// in the server's time whatever its own clock says.
///
/// Wire form: `{"time": 1764579200123, "rooms": {"order:1042": {"token": "…", "expires":
/// 1764582800000}, "order:7": {"error": "forbidden"}}}`.
public struct RoomAuthorizationResponse: Codable, Hashable, Sendable {
    /// One room's answer: a token and its expiry (and a sealed room's key), or an error code.
    public struct Entry: Codable, Hashable, Sendable {
        /// The room token (a JWT, `RoomClaims`).
        public var token: String?
        /// When the token expires, in milliseconds since 1970 on the backend's clock.
        public var expires: Int64?
        /// A sealed room's 32-byte key, base64: it opens the room's payloads (`SecretBox`).
        public var key: String?
        /// Why the room is refused (`forbidden`, `no_rule`, `invalid_room`).
        public var error: RoomErrorCode?

        /// A granted room.
        public init(token: String, expires: Int64, key: String? = nil) {
            self.token = token
            self.expires = expires
            self.key = key
        }

        /// A refused room.
        public init(error: RoomErrorCode) { self.error = error }

        /// Decodes an entry leniently: a field of the wrong type is read as absent, so one
        /// broken entry fails its own room (neither a token nor an error), not the whole answer.
        /// `expires` may be written as a whole number in floating point.
        ///
        /// - Throws: `DecodingError` when the entry is not an object.
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            token = try? container.decodeIfPresent(String.self, forKey: .token)
            if let whole = try? container.decodeIfPresent(Int64.self, forKey: .expires) {
                expires = whole
            } else if let number = try? container.decodeIfPresent(Double.self, forKey: .expires), number.isFinite,
                      abs(number) < 9.0e18, number == number.rounded() {
                expires = Int64(number)
            }
            key = try? container.decodeIfPresent(String.self, forKey: .key)
            error = try? container.decodeIfPresent(RoomErrorCode.self, forKey: .error)
        }
    }

    /// The backend's time when it answered, in milliseconds since 1970.
    public var time: Int64
    /// Per room name.
    public var rooms: [String: Entry]

    /// Creates an answer.
    public init(time: Int64, rooms: [String: Entry]) {
        self.time = time
        self.rooms = rooms
    }
}

/// The body of a batched room auth request: `{"rooms": ["order:1042", …]}` (at most
/// `maxRooms`). Who the user is comes from the app's own session (a cookie, a header).
public struct RoomAuthorizationRequest: Codable, Hashable, Sendable {
    /// Most rooms one request may name.
    public static let maxRooms = 100
    /// The room names.
    public var rooms: [String]
    /// Creates a request.
    public init(rooms: [String]) { self.rooms = rooms }
}

/// What a backend's `config()` gives the app (rooms seed, "Rooms anyone may join"): a grant
/// per public room pattern, so public rooms are joined with no auth request.
///
/// Wire form: `{"time": …, "grants": [{"pattern": "news:{id}", "token": "…", "expires": …}]}`.
public struct RoomConfiguration: Codable, Hashable, Sendable {
    /// A public pattern and the token that joins any room matching it.
    public struct Grant: Codable, Hashable, Sendable {
        /// The pattern (`news:{id}`).
        public var pattern: String
        /// A token whose `room` is the pattern, with no `sub`.
        public var token: String
        /// Its expiry, in milliseconds since 1970 on the backend's clock.
        public var expires: Int64

        /// Creates a grant.
        public init(pattern: String, token: String, expires: Int64) {
            self.pattern = pattern
            self.token = token
            self.expires = expires
        }
    }

    /// The backend's time, in milliseconds since 1970.
    public var time: Int64
    /// One per public pattern.
    public var grants: [Grant]

    /// Creates a configuration.
    public init(time: Int64, grants: [Grant]) {
        self.time = time
        self.grants = grants
    }
}
