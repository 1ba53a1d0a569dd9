/// What an app backend's auth endpoint answers for one channel subscription (Pusher's
/// `{"auth": …, "channel_data": …, "shared_secret": …}`): the client sends `auth` and
/// `channel_data` with `<ns>:subscribe`, and keeps `shared_secret` to open the events of a
/// `private-encrypted-` channel.
public struct ChannelAuthorizationResponse: Codable, Hashable, Sendable {
    /// `key:hex(HMAC-SHA256(secret, socket_id:channel[:channel_data]))`.
    public var auth: String
    /// Presence channels: the member JSON text (`{"user_id": …, "user_info": …}`), signed
    /// exactly as sent.
    public var channelData: String?
    /// Encrypted channels: the channel's 32-byte secretbox key, base64.
    public var sharedSecret: String?

    /// Creates a response.
    public init(auth: String, channelData: String? = nil, sharedSecret: String? = nil) {
        self.auth = auth
        self.channelData = channelData
        self.sharedSecret = sharedSecret
    }

    enum CodingKeys: String, CodingKey {
        case auth
        case channelData = "channel_data"
        case sharedSecret = "shared_secret"
    }
}

/// What an app backend's user-authentication endpoint answers for a signin (Pusher's
/// `{"auth": …, "user_data": …}`), sent as `<ns>:signin`.
public struct UserAuthenticationResponse: Codable, Hashable, Sendable {
    /// `key:hex(HMAC-SHA256(secret, socket_id::user::user_data))`.
    public var auth: String
    /// The user JSON text (`{"id": …, …}`), signed exactly as sent.
    public var userData: String

    /// Creates a response.
    public init(auth: String, userData: String) {
        self.auth = auth
        self.userData = userData
    }

    enum CodingKeys: String, CodingKey {
        case auth
        case userData = "user_data"
    }
}
