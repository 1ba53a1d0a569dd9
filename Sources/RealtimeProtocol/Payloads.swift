/// `connection_established` data (protocol 7): the socket id the client signs with, and the
/// server's activity timeout in seconds (the client pings after that much silence).
public struct ConnectionEstablished: Codable, Hashable, Sendable {
    /// `"<digits>.<digits>"`, unique per connection.
    public var socketID: String
    /// Seconds of silence after which the client should ping (Pusher servers send 120, soketi
    /// and Reverb 30); `nil` when the server sent none (the client then uses 120).
    public var activityTimeout: Int?

    /// Creates the handshake data.
    public init(socketID: String, activityTimeout: Int?) {
        self.socketID = socketID
        self.activityTimeout = activityTimeout
    }

    enum CodingKeys: String, CodingKey {
        case socketID = "socket_id"
        case activityTimeout = "activity_timeout"
    }
}

/// `subscribe` data.
public struct SubscribeRequest: Codable, Hashable, Sendable {
    /// The channel name.
    public var channel: String
    /// `key:signature` for private and presence channels.
    public var auth: String?
    /// The presence member's JSON text (`{"user_id":…, "user_info":…}`), exactly as signed.
    public var channelData: String?

    /// Creates a request.
    public init(channel: String, auth: String? = nil, channelData: String? = nil) {
        self.channel = channel
        self.auth = auth
        self.channelData = channelData
    }

    enum CodingKeys: String, CodingKey {
        case channel, auth
        case channelData = "channel_data"
    }
}

/// `unsubscribe` data.
public struct UnsubscribeRequest: Codable, Hashable, Sendable {
    /// The channel name.
    public var channel: String
    /// Creates a request.
    public init(channel: String) { self.channel = channel }
}

/// `error` and `subscription_error` data.
public struct ErrorPayload: Codable, Hashable, Sendable {
    /// What went wrong.
    public var message: String
    /// A close-code-like number (4xxx), or an HTTP status for auth failures.
    public var code: Int?

    /// Creates an error payload.
    public init(message: String, code: Int?) {
        self.message = message
        self.code = code
    }
}

/// `subscription_succeeded` data of a presence channel: `{"presence": {ids, hash, count}}`.
public struct PresenceSubscriptionData: Codable, Hashable, Sendable {
    /// The members.
    public struct Presence: Codable, Hashable, Sendable {
        /// Member user ids.
        public var ids: [String]
        /// `user_info` per user id.
        public var hash: [String: JSONValue]
        /// Number of members.
        public var count: Int

        /// Creates the member list.
        public init(ids: [String], hash: [String: JSONValue], count: Int) {
            self.ids = ids
            self.hash = hash
            self.count = count
        }
    }

    /// The members.
    public var presence: Presence

    /// Creates the data.
    public init(presence: Presence) { self.presence = presence }
}

/// `member_added` / `member_removed` data, and the parsed `channel_data` of a presence subscription.
public struct PresenceMember: Codable, Hashable, Sendable {
    /// The member's user id (a string on the wire; numbers are accepted and turned into text).
    public var userID: String
    /// What the app's auth endpoint said about the member.
    public var userInfo: JSONValue?

    /// Creates a member.
    public init(userID: String, userInfo: JSONValue? = nil) {
        self.userID = userID
        self.userInfo = userInfo
    }

    enum CodingKeys: String, CodingKey {
        case userID = "user_id"
        case userInfo = "user_info"
    }

    /// Decodes a member; a numeric `user_id` is accepted.
    ///
    /// - Throws: `DecodingError` when `user_id` is missing or not a string or number.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let text = try? container.decode(String.self, forKey: .userID) {
            userID = text
        } else {
            userID = Self.idText(try container.decode(Double.self, forKey: .userID))
        }
        userInfo = try container.decodeIfPresent(JSONValue.self, forKey: .userInfo)
    }
}

extension PresenceMember {
    /// Parses a member from its JSON text (`{"user_id": …, "user_info": …}`, a `member_added`
    /// frame's data) with `StrictJSON`, the same rules as `init(from:)` at a fraction of
    /// JSONDecoder's cost: 100,000 `member_added` decoded with JSONDecoder took 43 % of a
    /// client's 2.2 s (realtime-client-bench, part d).
    ///
    /// - Returns: nil for text that is not an object with a string or numeric `user_id`.
    public init?(parsing text: String) {
        guard case .object(let fields)? = StrictJSON.parse(text) else { return nil }
        switch fields["user_id"] {
        case .string(let id)?: userID = id
        case .number(let number)?: userID = Self.idText(number)
        default: return nil
        }
        switch fields["user_info"] {
        case nil, .null?: userInfo = nil
        case let info?: userInfo = info
        }
    }

    /// A numeric user id as text: whole numbers that fit a 64-bit integer without losing
    /// precision (|n| < 2^53) print as integers, anything else in its shortest decimal form;
    /// never a trap, whatever the number.
    ///
    /// - Parameter number: the id as JSON gave it.
    public static func idText(_ number: Double) -> String {
        if number.isFinite, number == number.rounded(), abs(number) < 9_007_199_254_740_992 {
            return String(Int64(number))
        }
        return String(number)
    }
}

/// `signin` data.
public struct SigninRequest: Codable, Hashable, Sendable {
    /// `key:signature` over `socket_id::user::user_data`.
    public var auth: String
    /// The user's JSON text, with at least `id`.
    public var userData: String

    /// Creates a request.
    public init(auth: String, userData: String) {
        self.auth = auth
        self.userData = userData
    }

    enum CodingKeys: String, CodingKey {
        case auth
        case userData = "user_data"
    }
}
