import Reachability

/// What a `Reconnector` did, as observed through `Reconnector.events()` (and logged by the
/// samples).
public enum ReconnectEvent: Sendable, Hashable {
    /// Why an attempt started now.
    public enum Trigger: String, Sendable, Hashable {
        /// The retry timer (initial delay, periodic interval or backoff) fired.
        case timer
        /// The host became reachable, or its path changed.
        case reachability
        /// No delay was configured.
        case immediate
    }

    /// An accidental disconnect started a reconnect process (once per disconnect).
    case accidentalDisconnect(flags: ReachabilityFlags)
    /// The next attempt is scheduled after `delay` (attempt numbers start at 1).
    case scheduled(attempt: Int, delay: Duration)
    /// Waiting for the host to become reachable: no timer is set (interval 0).
    case waitingForReachability(attempt: Int)
    /// Delegates are asked, then the stream is told to connect.
    case attemptStarted(attempt: Int, trigger: Trigger)
    /// A delegate said no to this attempt.
    case vetoed(attempt: Int)
    /// The attempt did not finish within `attemptTimeout` and was aborted.
    case attemptTimedOut(attempt: Int)
    /// The stream is ready again after `attempts` attempts.
    case succeeded(attempts: Int)
    /// `stop()` ended the process.
    case stopped
    /// The peer refused the stream; no retry.
    case refused(reason: String)
    /// The path to the host changed while connected: the stream was asked to verify itself.
    case verifyingConnection(flags: ReachabilityFlags)
}
