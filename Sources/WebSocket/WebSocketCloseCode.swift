/// The status code of a WebSocket close frame (RFC 6455 §7.4).
///
/// An open set: applications use their own codes in 4000–4999 (the realtime protocol's
/// 4000–4399 ranges) and libraries theirs in 3000–3999, so this wraps the raw value and names
/// the registered codes as static members instead of being a closed enum.
public struct WebSocketCloseCode: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The code as sent on the wire (2 bytes, big-endian).
    public let rawValue: UInt16

    /// Wraps a raw close code.
    ///
    /// - Parameter rawValue: any value; `isSendable` says whether it may appear in a close frame.
    public init(rawValue: UInt16) { self.rawValue = rawValue }

    /// Wraps a raw close code.
    ///
    /// - Parameter code: any value; `isSendable` says whether it may appear in a close frame.
    public init(_ code: UInt16) { self.rawValue = code }

    /// 1000: the purpose of the connection was fulfilled (RFC 6455 §7.4.1).
    public static let normalClosure = WebSocketCloseCode(1000)
    /// 1001: the endpoint is going away, e.g. a server shutting down (RFC 6455 §7.4.1).
    public static let goingAway = WebSocketCloseCode(1001)
    /// 1002: the peer broke the protocol (RFC 6455 §7.4.1).
    public static let protocolError = WebSocketCloseCode(1002)
    /// 1003: a data type the endpoint cannot accept (RFC 6455 §7.4.1).
    public static let unsupportedData = WebSocketCloseCode(1003)
    /// 1005: the close frame carried no code. Reported locally, never sent (RFC 6455 §7.4.1).
    public static let noStatusReceived = WebSocketCloseCode(1005)
    /// 1006: the connection ended without a close frame. Reported locally, never sent
    /// (RFC 6455 §7.1.5, §7.4.1).
    public static let abnormalClosure = WebSocketCloseCode(1006)
    /// 1007: a text message was not valid UTF-8 (RFC 6455 §7.4.1, §8.1).
    public static let invalidFramePayloadData = WebSocketCloseCode(1007)
    /// 1008: a message violated the endpoint's policy (RFC 6455 §7.4.1).
    public static let policyViolation = WebSocketCloseCode(1008)
    /// 1009: a message was too big to process (RFC 6455 §7.4.1).
    public static let messageTooBig = WebSocketCloseCode(1009)
    /// 1010: the client needed an extension the server did not negotiate (RFC 6455 §7.4.1).
    public static let mandatoryExtension = WebSocketCloseCode(1010)
    /// 1011: the server met an unexpected condition (RFC 6455 §7.4.1, IANA registry).
    public static let internalServerError = WebSocketCloseCode(1011)
    /// 1012: the service is restarting (IANA WebSocket close code registry).
    public static let serviceRestart = WebSocketCloseCode(1012)
    /// 1013: try again later, e.g. the server is overloaded (IANA WebSocket close code registry).
    public static let tryAgainLater = WebSocketCloseCode(1013)
    /// 1015: the TLS handshake failed. Reported locally, never sent (RFC 6455 §7.4.1).
    public static let tlsHandshake = WebSocketCloseCode(1015)

    /// Whether the code may be sent in a close frame: 1000–1003, 1007–1014 and 3000–4999
    /// (RFC 6455 §7.4.1–§7.4.2 and the IANA registry). 1004–1006, 1015, and codes below 1000
    /// or above 4999 are not.
    ///
    /// A libwebsockets 4.1 peer reports a received code below 1000, 1004–1006, 1012–1015 or
    /// 1016–2999 as 1002 `protocolError` (its ws parser rewrites them before the application
    /// sees them), so 1012–1014 reach only other peers intact.
    public var isSendable: Bool {
        switch rawValue {
        case 1000...1003, 1007...1014, 3000...4999: return true
        default: return false
        }
    }

    /// The number, with the registered name when there is one, e.g. `1009 messageTooBig`.
    public var description: String {
        guard let name = Self.names[rawValue] else { return "\(rawValue)" }
        return "\(rawValue) \(name)"
    }

    private static let names: [UInt16: String] = [
        1000: "normalClosure", 1001: "goingAway", 1002: "protocolError", 1003: "unsupportedData",
        1005: "noStatusReceived", 1006: "abnormalClosure", 1007: "invalidFramePayloadData",
        1008: "policyViolation", 1009: "messageTooBig", 1010: "mandatoryExtension",
        1011: "internalServerError", 1012: "serviceRestart", 1013: "tryAgainLater", 1015: "tlsHandshake",
    ]
}
