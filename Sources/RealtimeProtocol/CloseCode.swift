/// A WebSocket close code as the realtime protocol uses it (RFC 6455 §7.4 plus Pusher's
/// 4000–4399 ranges). A struct over the number: the set is open.
public struct RealtimeCloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The close code (RFC 6455 §7.4).
    public let rawValue: UInt16
    /// Creates a code.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// 1000: normal closure (RFC 6455 §7.4.1; `WebSocketCloseCode.normalClosure`).
    public static let normalClosure = RealtimeCloseCode(rawValue: 1000)
    /// 1001: going away (server shutting down without a protocol code).
    public static let goingAway = RealtimeCloseCode(rawValue: 1001)
    /// 1002: protocol error (RFC 6455 §7.4.1): sent by a client for a handshake without a socket id.
    public static let protocolError = RealtimeCloseCode(rawValue: 1002)
    /// 1006: dropped without a close frame (never sent, only reported; RFC 6455 §7.1.5).
    public static let abnormalClosure = RealtimeCloseCode(rawValue: 1006)
    /// 1009: message too big (RFC 6455 §7.4.1).
    public static let messageTooBig = RealtimeCloseCode(rawValue: 1009)
    /// 1000, the former name of `normalClosure`.
    @available(*, deprecated, renamed: "normalClosure")
    public static let normal = normalClosure
    /// 1006, the former name of `abnormalClosure`.
    @available(*, deprecated, renamed: "abnormalClosure")
    public static let abnormal = abnormalClosure
    /// 4001: application does not exist (unknown app key).
    public static let unknownApp = RealtimeCloseCode(rawValue: 4001)
    /// 4009: connection unauthorised, or the member was terminated.
    public static let unauthorized = RealtimeCloseCode(rawValue: 4009)
    /// 4100: over capacity: back off.
    public static let overCapacity = RealtimeCloseCode(rawValue: 4100)
    /// 4200: generic reconnect-now (server restarting).
    public static let reconnectNow = RealtimeCloseCode(rawValue: 4200)
    /// 4201: pong reply not received.
    public static let pongNotReceived = RealtimeCloseCode(rawValue: 4201)
    /// 4202: closed after inactivity.
    public static let inactivity = RealtimeCloseCode(rawValue: 4202)
    /// 4300: any other error (Pusher's 4300–4399 range): this server's close after too many
    /// protocol errors on one connection.
    public static let genericError = RealtimeCloseCode(rawValue: 4300)
    /// 4301: client event rejected (rate limit).
    public static let clientEventRejected = RealtimeCloseCode(rawValue: 4301)

    /// What a client does after this close (realtime-connection-lifecycle seed, "Automatic
    /// reconnection"): 4000–4099 never retry, 4200–4299 retry at once, anything else backs off.
    public enum Reaction: Sendable, Hashable {
        /// Refused: state `failed`, no retry.
        case fail
        /// Retry immediately.
        case reconnectNow
        /// State `unavailable`, then retry with backoff.
        case backOff
    }

    /// The client's reaction to this code.
    public var reaction: Reaction {
        switch rawValue {
        case 4000...4099: return .fail
        case 4200...4299: return .reconnectNow
        default: return .backOff
        }
    }

    /// The number.
    public var description: String { String(rawValue) }
}
