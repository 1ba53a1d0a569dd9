import RealtimeProtocol

/// Who may open the operator's console, and which apps each may see: a server-wide token
/// (`--console-token`) opens every app, an app's own token (`RealtimeApp.consoleToken`) that
/// app alone. With neither, the console is off (`/console` answers 404).
///
/// A token is given as `Authorization: Bearer TOKEN` (scripts) or once to `POST
/// /console/login`, which sets a session cookie; never in a URL, which proxies and access
/// logs keep. Tokens are compared in constant time.
public struct ConsoleAccess: Sendable {
    /// The apps a token or session opens.
    public enum Scope: Sendable, Hashable {
        /// Every app of the server.
        case all
        /// One app, by id.
        case app(String)

        /// Whether the scope opens the app with id `id`.
        public func opens(_ id: String) -> Bool {
            switch self {
            case .all: true
            case .app(let app): app == id
            }
        }
    }

    /// The server-wide token, if any.
    public var serverToken: String?
    /// Apps' own tokens, by app id.
    public var appTokens: [String: String]
    /// Every served app's secret, by app id: mixed into the session key, so that no token
    /// holder can work the key out from their own token.
    var appSecrets: [String: String]

    /// Shortest token accepted (a short one is refused at start: it would be guessed).
    public static let minimumTokenLength = 16

    /// Creates the access rules.
    ///
    /// - Parameters:
    ///   - serverToken: the server-wide token, or `nil`.
    ///   - apps: the served apps; those with a `consoleToken` get their own access.
    public init(serverToken: String?, apps: [RealtimeApp]) {
        self.serverToken = serverToken
        self.appSecrets = Dictionary(apps.map { ($0.id, $0.secret) }, uniquingKeysWith: { first, _ in first })
        self.appTokens = Dictionary(apps.compactMap { app in app.consoleToken.map { (app.id, $0) } }, uniquingKeysWith: { first, _ in first })
    }

    /// Whether any token opens the console.
    public var isEnabled: Bool { serverToken != nil || !appTokens.isEmpty }

    /// The scope `token` opens, or `nil`: every token is compared (in constant time), so the
    /// time taken does not tell which one came close.
    public func scope(of token: String) -> Scope? {
        let given = Array(token.utf8)
        var found: Scope?
        if let serverToken, Self.equal(given, serverToken) { found = .all }
        for (app, appToken) in appTokens.sorted(by: { $0.key < $1.key }) where Self.equal(given, appToken) && found == nil {
            found = .app(app)
        }
        return found
    }

    /// Constant-time equality of `given` and `expected`'s UTF-8 (their SHA-256 digests are
    /// compared, so the lengths do not show either).
    static func equal(_ given: [UInt8], _ expected: String) -> Bool {
        Crypto.constantTimeEqual(Crypto.sha256(given), Crypto.sha256(Array(expected.utf8)))
    }
}

/// A console session, carried by the `HttpOnly`, `SameSite=Strict` cookie (`Secure` over HTTPS)
/// `POST /console/login` sets: `v1.SCOPE.EXPIRES.MAC`, SCOPE the hex of `*` or the app id, EXPIRES milliseconds since
/// 1970, MAC the hex HMAC-SHA256 of the rest under a key derived from the console's tokens and
/// the apps' secrets. No session is stored: every node with the same tokens and apps takes the
/// cookie (behind a proxy that spreads requests), a restart keeps it, and changing a token or a
/// secret ends every session.
public struct ConsoleSession: Sendable {
    /// The cookie's name.
    public static let cookieName = "bird_console"
    /// How long a session lasts, in milliseconds (12 hours).
    public static let lifetime: Int64 = 12 * 3600 * 1000

    private let key: String

    /// Creates the signer of `access`'s sessions: its key is the SHA-256 of its tokens (the
    /// server's and each app's, with their apps) and the apps' secrets, so it changes with any
    /// of them.
    public init(access: ConsoleAccess) {
        var material = "bird-console-session-v1\n\(access.serverToken ?? "")\n"
        for (app, token) in access.appTokens.sorted(by: { $0.key < $1.key }) { material += "\(app)\n\(token)\n" }
        // The apps' secrets too: an app's token alone must not give the key (it would sign a
        // session of every app).
        for (app, secret) in access.appSecrets.sorted(by: { $0.key < $1.key }) { material += "secret \(app)\n\(secret)\n" }
        key = Crypto.hex(Crypto.sha256(Array(material.utf8)))
    }

    /// The cookie value for a session of `scope` from `now` (milliseconds since 1970).
    public func cookie(for scope: ConsoleAccess.Scope, now: Int64) -> String {
        let body = "v1.\(Self.hex(scope)).\(now + Self.lifetime)"
        return "\(body).\(mac(body))"
    }

    /// The scope of a cookie value, or `nil` when it is not one of ours, was altered, or
    /// expired at `now`.
    public func scope(ofCookie value: String, now: Int64) -> ConsoleAccess.Scope? {
        verified(value, now: now)?.scope
    }

    /// When a valid cookie value expires (milliseconds since 1970), or `nil` as `scope(ofCookie:)`.
    public func expiry(ofCookie value: String, now: Int64) -> Int64? {
        verified(value, now: now)?.expires
    }

    private func verified(_ value: String, now: Int64) -> (scope: ConsoleAccess.Scope, expires: Int64)? {
        guard value.utf8.count <= 4096 else { return nil }
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "v1", let expires = Int64(parts[2]), expires > now,
              ConsoleAccess.equal(Array(parts[3].utf8), mac(parts[0...2].joined(separator: "."))),
              let scope = Self.scope(hex: String(parts[1])) else { return nil }
        return (scope, expires)
    }

    private func mac(_ body: String) -> String {
        Crypto.hex(Crypto.hmacSHA256(key: key, message: Array(body.utf8)))
    }

    private static func hex(_ scope: ConsoleAccess.Scope) -> String {
        switch scope {
        case .all: Crypto.hex(Array("*".utf8))
        case .app(let id): Crypto.hex(Array(("app:" + id).utf8))
        }
    }

    private static func scope(hex: String) -> ConsoleAccess.Scope? {
        guard hex.utf8.count % 2 == 0, hex.utf8.count <= 1024 else { return nil }
        var bytes: [UInt8] = []
        var index = hex.startIndex
        while index < hex.endIndex {
            let next = hex.index(index, offsetBy: 2)
            guard let byte = UInt8(hex[index..<next], radix: 16) else { return nil }
            bytes.append(byte)
            index = next
        }
        let text = String(decoding: bytes, as: UTF8.self)
        if text == "*" { return .all }
        guard text.hasPrefix("app:") else { return nil }
        return .app(String(text.dropFirst(4)))
    }
}
