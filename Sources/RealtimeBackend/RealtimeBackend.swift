import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SystemSupport
// The backend's API speaks in the protocol's types (JSONValue, RoomRule, the auth answers):
// `import RealtimeBackend` alone gives them.
@_exported import RealtimeProtocol

/// The app backend's half of rooms (rooms seed: `realtime.room('order:{id}', { history: 20 },
/// authorise)`): rules declared once by pattern, the batched per-room auth answer with tokens
/// that are not bound to a connection, the public grants of `config()`, and the signing
/// helpers for channels (`channels`).
///
/// ```swift
/// let backend = RealtimeBackend(appKey: "key", appSecret: "secret")
/// try backend.room("order:{id}", history: 20) { user, params in
///     await orders.find(params["id"]!)?.userID == user
/// }
/// let answer = await backend.authorizeRooms(["order:1042"], user: "u1")
/// ```
///
/// Tokens are JWTs signed HS256 with the app secret (`RoomClaims`), carrying the room's rule,
/// so the realtime server learns the rules from them (docs/rooms-protocol.md).
public final class RealtimeBackend: Sendable {
    /// Decides whether `user` may join the room whose pattern matched with `parameters`
    /// (`["id": "1042"]` for `order:{id}` and `order:1042`). `user` is the signed-in user: a
    /// visitor (`nil`) is refused a non-public rule before it is asked, and a public rule takes
    /// no authorizer. May be async (a database lookup).
    public typealias Authorizer = @Sendable (_ user: String?, _ parameters: [String: String]) async -> Bool

    /// A declared rule: a pattern, what the room keeps and allows, who may join.
    public struct Rule: Sendable {
        /// The pattern (`order:{id}`).
        public var pattern: String
        /// What the room keeps and allows.
        public var rule: RoomRule
        /// Who may join; `nil` admits every signed-in user (and everyone, for a public rule).
        public var authorize: Authorizer?
    }

    /// Why a rule is refused.
    public enum RuleError: Error, Hashable, Sendable, CustomStringConvertible {
        /// The pattern is not a valid pattern (`RoomName.isValidPattern`).
        case invalidPattern(String)
        /// A value of the rule is out of its range (`RoomRule.isValid`).
        case invalidRule(String)
        /// A sealed rule needs the backend's encryption master key.
        case masterKeyRequired(String)
        /// A server URL without a scheme and a host.
        case invalidServerURL(String)
        /// An authorizer on a public rule: the public grant admits every name of the pattern
        /// with no request to the backend, so the authorizer could never refuse anyone.
        case publicAuthorizer(String)
        /// A public rule and another rule whose patterns can match the same name (the first
        /// pattern, the other): the grant would admit a visitor to a name the other rule claims,
        /// or the other rule would silently never apply (`RoomName.patternsOverlap`).
        case publicOverlap(String, other: String)

        /// The code the four backend libraries share (Backends/README.md): `invalid_pattern`,
        /// `invalid_rule`, `master_key_required`, `invalid_server_url`, `public_authorizer`,
        /// `public_overlap`.
        public var code: String {
            switch self {
            case .invalidPattern: return "invalid_pattern"
            case .invalidRule: return "invalid_rule"
            case .masterKeyRequired: return "master_key_required"
            case .invalidServerURL: return "invalid_server_url"
            case .publicAuthorizer: return "public_authorizer"
            case .publicOverlap: return "public_overlap"
            }
        }

        /// A human-readable explanation.
        public var description: String {
            switch self {
            case .invalidPattern(let pattern): return "invalid room pattern \(pattern)"
            case .invalidRule(let pattern): return "rule for \(pattern) out of range (history 0…100000, span 1…1800 s, max ≥ 1)"
            case .masterKeyRequired(let pattern): return "the sealed rule for \(pattern) needs the backend's encryptionMasterKey"
            case .invalidServerURL(let url): return "not an http(s) server URL: \(url)"
            case .publicAuthorizer(let pattern): return "the public rule for \(pattern) takes no authorizer: its grant admits anyone without asking the backend"
            case .publicOverlap(let pattern, let other):
                return "the rules for \(other) and \(pattern) can match the same room, and one is public: a public pattern must match no name another rule claims"
            }
        }
    }

    /// The app key.
    public let appKey: String
    /// Signs private, presence and encrypted channel subscriptions and signins.
    public let channels: AuthorizationSigner
    /// How long a room token is valid (1 hour by default; the client renews 10 minutes before).
    public let tokenLifetime: Duration
    /// How long a public grant is valid (24 hours by default).
    public let grantLifetime: Duration
    let secret: String
    private let masterKey: [UInt8]?
    private let wallClock: @Sendable () -> Int64
    private let rules = Locked<[Rule]>([])

    /// Creates a backend for one app.
    ///
    /// - Parameters:
    ///   - appKey: the app key.
    ///   - appSecret: the app secret: signs tokens and channel authorisations.
    ///   - encryptionMasterKey: 32 bytes for sealed rooms and encrypted channels, or `nil`.
    ///   - tokenLifetime: room token validity (at least 11 minutes, so the client's renewal
    ///     10 minutes before expiry leaves it usable).
    ///   - grantLifetime: public grant validity.
    ///   - wallClock: milliseconds since 1970.
    public init(appKey: String, appSecret: String, encryptionMasterKey: [UInt8]? = nil,
                tokenLifetime: Duration = .seconds(3600), grantLifetime: Duration = .seconds(86_400),
                wallClock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }) {
        self.appKey = appKey
        self.secret = appSecret
        self.masterKey = encryptionMasterKey
        self.tokenLifetime = max(tokenLifetime, .seconds(660))
        self.grantLifetime = max(grantLifetime, .seconds(660))
        self.wallClock = wallClock
        if let encryptionMasterKey, let signer = try? AuthorizationSigner(key: appKey, secret: appSecret, encryptionMasterKey: encryptionMasterKey) {
            channels = signer
        } else {
            channels = AuthorizationSigner(key: appKey, secret: appSecret)
        }
    }

    /// Declares the rule for rooms matching `pattern`; the first declared match wins.
    ///
    /// A public rule is joined with `config()`'s grant, which the server checks against the
    /// pattern alone: so a public rule takes no authorizer, and no name may match both a public
    /// pattern and another rule's (either declared first); both are refused here, so a visitor
    /// never gets into a room `authorizeRooms` refuses.
    ///
    /// - Parameters:
    ///   - pattern: `order:{id}`, `chat:{a}:{b}`, `shop`.
    ///   - history: events kept for replay and paging, 0…100,000.
    ///   - span: how long events are kept (at most 30 minutes).
    ///   - presence: members announced by user.
    ///   - maxMembers: capacity in distinct users.
    ///   - membersSend: members may send events.
    ///   - webhook: room events go to the app's webhook.
    ///   - sealed: payloads sealed end to end (needs the master key).
    ///   - isPublic: joinable by anyone through `config()`'s grant.
    ///   - authorize: who may join; `nil` admits every signed-in user (everyone, for a public
    ///     rule, which takes none).
    /// - Throws: `RuleError`: `invalidPattern`, `invalidRule`, `masterKeyRequired`,
    ///   `publicAuthorizer` (an authorizer on a public rule), `publicOverlap` (a public pattern
    ///   and another that can match the same name).
    public func room(_ pattern: String, history: Int = 0, span: Duration = .seconds(RoomRule.maxSpan), presence: Bool = false,
                     maxMembers: Int? = nil, membersSend: Bool = false, webhook: Bool = false, sealed: Bool = false,
                     isPublic: Bool = false, authorize: Authorizer? = nil) throws(RuleError) {
        guard RoomName.isValidPattern(pattern) else { throw .invalidPattern(pattern) }
        let rule = RoomRule(history: history, span: Int(span.components.seconds), presence: presence, maxMembers: maxMembers,
                            membersSend: membersSend, webhook: webhook, sealed: sealed, isPublic: isPublic)
        guard rule.isValid else { throw .invalidRule(pattern) }
        guard !sealed || masterKey != nil else { throw .masterKeyRequired(pattern) }
        guard !isPublic || authorize == nil else { throw .publicAuthorizer(pattern) }
        let overlapping = rules.withLock { rules -> String? in
            let other = rules.first { ($0.rule.isPublic || isPublic) && RoomName.patternsOverlap($0.pattern, pattern) }
            if other == nil { rules.append(Rule(pattern: pattern, rule: rule, authorize: authorize)) }
            return other?.pattern
        }
        if let overlapping { throw .publicOverlap(pattern, other: overlapping) }
    }

    /// The rule and parameters for a room name, or `nil` when no pattern matches.
    public func rule(for room: String) -> (rule: Rule, parameters: [String: String])? {
        for rule in rules.withLock({ $0 }) {
            if let parameters = RoomName.match(room, pattern: rule.pattern) { return (rule, parameters) }
        }
        return nil
    }

    /// The batched auth answer: for each room, a token or an error code. Authorisers of
    /// different rooms run concurrently.
    ///
    /// - Parameters:
    ///   - rooms: room names (duplicates answered once; the first 100 distinct names in the
    ///     request's order are answered, the rest get `bad_request`: Backends/conformance).
    ///   - user: the signed-in user, or `nil`.
    ///   - info: the user's presence info for presence rooms.
    public func authorizeRooms(_ rooms: [String], user: String?, info: JSONValue? = nil) async -> RoomAuthorizationResponse {
        var seen = Set<String>()
        let names = rooms.filter { seen.insert($0).inserted }
        let entries = await withTaskGroup(of: (String, RoomAuthorizationResponse.Entry).self) { group in
            for (index, name) in names.enumerated() {
                guard index < RoomAuthorizationRequest.maxRooms else {
                    group.addTask { (name, .init(error: .badRequest)) }
                    continue
                }
                group.addTask { (name, await self.authorize(name, user: user, info: info)) }
            }
            var entries: [String: RoomAuthorizationResponse.Entry] = [:]
            for await (name, entry) in group { entries[name] = entry }
            return entries
        }
        return RoomAuthorizationResponse(time: wallClock(), rooms: entries)
    }

    private func authorize(_ room: String, user: String?, info: JSONValue?) async -> RoomAuthorizationResponse.Entry {
        guard RoomName.isValid(room) else { return .init(error: .invalidRoom) }
        guard let (declared, parameters) = rule(for: room) else { return .init(error: .noRule) }
        guard user != nil || declared.rule.isPublic else { return .init(error: .forbidden) }
        if let authorize = declared.authorize, await !authorize(user, parameters) { return .init(error: .forbidden) }
        do {
            let (token, expires) = try token(room: room, user: user, info: declared.rule.presence ? info : nil, rule: declared.rule, lifetime: tokenLifetime)
            return .init(token: token, expires: expires, key: declared.rule.sealed ? roomKey(room).map { Data($0).base64EncodedString() } : nil)
        } catch {
            return .init(error: .badRequest)
        }
    }

    /// The public grants: one token per public pattern, so the app joins those rooms with no
    /// auth request (rooms seed, "Rooms anyone may join").
    public func config() -> RoomConfiguration {
        let grants = rules.withLock { $0 }.filter(\.rule.isPublic).compactMap { declared -> RoomConfiguration.Grant? in
            guard let (token, expires) = try? token(room: declared.pattern, user: nil, info: nil, rule: declared.rule, lifetime: grantLifetime) else { return nil }
            return .init(pattern: declared.pattern, token: token, expires: expires)
        }
        return RoomConfiguration(time: wallClock(), grants: grants)
    }

    /// Mints a room token.
    ///
    /// - Returns: the token and its expiry in milliseconds since 1970.
    /// - Throws: `EncodingError` (not for these claims in practice).
    public func token(room: String, user: String?, info: JSONValue? = nil, rule: RoomRule, lifetime: Duration) throws -> (token: String, expires: Int64) {
        let now = wallClock()
        let expires = now / 1000 + lifetime.components.seconds
        let claims = RoomClaims(subject: user, room: room, expiresAt: Int(expires), issuedAt: Int(now / 1000), info: info, rule: rule)
        return (try JSONWebToken.sign(claims, secret: secret), expires * 1000)
    }

    /// A sealed room's key: SHA-256 of the room name and the master key (as Pusher derives an
    /// encrypted channel's shared secret), or `nil` without a master key.
    public func roomKey(_ room: String) -> [UInt8]? {
        masterKey.map { AuthorizationSigner.sharedSecret(channel: room, masterKey: $0) }
    }

    /// The body of `POST /apps/{id}/room_events` for one event, with the room's declared rule
    /// (so the server keeps history by it even before anyone joined) and, for a sealed room,
    /// the data sealed with the room's key.
    ///
    /// - Parameters:
    ///   - room: the room name.
    ///   - event: the event name.
    ///   - data: the event's data.
    /// - Returns: the JSON body text.
    /// - Throws: `RuleError.invalidPattern` when no rule matches the room; `SecretBoxError`
    ///   when sealing fails; `EncodingError`.
    public func roomEventBody(room: String, event: String, data: JSONValue) throws -> String {
        guard let (declared, _) = rule(for: room) else { throw RuleError.invalidPattern(room) }
        var text = try RealtimeMessage.jsonText(data)
        if declared.rule.sealed, let key = roomKey(room) {
            text = try RealtimeMessage.jsonText(try SecretBox.seal(Array(text.utf8), key: key))
        }
        struct Body: Encodable {
            var name: String
            var room: String
            var data: String
            var rule: RoomRule
        }
        return try RealtimeMessage.jsonText(Body(name: event, room: room, data: text, rule: declared.rule))
    }

    /// The signed HTTP request that publishes one room event through the realtime server's
    /// API (`POST {server}/apps/{appID}/room_events`, the body of `roomEventBody`, signed as
    /// Pusher's REST API is): send it with `URLSession`.
    ///
    /// - Parameters:
    ///   - server: the server's HTTP base URL (`http://127.0.0.1:6001`).
    ///   - appID: the app id.
    ///   - room: the room name.
    ///   - event: the event name.
    ///   - data: the event's data.
    /// - Returns: the request (10 s timeout).
    /// - Throws: what `roomEventBody` throws; `RuleError.invalidServerURL`.
    public func roomEventRequest(server: URL, appID: String, room: String, event: String, data: JSONValue) throws -> URLRequest {
        let body = Array(try roomEventBody(room: room, event: event, data: data).utf8)
        guard var components = URLComponents(url: server, resolvingAgainstBaseURL: false), components.host != nil else {
            throw RuleError.invalidServerURL(server.absoluteString)
        }
        var base = components.percentEncodedPath
        while base.hasSuffix("/") { base.removeLast() }
        let path = "\(base)/apps/\(appID)/room_events"
        components.percentEncodedPath = path
        components.percentEncodedQuery = signedQuery(method: "POST", path: path, body: body)
        guard let url = components.url else { throw RuleError.invalidServerURL(server.absoluteString) }
        var request = URLRequest(url: url, timeoutInterval: 10)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(body)
        return request
    }

    /// The query string that signs a request to the realtime server's HTTP API (Pusher's REST
    /// signature: `auth_key`, `auth_timestamp` in seconds, `auth_version=1.0`, `body_md5` for a
    /// body, and `auth_signature`, the hex HMAC-SHA256 of `METHOD\npath\nsorted query` under the
    /// app secret), its parameters sorted by name and percent-encoded (RFC 3986 unreserved
    /// characters kept): what `roomEventRequest` sends, and what the other backends' libraries
    /// write byte for byte (Backends/conformance).
    ///
    /// - Parameters:
    ///   - method: `GET` or `POST`.
    ///   - path: the request's path (`/apps/42/events`), as sent.
    ///   - body: the body's bytes (none for a GET).
    /// - Returns: `auth_key=…&auth_signature=…&auth_timestamp=…&auth_version=1.0[&body_md5=…]`.
    public func signedQuery(method: String, path: String, body: [UInt8]) -> String {
        let parameters = RESTSignature.signedParameters(method: method, path: path, body: body, key: appKey, secret: secret,
                                                        timestamp: Int(wallClock() / 1000))
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        return parameters.sorted { $0.key < $1.key }
            .map { "\($0.key)=\($0.value.addingPercentEncoding(withAllowedCharacters: unreserved) ?? $0.value)" }
            .joined(separator: "&")
    }
}
