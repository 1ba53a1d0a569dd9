/// What a room keeps and allows, as the app backend declared it for the room's pattern (rooms
/// seed: `room('order:{id}', { history: 20 }, …)`). It travels inside every room token (the
/// `rule` claim, docs/rooms-protocol.md "Where the rules travel"), so the realtime server and
/// every node of a cluster learn it from the app's signature, with no copy of the rules.
///
/// Wire form: `{"history": 20, "span": 1800, "presence": true, "max": 50, "members_send": true,
/// "webhook": true, "sealed": false, "public": false}`; absent keys take the defaults.
public struct RoomRule: Codable, Hashable, Sendable {
    /// Most events a room may keep: 100,000 (a replay of them is streamed in pages;
    /// the store's byte budget bounds them too).
    public static let maxHistory = 100_000
    /// Longest a room keeps an event, in seconds: 30 minutes (rooms seed, "History").
    public static let maxSpan = 1800

    /// Events kept for replay and paging, 0…`maxHistory`; 0 keeps none (`no_history`).
    public var history: Int
    /// Seconds an event is kept, 1…`maxSpan`.
    public var span: Int
    /// Whether members are announced (`join`/`leave` per user, the members list in `joined`).
    public var presence: Bool
    /// Most distinct users in the room at once (`full` for one more; a present user is
    /// always admitted), or `nil` for no limit.
    public var maxMembers: Int?
    /// Whether members may send events into the room; otherwise only the app's server may.
    public var membersSend: Bool
    /// Whether the room's events are posted to the app's webhook (`room_event`).
    public var webhook: Bool
    /// Whether payloads are sealed end to end (the key comes with the token; the server relays
    /// and keeps `{"nonce", "ciphertext"}` without opening it).
    public var sealed: Bool
    /// Whether anyone may join, signed in or not, with the grant from the backend's `config()`.
    public var isPublic: Bool

    /// Creates a rule.
    ///
    /// - Parameters:
    ///   - history: events kept, 0…100,000 (0: none).
    ///   - span: seconds kept, 1…1,800 (30 minutes, the default).
    ///   - presence: a presence room.
    ///   - maxMembers: capacity in distinct users, or `nil`.
    ///   - membersSend: members may send events.
    ///   - webhook: events go to the app's webhook.
    ///   - sealed: end-to-end sealed payloads.
    ///   - isPublic: joinable by anyone with the public grant.
    public init(history: Int = 0, span: Int = RoomRule.maxSpan, presence: Bool = false, maxMembers: Int? = nil,
                membersSend: Bool = false, webhook: Bool = false, sealed: Bool = false, isPublic: Bool = false) {
        self.history = history
        self.span = span
        self.presence = presence
        self.maxMembers = maxMembers
        self.membersSend = membersSend
        self.webhook = webhook
        self.sealed = sealed
        self.isPublic = isPublic
    }

    /// Whether every value is in its range (history 0…100,000, span 1…1,800, capacity ≥ 1).
    public var isValid: Bool {
        (0...Self.maxHistory).contains(history) && (1...Self.maxSpan).contains(span) && (maxMembers ?? 1) >= 1
    }

    enum CodingKeys: String, CodingKey {
        case history, span, presence, webhook, sealed
        case maxMembers = "max"
        case membersSend = "members_send"
        case isPublic = "public"
    }

    /// Decodes a rule; absent keys take their defaults.
    ///
    /// - Throws: `DecodingError` for a value of the wrong type.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        history = try container.decodeIfPresent(Int.self, forKey: .history) ?? 0
        span = try container.decodeIfPresent(Int.self, forKey: .span) ?? Self.maxSpan
        presence = try container.decodeIfPresent(Bool.self, forKey: .presence) ?? false
        maxMembers = try container.decodeIfPresent(Int.self, forKey: .maxMembers)
        membersSend = try container.decodeIfPresent(Bool.self, forKey: .membersSend) ?? false
        webhook = try container.decodeIfPresent(Bool.self, forKey: .webhook) ?? false
        sealed = try container.decodeIfPresent(Bool.self, forKey: .sealed) ?? false
        isPublic = try container.decodeIfPresent(Bool.self, forKey: .isPublic) ?? false
    }
}

/// The claims of a room token (a JWT signed HS256 with the app secret; docs/rooms-protocol.md
/// "Tokens"): who may join which room until when, under which rule. Not bound to a connection,
/// so a reconnect reuses it (DESIGN.md, "Tokens not bound to a connection").
public struct RoomClaims: Codable, Hashable, Sendable {
    /// The user the backend vouches for (`sub`, RFC 7519 §4.1.2); `nil` in a public grant.
    public var subject: String?
    /// The room name, or a pattern (`news:{id}`) in a public grant.
    public var room: String
    /// Expiry, in seconds since 1970 (`exp`, RFC 7519 §4.1.4).
    public var expiresAt: Int
    /// Issue time, in seconds since 1970 (`iat`).
    public var issuedAt: Int?
    /// The user's presence info, shown to other members of a presence room.
    public var info: JSONValue?
    /// The room's rule; `nil` means the default rule (`RoomRule()`).
    public var rule: RoomRule?

    /// Creates claims.
    ///
    /// - Parameters:
    ///   - subject: the user id, or `nil` for a public grant.
    ///   - room: the room name or (grants) pattern.
    ///   - expiresAt: seconds since 1970.
    ///   - issuedAt: seconds since 1970.
    ///   - info: presence info.
    ///   - rule: the room's rule.
    public init(subject: String?, room: String, expiresAt: Int, issuedAt: Int? = nil, info: JSONValue? = nil, rule: RoomRule? = nil) {
        self.subject = subject
        self.room = room
        self.expiresAt = expiresAt
        self.issuedAt = issuedAt
        self.info = info
        self.rule = rule
    }

    enum CodingKeys: String, CodingKey {
        case subject = "sub"
        case room, info, rule
        case expiresAt = "exp"
        case issuedAt = "iat"
    }

    /// Decodes claims; a numeric `sub` is taken as its decimal text (PyJWT passes ints through).
    ///
    /// - Throws: `DecodingError` when `room` or `exp` is missing or mistyped.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        if let text = try? container.decodeIfPresent(String.self, forKey: .subject) {
            subject = text
        } else {
            subject = try container.decodeIfPresent(Int.self, forKey: .subject).map(String.init)
        }
        room = try container.decode(String.self, forKey: .room)
        if let whole = try? container.decode(Int.self, forKey: .expiresAt) {
            expiresAt = whole
        } else {
            let seconds = try container.decode(Double.self, forKey: .expiresAt)
            guard seconds.isFinite, abs(seconds) < 1e15 else {
                throw DecodingError.dataCorruptedError(forKey: .expiresAt, in: container, debugDescription: "exp out of range")
            }
            expiresAt = Int(seconds)
        }
        // `iat` as PyJWT or jsonwebtoken write it: whole or fractional seconds; anything else
        // counts as absent (an undated token never changes a room's rule).
        if let whole = try? container.decodeIfPresent(Int.self, forKey: .issuedAt) {
            issuedAt = whole
        } else if let seconds = try? container.decodeIfPresent(Double.self, forKey: .issuedAt), seconds.isFinite, abs(seconds) < 1e15 {
            issuedAt = Int(seconds)
        } else {
            issuedAt = nil
        }
        info = try container.decodeIfPresent(JSONValue.self, forKey: .info)
        rule = try container.decodeIfPresent(RoomRule.self, forKey: .rule)
    }
}
