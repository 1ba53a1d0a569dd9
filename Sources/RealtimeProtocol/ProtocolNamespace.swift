/// The prefix of protocol events: `bird:` by default, `pusher:` for Pusher tooling (Pusher
/// Channels protocol 7). Internal events add `_internal` (`bird_internal:subscription_succeeded`).
public struct ProtocolNamespace: RawRepresentable, Hashable, Sendable, Codable, CustomStringConvertible {
    /// The prefix without the colon.
    public let rawValue: String

    /// Creates a namespace from its prefix without the colon.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// `bird`, this project's namespace.
    public static let bird = ProtocolNamespace(rawValue: "bird")
    /// `pusher`, for Pusher's clients and server libraries.
    public static let pusher = ProtocolNamespace(rawValue: "pusher")
    /// The namespaces the server accepts.
    public static let known: [ProtocolNamespace] = [.bird, .pusher]

    /// `"<namespace>:<name>"`.
    public func event(_ name: ProtocolEventName) -> String { "\(rawValue):\(name.rawValue)" }
    /// `"<namespace>_internal:<name>"`.
    public func internalEvent(_ name: ProtocolEventName) -> String { "\(rawValue)_internal:\(name.rawValue)" }

    /// Splits a protocol event name into namespace and name; `nil` for an app event (no known
    /// namespace prefix).
    ///
    /// - Parameter event: the `event` field of a message.
    /// - Returns: the namespace, the bare name, and whether it was an `_internal` event.
    public static func split(_ event: String) -> (namespace: ProtocolNamespace, name: String, isInternal: Bool)? {
        guard let colon = event.firstIndex(of: ":") else { return nil }
        var prefix = String(event[..<colon])
        let name = String(event[event.index(after: colon)...])
        var isInternal = false
        if prefix.hasSuffix("_internal") {
            prefix.removeLast("_internal".count)
            isInternal = true
        }
        let namespace = ProtocolNamespace(rawValue: prefix)
        guard known.contains(namespace) else { return nil }
        return (namespace, name, isInternal)
    }

    /// The prefix text.
    public var description: String { rawValue }
}

/// The protocol's event names, without namespace.
public struct ProtocolEventName: RawRepresentable, Hashable, Sendable {
    /// The bare name (`subscribe`).
    public let rawValue: String
    /// Creates a name.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// Server → client handshake: `{socket_id, activity_timeout}`.
    public static let connectionEstablished = ProtocolEventName(rawValue: "connection_established")
    /// Either way: are you there?
    public static let ping = ProtocolEventName(rawValue: "ping")
    /// Either way: the answer to `ping`.
    public static let pong = ProtocolEventName(rawValue: "pong")
    /// Client → server: `{channel, auth?, channel_data?}`.
    public static let subscribe = ProtocolEventName(rawValue: "subscribe")
    /// Client → server: `{channel}`.
    public static let unsubscribe = ProtocolEventName(rawValue: "unsubscribe")
    /// Server → client (internal): the subscription is in place; presence data for presence channels.
    public static let subscriptionSucceeded = ProtocolEventName(rawValue: "subscription_succeeded")
    /// Server → client: the subscription was refused: `{message, code?}`.
    public static let subscriptionError = ProtocolEventName(rawValue: "subscription_error")
    /// Server → client (internal): `{user_id, user_info?}` joined a presence channel.
    public static let memberAdded = ProtocolEventName(rawValue: "member_added")
    /// Server → client (internal): `{user_id}` left a presence channel.
    public static let memberRemoved = ProtocolEventName(rawValue: "member_removed")
    /// Client → server: `{auth, user_data}`.
    public static let signin = ProtocolEventName(rawValue: "signin")
    /// Server → client: signin accepted: `{user_data}`.
    public static let signinSuccess = ProtocolEventName(rawValue: "signin_success")
    /// Server → client: a connection-level error: `{message, code?}`.
    public static let error = ProtocolEventName(rawValue: "error")

    /// Client → server: `{room, token, since?}` (docs/rooms-protocol.md).
    public static let roomJoin = ProtocolEventName(rawValue: "room_join")
    /// Client → server: `{room}`.
    public static let roomLeave = ProtocolEventName(rawValue: "room_leave")
    /// Client → server: `{room, token}`, a fresh token for a joined room.
    public static let roomRefresh = ProtocolEventName(rawValue: "room_refresh")
    /// Client → server: `{room, event, data}`, an event into a room that lets members send.
    public static let roomSend = ProtocolEventName(rawValue: "room_send")
    /// Either way: a history request `{room, request, limit?, before?}`, and its page.
    public static let roomHistory = ProtocolEventName(rawValue: "room_history")
    /// Server → client: a room event (kept, with `meta`, or one of the room's own).
    public static let roomEvent = ProtocolEventName(rawValue: "room_event")
}
