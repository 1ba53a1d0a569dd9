/// What a stream tells its `Reconnector`, in the order XMPPStream tells XMPPReconnect
/// (`xmppStreamWillConnect`, `xmppStreamDidConnect`, `xmppStreamDidAuthenticate`,
/// `xmppStreamWasToldToDisconnect`, `xmppStreamDidDisconnect:withError:`).
public enum StreamEvent: Sendable {
    /// A connection attempt starts (by the app or the reconnector).
    case willConnect
    /// The transport is open (TCP connected, WebSocket upgraded), not yet usable.
    case opened
    /// The stream is usable: authenticated or handshaken. Only a stream that was ready once is
    /// reconnected automatically.
    case ready
    /// The app asked the stream to disconnect: the disconnect that follows is intentional.
    case toldToDisconnect
    /// The stream is disconnected. Accidental unless `toldToDisconnect` came first; `error`
    /// says why (nil for a clean close); `retry` lets the peer's close reason pick the timing
    /// (a realtime server's 4200–4299 close codes ask for an immediate retry).
    case disconnected(error: (any Error)?, retry: RetryTiming = .policy)
    /// The peer refused the stream for good (bad credentials, a conflict, a refusal close
    /// code): never retried, including the disconnect that follows.
    case refused(reason: String)
}

/// When to retry after an accidental disconnect.
public enum RetryTiming: Sendable, Hashable {
    /// As the reconnector's policy says (delay, timer or backoff).
    case policy
    /// At once, skipping the delay (delegates are still asked).
    case immediately
}

/// A connection the `Reconnector` can keep alive: a TCP line client, an XMPP stream, a
/// WebSocket client. The stream reports its events through `reconnectEvents`.
///
/// Contract: `startConnectAttempt()` (or `startConnectAttempt(using:)`) eventually reports
/// `.ready` or `.disconnected`;
/// `abortConnectAttempt()` ends an attempt in progress and reports `.disconnected`;
/// `verifyConnection()` probes a connected stream (a ping with a short deadline) and reports
/// `.disconnected` if it is dead. All three may be called from any thread.
public protocol ReconnectableStream: AnyObject, Sendable {
    /// The host the stream connects to, watched for reachability (name or literal address).
    var destinationHost: String { get }
    /// Where the stream sends its events.
    var reconnectEvents: StreamEventRelay { get }
    /// Starts connecting, as the app's own connect call would.
    func startConnectAttempt()
    /// How the app last connected the stream (`.standard` by default). The reconnector
    /// reconnects the same way (XMPPReconnect's `usesOldSchoolSecureConnect`).
    var lastConnectMethod: ConnectMethod { get }
    /// Starts connecting with `method`; a stream with one way to connect calls
    /// `startConnectAttempt()` (the default).
    func startConnectAttempt(using method: ConnectMethod)
    /// Gives up the attempt in progress (a hung connect) and reports `.disconnected`.
    func abortConnectAttempt()
    /// Checks that a connected stream is still alive (after a network path change).
    func verifyConnection()
}
