/// Channel and user signatures (Pusher Channels' authorisation scheme): `key:hex(HMAC-SHA256(
/// secret, S))` with S = `socket_id:channel` (private), `socket_id:channel:channel_data`
/// (presence) or `socket_id::user::user_data` (signin).
public struct ChannelAuthorization: Sendable, Hashable {
    /// The app key (public).
    public var key: String
    /// The app secret (never sent to clients).
    public var secret: String

    /// Creates a signer for one app.
    public init(key: String, secret: String) {
        self.key = key
        self.secret = secret
    }

    /// The string signed for a subscription.
    ///
    /// - Parameters:
    ///   - socketID: the connection's socket id.
    ///   - channel: the channel name.
    ///   - channelData: the presence member JSON text, exactly as sent.
    public static func subscriptionString(socketID: String, channel: String, channelData: String? = nil) -> String {
        channelData.map { "\(socketID):\(channel):\($0)" } ?? "\(socketID):\(channel)"
    }

    /// The string signed for a signin.
    public static func signinString(socketID: String, userData: String) -> String {
        "\(socketID)::user::\(userData)"
    }

    /// `key:signature` for a private or presence subscription.
    public func authorizeSubscription(socketID: String, channel: String, channelData: String? = nil) -> String {
        "\(key):" + Crypto.hex(Crypto.hmacSHA256(key: secret, message: Self.subscriptionString(socketID: socketID, channel: channel, channelData: channelData)))
    }

    /// `key:signature` for a signin.
    public func authorizeSignin(socketID: String, userData: String) -> String {
        "\(key):" + Crypto.hex(Crypto.hmacSHA256(key: secret, message: Self.signinString(socketID: socketID, userData: userData)))
    }

    /// Checks an `auth` value against the string it should sign, in constant time.
    ///
    /// - Parameters:
    ///   - auth: `key:hex-signature` as the client sent it.
    ///   - signed: the string it must sign.
    /// - Returns: whether the key is this app's and the signature matches.
    public func verify(_ auth: String, signs signed: String) -> Bool {
        guard let colon = auth.firstIndex(of: ":"), auth[..<colon] == key else { return false }
        let given = Array(auth[auth.index(after: colon)...].utf8)
        let expected = Array(Crypto.hex(Crypto.hmacSHA256(key: secret, message: signed)).utf8)
        return Crypto.constantTimeEqual(given, expected)
    }
}
