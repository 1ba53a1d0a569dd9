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

/// Pusher's REST API request signature (auth_version 1.0): hex HMAC-SHA256(secret,
/// "METHOD\nPATH\nQUERY") where QUERY is every parameter but `auth_signature`, keys lower-cased,
/// sorted, joined as `key=value` with `&`, values not percent-encoded.
public enum RESTSignature {
    /// The string to sign.
    ///
    /// - Parameters:
    ///   - method: `GET`, `POST` …
    ///   - path: the request path (`/apps/1/events`).
    ///   - parameters: the query parameters (an `auth_signature` among them is ignored).
    public static func stringToSign(method: String, path: String, parameters: [String: String]) -> String {
        let query = parameters
            .map { (key: $0.key.lowercased(), value: $0.value) }
            .filter { $0.key != "auth_signature" }
            .sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value)" }
            .joined(separator: "&")
        return "\(method)\n\(path)\n\(query)"
    }

    /// The hex signature of a request.
    public static func sign(method: String, path: String, parameters: [String: String], secret: String) -> String {
        Crypto.hex(Crypto.hmacSHA256(key: secret, message: stringToSign(method: method, path: path, parameters: parameters)))
    }

    /// Signed query parameters for a request with `body`: `auth_key`, `auth_timestamp`,
    /// `auth_version`, `body_md5` (when there is a body) and `auth_signature`.
    ///
    /// - Parameters:
    ///   - method: the HTTP method.
    ///   - path: the request path.
    ///   - body: the body bytes.
    ///   - key: the app key.
    ///   - secret: the app secret.
    ///   - timestamp: seconds since 1970.
    public static func signedParameters(method: String, path: String, body: [UInt8], key: String, secret: String, timestamp: Int) -> [String: String] {
        var parameters = ["auth_key": key, "auth_timestamp": String(timestamp), "auth_version": "1.0"]
        if !body.isEmpty { parameters["body_md5"] = Crypto.hex(Crypto.md5(body)) }
        parameters["auth_signature"] = sign(method: method, path: path, parameters: parameters, secret: secret)
        return parameters
    }
}
