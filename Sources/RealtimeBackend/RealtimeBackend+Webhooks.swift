import Foundation

/// A webhook request the realtime server posted, verified and parsed (Pusher Channels webhooks:
/// `{"time_ms", "events"}`, signed with `X-Pusher-Key` and `X-Pusher-Signature`, plus this
/// server's room events).
public struct RealtimeWebhook: Codable, Hashable, Sendable {
    /// One event of the webhook.
    public struct Event: Codable, Hashable, Sendable {
        /// `channel_occupied`, `channel_vacated`, `member_added`, `member_removed`,
        /// `client_event`, `room_event`, `room_member_added`, `room_member_removed`.
        public var name: String
        /// The channel, for channel events.
        public var channel: String?
        /// The room, for room events.
        public var room: String?
        /// A client or room event's name.
        public var event: String?
        /// A client or room event's data, as JSON text (opened by the app: a sealed room's is sealed).
        public var data: String?
        /// A room event's id (as the room's `meta.id`).
        public var id: UInt64?
        /// A room event's time, milliseconds since 1970.
        public var at: Int64?
        /// The member, or a client or room event's sender (absent for the app's server).
        public var userID: String?
        /// A client event's sender socket id.
        public var socketID: String?

        enum CodingKeys: String, CodingKey {
            case name, channel, room, event, data, id, at
            case userID = "user_id"
            case socketID = "socket_id"
        }
    }

    /// When the server sent it, milliseconds since 1970.
    public var timeMs: Int64
    /// The events, in the order they happened.
    public var events: [Event]

    enum CodingKeys: String, CodingKey {
        case timeMs = "time_ms"
        case events
    }
}

/// Why a webhook request is refused (the app answers 401 and ignores it).
public enum RealtimeWebhookError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `X-Pusher-Key` is missing or not this app's key.
    case badKey
    /// `X-Pusher-Signature` is missing or is not the body's HMAC under the app secret.
    case badSignature
    /// Signed, but not `{"time_ms": integer, "events": [{"name": …}…]}`.
    case malformed

    /// The code the backend libraries share (Backends/conformance): `bad_key`, `bad_signature`, `malformed`.
    public var code: String {
        switch self {
        case .badKey: return "bad_key"
        case .badSignature: return "bad_signature"
        case .malformed: return "malformed"
        }
    }

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .badKey: return "the webhook's X-Pusher-Key is not this app's key"
        case .badSignature: return "the webhook's X-Pusher-Signature does not sign its body"
        case .malformed: return "the webhook's body is not {\"time_ms\", \"events\"}"
        }
    }
}

extension RealtimeBackend {
    /// Largest webhook body verified: the server's requests are far smaller; more is refused
    /// as `malformed` before any JSON is read.
    public static let maxWebhookBytes = 1 << 20

    /// Verifies a webhook request and parses it: the key first, then the signature over the
    /// exact body bytes (constant time), and only then the JSON.
    ///
    /// - Parameters:
    ///   - key: the `X-Pusher-Key` header.
    ///   - signature: the `X-Pusher-Signature` header (hex HMAC-SHA256 of the body under the app secret).
    ///   - body: the request's body, as received.
    /// - Returns: the webhook's time and events.
    /// - Throws: `RealtimeWebhookError`.
    public func verifyWebhook(key: String?, signature: String?, body: [UInt8]) throws(RealtimeWebhookError) -> RealtimeWebhook {
        guard key == appKey else { throw .badKey }
        let expected = Array(Crypto.hex(Crypto.hmacSHA256(key: secret, message: body)).utf8)
        guard let signature, Crypto.constantTimeEqual(Array(signature.lowercased().utf8), expected) else { throw .badSignature }
        guard body.count <= Self.maxWebhookBytes, let webhook = try? StrictJSON.decode(RealtimeWebhook.self, from: body) else { throw .malformed }
        return webhook
    }
}
