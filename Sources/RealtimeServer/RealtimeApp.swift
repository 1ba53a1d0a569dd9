/// One application served by the realtime server: its credentials and limits.
public struct RealtimeApp: Hashable, Sendable, Codable {
    /// The app id used in HTTP API paths (`/apps/{id}/events`).
    public var id: String
    /// The public key clients connect with (`/app/{key}`).
    public var key: String
    /// The secret that signs channel authorisations and HTTP API requests.
    public var secret: String
    /// Most simultaneous connections; one more is closed with 4100 (over capacity).
    public var maxConnections: Int
    /// Seconds of silence before the server pings a connection; sent in the handshake.
    public var activityTimeout: Int
    /// Seconds a connection has to sign in (`<ns>:signin`) before it is closed with 4009
    /// "Unauthorized: signin required", or `nil` when signin is optional (the
    /// realtime-connection-lifecycle seed, "Close code 4009": the app requires authorised
    /// connections and this one did not authorise in time).
    public var userAuthenticationTimeout: Int?
    /// Where webhook events are posted (`http://…`), or `nil` for none (Pusher Channels
    /// webhooks; see `WebhookDispatcher`).
    public var webhookURL: String?
    /// Most users in one presence channel (Pusher's limit: 100); one more is refused with a
    /// `subscription_error` of code 4100. Users already in the channel may add sockets.
    public var maxPresenceMembers: Int
    /// Largest presence `user_info`, in bytes of its JSON (Pusher's limit: 1 KB); a larger
    /// one is refused with a `subscription_error` of code 4100 before it is kept or told.
    public var maxPresenceUserInfoBytes: Int
    /// Whether a client of this app that offers `permessage-deflate` (RFC 7692; every browser
    /// does) gets it: each message compressed with the context kept between messages, so a
    /// replay of similar JSON events goes over the wire about 8 times smaller
    /// (BENCHMARKS.md). Costs zlib's state per compressing connection
    /// (`RealtimeServer.permessageDeflate`), and limits what such a client sends to messages
    /// each read of which inflates to under 4 KiB (libwebsockets 4.1.6: `PerMessageDeflate`);
    /// past it, 1009. Off by default.
    public var compression: Bool
    /// A token that opens the operator's console (`/console`) for this app alone, or `nil`
    /// (config `"console_token"`, at least `ConsoleAccess.minimumTokenLength` characters).
    /// `--console-token` opens it for every app.
    public var consoleToken: String?

    /// Creates an app.
    ///
    /// - Parameters:
    ///   - id: app id.
    ///   - key: app key.
    ///   - secret: app secret.
    ///   - maxConnections: connection limit (default 100,000).
    ///   - activityTimeout: seconds (default 120, Pusher's value).
    ///   - userAuthenticationTimeout: seconds to sign in before a 4009 close, or `nil` (the
    ///     default) when signin is optional.
    ///   - webhookURL: the webhook endpoint, or `nil`.
    ///   - maxPresenceMembers: users per presence channel (default 100, Pusher's).
    ///   - maxPresenceUserInfoBytes: bytes of a member's `user_info` JSON (default 1,024, Pusher's).
    ///   - compression: accept `permessage-deflate` from this app's clients (default off).
    ///   - consoleToken: a token opening the console for this app alone (default none).
    public init(
        id: String, key: String, secret: String, maxConnections: Int = 100_000, activityTimeout: Int = 120,
        userAuthenticationTimeout: Int? = nil, webhookURL: String? = nil, maxPresenceMembers: Int = 100, maxPresenceUserInfoBytes: Int = 1024,
        compression: Bool = false, consoleToken: String? = nil
    ) {
        self.id = id
        self.key = key
        self.secret = secret
        self.maxConnections = maxConnections
        self.activityTimeout = activityTimeout
        self.userAuthenticationTimeout = userAuthenticationTimeout
        self.webhookURL = webhookURL
        self.maxPresenceMembers = maxPresenceMembers
        self.maxPresenceUserInfoBytes = maxPresenceUserInfoBytes
        self.compression = compression
        self.consoleToken = consoleToken
    }

    enum CodingKeys: String, CodingKey {
        case id, key, secret
        case maxConnections = "max_connections"
        case activityTimeout = "activity_timeout"
        case userAuthenticationTimeout = "user_authentication_timeout"
        case webhookURL = "webhook_url"
        case maxPresenceMembers = "max_presence_members"
        case maxPresenceUserInfoBytes = "max_presence_user_info_bytes"
        case compression
        case consoleToken = "console_token"
    }

    /// Decodes an app from a config file entry; limits are optional.
    ///
    /// - Throws: `DecodingError` when id, key or secret is missing.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        id = try container.decode(String.self, forKey: .id)
        key = try container.decode(String.self, forKey: .key)
        secret = try container.decode(String.self, forKey: .secret)
        maxConnections = try container.decodeIfPresent(Int.self, forKey: .maxConnections) ?? 100_000
        activityTimeout = try container.decodeIfPresent(Int.self, forKey: .activityTimeout) ?? 120
        userAuthenticationTimeout = try container.decodeIfPresent(Int.self, forKey: .userAuthenticationTimeout)
        webhookURL = try container.decodeIfPresent(String.self, forKey: .webhookURL)
        maxPresenceMembers = try container.decodeIfPresent(Int.self, forKey: .maxPresenceMembers) ?? 100
        maxPresenceUserInfoBytes = try container.decodeIfPresent(Int.self, forKey: .maxPresenceUserInfoBytes) ?? 1024
        compression = try container.decodeIfPresent(Bool.self, forKey: .compression) ?? false
        consoleToken = try container.decodeIfPresent(String.self, forKey: .consoleToken)
    }
}
