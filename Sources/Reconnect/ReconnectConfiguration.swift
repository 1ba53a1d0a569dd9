/// How a `Reconnector` retries. Defaults are XMPPReconnect's (`DEFAULT_XMPP_RECONNECT_DELAY`,
/// `DEFAULT_XMPP_RECONNECT_TIMER_INTERVAL` in the seed header).
public struct ReconnectConfiguration: Sendable, Hashable {
    /// When retries happen.
    public enum Policy: Sendable, Hashable {
        /// XMPPReconnect's: the first attempt after `reconnectDelay`, then one every
        /// `reconnectTimerInterval` (0 means no periodic attempts: only reachability changes
        /// trigger them).
        case xmpp
        /// Every delay, the first included, from full-jitter exponential backoff (the realtime
        /// seed's rule); `reconnectDelay` and `reconnectTimerInterval` are not used. The retry
        /// count resets when a healthy connection drops (`stableConnectionDuration`).
        case backoff(ExponentialBackoff)
    }

    /// Whether an accidental disconnect of a stream that was ready starts reconnecting
    /// (default on). A change affects only later disconnects, never the current process.
    public var autoReconnect = true
    /// Wait before the first attempt after an accidental disconnect or `manualStart()` under
    /// the `.xmpp` policy (default 2 s; 0 attempts at once).
    public var reconnectDelay: Duration = .seconds(2)
    /// Period of the retry timer under the `.xmpp` policy (default 20 s; 0 disables the timer).
    public var reconnectTimerInterval: Duration = .seconds(20)
    /// The retry schedule (XMPPReconnect's by default).
    public var policy: Policy = .xmpp
    /// An attempt that is neither ready nor failed after this long is aborted and counts as
    /// failed (default 30 s; `nil` waits forever, as XMPPReconnect did).
    public var attemptTimeout: Duration? = .seconds(30)
    /// The shortest time between the starts of two attempts (default 100 ms), across
    /// processes too: a stream that fails at once, with zero delays or repeated
    /// immediate-retry requests, and a peer that ends every connection right after its
    /// handshake, are retried at this pace rather than in a tight loop.
    public var minimumAttemptInterval: Duration = .milliseconds(100)
    /// How long a stream must stay ready to count as healthy when it drops (default 5 s).
    /// A healthy connection resets the backoff's retry count and has a peer's immediate-retry
    /// request honoured; so does a shorter one while `shortConnectionAllowance` lasts. Past it,
    /// one that a peer ends sooner is retried on the policy's schedule, still growing, so a
    /// refusal loop backs off (a server closing with 4200 after each handshake got
    /// hundreds of connections a second).
    public var stableConnectionDuration: Duration = .seconds(5)
    /// How many connections that completed their handshake but dropped within
    /// `stableConnectionDuration` still count as healthy (default 5): each takes one, and one
    /// comes back per `stableConnectionDuration` (a token bucket). The realtime seed resets the
    /// backoff on every successful handshake and retries 4200–4299 at once; the allowance keeps
    /// that for a path that flaps a few times (back within the base delay after the fifth
    /// drop 0.5 s apart) while a peer that ends every connection at once is soon held to the
    /// growing backoff. 0: only connections up `stableConnectionDuration` count.
    public var shortConnectionAllowance = 5
    /// How long `shouldAttemptAutoReconnect` delegates may take; a delegate that has not
    /// answered by then does not veto (default 5 s).
    public var delegateTimeout: Duration = .seconds(5)

    /// Creates the default configuration.
    public init() {}
}
