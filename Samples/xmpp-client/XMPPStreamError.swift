import LineStream
import Reconnect

/// Why an `XMPPClientStream` could not be created, failed to negotiate, or disconnected
/// without being told to.
public enum XMPPStreamError: Error, Hashable, Sendable, CustomStringConvertible {
    /// How far the stream got when it failed.
    public enum Stage: String, Sendable, Hashable {
        /// Resolving and connecting TCP.
        case connecting = "connecting"
        /// Waiting for the server's stream header or features (RFC 6120 section 4).
        case negotiating = "stream negotiation"
        /// STARTTLS (RFC 6120 section 5) or the TLS handshake (direct TLS, XEP-0368).
        case securing = "TLS negotiation"
        /// SASL (RFC 6120 section 6).
        case authenticating = "authentication"
        /// Resource binding (RFC 6120 section 7).
        case binding = "resource binding"
        /// Ready: bound, initial presence sent.
        case ready = "session"
    }

    /// The JID is not `localpart@domainpart` (RFC 7622 section 3), or the resource is empty.
    case invalidJID(String)
    /// The socket layer failed or the peer closed the TCP connection, during `stage`
    /// (a stream cut short ends here too).
    case connection(TCPConnectionError, stage: Stage)
    /// `abortConnectAttempt()` gave up the negotiation in progress.
    case aborted
    /// The stream was not ready within `connectTimeout`, at `stage` (a server that accepts
    /// TCP and then says nothing, or answers a byte at a time).
    case connectTimedOut(timeout: Duration, stage: Stage)
    /// `verifyConnection()`'s XMPP ping (XEP-0199) got no answer within `timeout`.
    case noPong(timeout: Duration)
    /// The server sent bytes that are not a well-formed XMPP stream (RFC 6120 section 11).
    case malformedXML(String)
    /// The server ended the stream with a stream error (RFC 6120 section 4.9): the defined
    /// condition (`conflict`, `system-shutdown`, …) and its text, if any.
    case streamError(condition: String, text: String?)
    /// The server closed the stream (`</stream:stream>`) with no stream error.
    case streamClosedByPeer
    /// SASL failed (RFC 6120 section 6.5): the condition (`not-authorized`, …) and text.
    case authenticationFailed(condition: String, text: String?)
    /// The server does not offer SASL PLAIN (RFC 4616), the only mechanism implemented.
    case noSupportedMechanism(offered: [String])
    /// Resource binding failed (RFC 6120 section 7.6.2): the stanza error condition.
    case bindFailed(condition: String)
    /// The server broke the negotiation order (an element at a step where it makes no sense).
    case unexpected(String)
    /// TLS failed: the certificate was rejected (reported as `refused`), the handshake or a
    /// record failed, or the server closed TLS (`close_notify`).
    case tls(TLSError)
    /// The stream has a `TLSContext` but the server does not offer STARTTLS (RFC 6120 section
    /// 5.3.1): never continued in clear text, reported as `refused`.
    case startTLSNotOffered
    /// The server answered STARTTLS with `<failure/>` (RFC 6120 section 5.4.2.2).
    case startTLSFailed
    /// The connect method is not one this stream has (`.directTLS` without a `TLSContext`, a
    /// method it does not know): reported as `refused`.
    case unsupportedConnectMethod(ConnectMethod)

    /// The `errno` behind the failure, when there is one.
    public var errno: Int32? {
        if case .connection(let error, _) = self { return error.errno }
        return nil
    }

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .invalidJID(let jid): return "invalid JID \"\(jid)\""
        case .connection(let error, let stage): return "\(error) during \(stage.rawValue)"
        case .aborted: return "connect attempt aborted"
        case .connectTimedOut(let timeout, let stage): return "not ready within \(timeout.milliseconds) ms (stuck at \(stage.rawValue))"
        case .noPong(let timeout): return "no answer to XMPP ping within \(timeout.milliseconds) ms"
        case .malformedXML(let message): return "malformed XML from the server: \(message)"
        case .streamError(let condition, let text): return "stream error \(condition)" + (text.map { ": \($0)" } ?? "")
        case .streamClosedByPeer: return "the server closed the stream"
        case .authenticationFailed(let condition, let text): return "authentication failed: \(condition)" + (text.map { ": \($0)" } ?? "")
        case .noSupportedMechanism(let offered): return "SASL PLAIN not offered (offered: \(offered.joined(separator: ", ")))"
        case .bindFailed(let condition): return "resource binding failed: \(condition)"
        case .unexpected(let what): return "unexpected \(what)"
        case .tls(let error): return "\(error)"
        case .startTLSNotOffered: return "the server does not offer STARTTLS, and TLS is required"
        case .startTLSFailed: return "the server refused STARTTLS"
        case .unsupportedConnectMethod(let method): return "connect method \(method) not available (direct TLS needs a TLSContext)"
        }
    }
}
