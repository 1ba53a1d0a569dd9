import Foundation

/// Signs what an app backend's auth endpoints answer (Pusher Channels' channel authorisation
/// and user authentication, DESIGN.md "The wire protocol"), and encrypts events for
/// `private-encrypted-` channels: the Swift counterpart of the Python `pusher` library's
/// `authenticate`, `authenticate_user` and encrypted `trigger`, producing the same values for
/// the same inputs.
///
/// ```swift
/// let signer = AuthorizationSigner(key: "app-key", secret: "app-secret")
/// // POST socket_id=123.456&channel_name=private-orders
/// let answer = try signer.authorizeChannel(socketID: "123.456", channel: "private-orders")
/// let body = try RealtimeMessage.jsonText(answer)   // {"auth":"app-key:…"}
/// ```
///
/// Inputs are validated the way Pusher's server libraries validate them: socket ids are
/// `\d+\.\d+`, channel names use Pusher's alphabet, presence channels need a member, encrypted
/// channels need the app's 32-byte encryption master key. The secret and the master key never
/// appear in `description` or `dump`.
public struct AuthorizationSigner: Sendable, Hashable {
    /// The app key (public; the prefix of every `auth` value).
    public let key: String
    private let secret: String
    private let encryptionMasterKey: [UInt8]?

    /// Creates a signer for an app without encrypted channels.
    ///
    /// - Parameters:
    ///   - key: the app key.
    ///   - secret: the app secret.
    public init(key: String, secret: String) {
        self.key = key
        self.secret = secret
        self.encryptionMasterKey = nil
    }

    /// Creates a signer for an app with encrypted channels.
    ///
    /// - Parameters:
    ///   - key: the app key.
    ///   - secret: the app secret.
    ///   - encryptionMasterKey: the 32-byte master key every encrypted channel's shared secret
    ///     derives from (Pusher's `encryption_master_key_base64`, decoded); it never leaves
    ///     the backend.
    /// - Throws: `AuthorizationSignerError.invalidMasterKey` when the key is not 32 bytes.
    public init(key: String, secret: String, encryptionMasterKey: [UInt8]) throws(AuthorizationSignerError) {
        guard encryptionMasterKey.count == SecretBox.keySize else { throw .invalidMasterKey(encryptionMasterKey.count) }
        self.key = key
        self.secret = secret
        self.encryptionMasterKey = encryptionMasterKey
    }

    /// Creates a signer for an app with encrypted channels, the master key given as base64 the
    /// way Pusher's dashboards and libraries (`encryption_master_key_base64`) hand it out.
    ///
    /// - Parameters:
    ///   - key: the app key.
    ///   - secret: the app secret.
    ///   - encryptionMasterKeyBase64: standard base64 of 32 bytes.
    /// - Throws: `AuthorizationSignerError.invalidMasterKey` when it is not base64 of 32 bytes.
    public init(key: String, secret: String, encryptionMasterKeyBase64: String) throws(AuthorizationSignerError) {
        guard let bytes = Data(base64Encoded: encryptionMasterKeyBase64) else { throw .invalidMasterKey(nil) }
        try self.init(key: key, secret: secret, encryptionMasterKey: Array(bytes))
    }

    /// Whether this signer can serve `private-encrypted-` channels.
    public var supportsEncryptedChannels: Bool { encryptionMasterKey != nil }

    // MARK: - Channels

    /// The answer of a channel auth endpoint: `auth` for `private-` channels; `auth` over the
    /// member's `channel_data` for `presence-` channels; `auth` and `shared_secret` for
    /// `private-encrypted-` channels.
    ///
    /// - Parameters:
    ///   - socketID: the `socket_id` the client posted (its connection id, `\d+\.\d+`).
    ///   - channel: the `channel_name` the client posted.
    ///   - member: the member for a presence channel: who the backend says the user is. The
    ///     client cannot change it, since it is part of the signed string. Only for presence
    ///     channels.
    /// - Returns: the JSON body to answer with (`RealtimeMessage.jsonText(_:)` encodes it).
    /// - Throws: `AuthorizationSignerError`: `.invalidSocketID`, `.invalidChannelName`,
    ///   `.publicChannel` (public channels need no authorisation), `.memberRequired` (a presence
    ///   channel without a member), `.memberNotAllowed` (a member for a non-presence channel),
    ///   `.invalidMember` (an empty user id), `.masterKeyRequired` (an encrypted channel on a
    ///   signer without a master key).
    public func authorizeChannel(socketID: String, channel: String, member: PresenceMember? = nil) throws(AuthorizationSignerError) -> ChannelAuthorizationResponse {
        try Self.validate(socketID: socketID)
        try Self.validate(channel: channel)
        let signer = ChannelAuthorization(key: key, secret: secret)
        switch ChannelKind(channelName: channel) {
        case .public:
            throw .publicChannel(channel)
        case .presence:
            guard let member else { throw .memberRequired(channel) }
            guard !member.userID.isEmpty else { throw .invalidMember("the user id is empty") }
            let channelData: String
            do {
                channelData = try RealtimeMessage.jsonText(member)
            } catch {
                throw .invalidMember("user_info is not representable as JSON (a non-finite number)")
            }
            return ChannelAuthorizationResponse(
                auth: signer.authorizeSubscription(socketID: socketID, channel: channel, channelData: channelData),
                channelData: channelData)
        case .private:
            guard member == nil else { throw .memberNotAllowed(channel) }
            return ChannelAuthorizationResponse(auth: signer.authorizeSubscription(socketID: socketID, channel: channel))
        case .encrypted:
            guard member == nil else { throw .memberNotAllowed(channel) }
            guard let encryptionMasterKey else { throw .masterKeyRequired(channel) }
            let secret = Self.sharedSecret(channel: channel, masterKey: encryptionMasterKey)
            return ChannelAuthorizationResponse(
                auth: signer.authorizeSubscription(socketID: socketID, channel: channel),
                sharedSecret: Data(secret).base64EncodedString())
        }
    }

    /// An encrypted channel's secretbox key: SHA-256 of the channel name's UTF-8 bytes followed
    /// by the master key, as the Python `pusher` library's `generate_shared_secret` and
    /// pusher-js compute it. The server never knows it; the backend hands it to authorised
    /// clients in `shared_secret`.
    ///
    /// - Parameters:
    ///   - channel: the `private-encrypted-` channel name.
    ///   - masterKey: the app's 32-byte encryption master key.
    /// - Returns: the 32-byte key.
    public static func sharedSecret(channel: String, masterKey: [UInt8]) -> [UInt8] {
        Crypto.sha256(Array(channel.utf8) + masterKey)
    }

    /// Encrypts an event's data for a `private-encrypted-` channel: the data to publish through
    /// the HTTP API, which only subscribers holding the channel's shared secret can open
    /// (`SecretBox.open`). A fresh random nonce each call.
    ///
    /// - Parameters:
    ///   - data: the event's data text (usually JSON).
    ///   - channel: the `private-encrypted-` channel it is published on.
    /// - Returns: the JSON text of an `EncryptedPayload` (`{"ciphertext": …, "nonce": …}`).
    /// - Throws: `AuthorizationSignerError`: `.invalidChannelName`, `.notEncryptedChannel`,
    ///   `.masterKeyRequired`, `.encryptionFailed` (libsodium unavailable).
    public func encrypt(data: String, channel: String) throws(AuthorizationSignerError) -> String {
        try Self.validate(channel: channel)
        guard ChannelKind(channelName: channel) == .encrypted else { throw .notEncryptedChannel(channel) }
        guard let encryptionMasterKey else { throw .masterKeyRequired(channel) }
        let payload: EncryptedPayload
        do {
            payload = try SecretBox.seal(Array(data.utf8), key: Self.sharedSecret(channel: channel, masterKey: encryptionMasterKey))
        } catch {
            throw .encryptionFailed(error)
        }
        // Two base64 strings always encode.
        return (try? RealtimeMessage.jsonText(payload)) ?? "{}"
    }

    // MARK: - Users

    /// The answer of a user-authentication (signin) endpoint: `auth` over
    /// `socket_id::user::user_data`, and the user data exactly as signed.
    ///
    /// - Parameters:
    ///   - socketID: the `socket_id` the client posted.
    ///   - userData: the user's JSON object text; it must have an `id` that is a non-empty
    ///     string of at most 200 characters from Pusher's channel-name alphabet (Pusher's
    ///     `validate_user_id`). Other fields (`user_info`, `watchlist`) pass through.
    /// - Returns: the JSON body to answer with.
    /// - Throws: `AuthorizationSignerError.invalidSocketID`, `.invalidUserData`.
    public func authenticateUser(socketID: String, userData: String) throws(AuthorizationSignerError) -> UserAuthenticationResponse {
        try Self.validate(socketID: socketID)
        let user: [String: JSONValue]
        do {
            user = try StrictJSON.decode([String: JSONValue].self, from: userData.utf8)
        } catch .duplicateName(let name) {
            throw .invalidUserData("the member name \"\(name.prefix(64))\" appears twice")
        } catch {
            throw .invalidUserData("not a JSON object")
        }
        guard let id = user["id"] else { throw .invalidUserData("no \"id\"") }
        guard let text = id.string else { throw .invalidUserData("\"id\" is not a string") }
        guard !text.isEmpty, text.count <= 200, Self.isChannelAlphabet(text) else {
            throw .invalidUserData("\"id\" must be 1 to 200 characters of A-Z a-z 0-9 _ - = @ , . ;")
        }
        let signer = ChannelAuthorization(key: key, secret: secret)
        return UserAuthenticationResponse(auth: signer.authorizeSignin(socketID: socketID, userData: userData), userData: userData)
    }

    // MARK: - Validation

    /// Whether `socketID` has the form servers hand out: digits, a dot, digits (`\d+\.\d+`,
    /// the Python `pusher` library's `socket_id_re`).
    public static func isValidSocketID(_ socketID: String) -> Bool {
        let parts = socketID.utf8.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        return parts.count == 2 && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }
    }

    /// Whether `name` is a valid channel name: 1 to 164 characters of `A-Z a-z 0-9 _ - = @ , . ;`
    /// (Pusher Channels' channel naming rule).
    public static func isValidChannelName(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= 164 && isChannelAlphabet(name)
    }

    private static func isChannelAlphabet(_ text: String) -> Bool {
        text.utf8.allSatisfy { byte in
            (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                || "_-=@,.;".utf8.contains(byte)
        }
    }

    private static func validate(socketID: String) throws(AuthorizationSignerError) {
        guard isValidSocketID(socketID) else { throw .invalidSocketID(String(socketID.prefix(40))) }
    }

    private static func validate(channel: String) throws(AuthorizationSignerError) {
        guard isValidChannelName(channel) else { throw .invalidChannelName(String(channel.prefix(200))) }
    }
}

extension AuthorizationSigner: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key only: the secret and the master key stay out of logs.
    public var description: String {
        "AuthorizationSigner(key: \(key), secret: <redacted>\(encryptionMasterKey == nil ? "" : ", encryptionMasterKey: <redacted>"))"
    }

    /// The same as `description`.
    public var debugDescription: String { description }

    /// The key only, so `dump` and the debugger do not show the secret either.
    public var customMirror: Mirror { Mirror(self, children: ["key": key], displayStyle: .struct) }
}

/// Why `AuthorizationSigner` refused to sign or encrypt.
public enum AuthorizationSignerError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The socket id is not `\d+\.\d+` (the start of it is kept).
    case invalidSocketID(String)
    /// The channel name is empty, longer than 164 characters or outside Pusher's alphabet.
    case invalidChannelName(String)
    /// A public channel: clients subscribe without authorisation, so nothing is signed.
    case publicChannel(String)
    /// A presence channel needs the member (`user_id`, `user_info`) the signature binds.
    case memberRequired(String)
    /// A member was given for a channel that is not a presence channel (the server would
    /// refuse a signature over channel data there).
    case memberNotAllowed(String)
    /// The presence member cannot be signed: why.
    case invalidMember(String)
    /// An encrypted channel on a signer created without an encryption master key.
    case masterKeyRequired(String)
    /// The master key is not 32 bytes (its size), or not base64 (`nil`).
    case invalidMasterKey(Int?)
    /// `encrypt` was asked for a channel that is not `private-encrypted-`.
    case notEncryptedChannel(String)
    /// The user data cannot be signed: why.
    case invalidUserData(String)
    /// libsodium could not encrypt.
    case encryptionFailed(SecretBoxError)

    /// The refusal as a code the backend libraries share (Backends/conformance): `invalid_socket_id`,
    /// `invalid_channel`, `public_channel`, `member_required`, `member_not_allowed`,
    /// `invalid_member`, `master_key_required`, `invalid_master_key`, `not_encrypted_channel`,
    /// `invalid_user_data`, `encryption_failed`.
    public var code: String {
        switch self {
        case .invalidSocketID: return "invalid_socket_id"
        case .invalidChannelName: return "invalid_channel"
        case .publicChannel: return "public_channel"
        case .memberRequired: return "member_required"
        case .memberNotAllowed: return "member_not_allowed"
        case .invalidMember: return "invalid_member"
        case .masterKeyRequired: return "master_key_required"
        case .invalidMasterKey: return "invalid_master_key"
        case .notEncryptedChannel: return "not_encrypted_channel"
        case .invalidUserData: return "invalid_user_data"
        case .encryptionFailed: return "encryption_failed"
        }
    }

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .invalidSocketID(let id): return "invalid socket id \"\(id)\": expected digits.digits"
        case .invalidChannelName(let name): return "invalid channel name \"\(name)\": 1 to 164 characters of A-Z a-z 0-9 _ - = @ , . ;"
        case .publicChannel(let name): return "\(name) is a public channel: it needs no authorisation"
        case .memberRequired(let name): return "\(name) is a presence channel: a member (user_id, user_info) is required"
        case .memberNotAllowed(let name): return "\(name) is not a presence channel: it takes no member"
        case .invalidMember(let why): return "invalid presence member: \(why)"
        case .masterKeyRequired(let name): return "\(name) is an encrypted channel: the signer needs the app's encryption master key"
        case .invalidMasterKey(let size?): return "the encryption master key is 32 bytes, not \(size)"
        case .invalidMasterKey(nil): return "the encryption master key is not base64"
        case .notEncryptedChannel(let name): return "\(name) is not a private-encrypted- channel"
        case .invalidUserData(let why): return "invalid user data: \(why)"
        case .encryptionFailed(let error): return "encryption failed: \(error)"
        }
    }
}
