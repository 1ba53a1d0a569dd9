/// How a stream connects, when it can connect more than one way: XMPPReconnect's
/// `usesOldSchoolSecureConnect` ("if you initially connect using
/// oldSchoolSecureConnectWithTimeout, set this to YES to reconnect the same way"), as part of
/// the stream protocol rather than an XMPP-only flag. A struct over a name: the set is open.
public struct ConnectMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The method's name (`standard`, `directTLS`).
    public let rawValue: String
    /// Creates a method.
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The stream's ordinary connect (for XMPP: plain TCP, then STARTTLS, RFC 6120 §5).
    public static let standard = ConnectMethod(rawValue: "standard")
    /// TLS from the first byte on its own port: XMPP's "old school" secure connect (XEP-0368).
    public static let directTLS = ConnectMethod(rawValue: "directTLS")

    /// The name.
    public var description: String { rawValue }
}

extension ReconnectableStream {
    /// A stream with one way to connect: `.standard`.
    public var lastConnectMethod: ConnectMethod { .standard }

    /// A stream with one way to connect ignores the method.
    public func startConnectAttempt(using method: ConnectMethod) { startConnectAttempt() }
}
