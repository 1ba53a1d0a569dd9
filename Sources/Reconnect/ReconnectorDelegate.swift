import Reachability

/// XMPPReconnect's delegate, in Swift. Several can be attached to one `Reconnector`, each with
/// its own queue; they are held weakly.
public protocol ReconnectorDelegate: AnyObject, Sendable {
    /// An accidental disconnect was detected: called once per disconnect, not once per failed
    /// retry (XMPPReconnect called it again for every failed attempt).
    ///
    /// - Parameters:
    ///   - reconnector: the reconnector.
    ///   - flags: the reachability flags of the stream's host now.
    func reconnector(_ reconnector: Reconnector, didDetectAccidentalDisconnect flags: ReachabilityFlags)

    /// Asked before every attempt; any `false` vetoes it. An answer that takes longer than
    /// `delegateTimeout` counts as no veto, so one stuck delegate cannot block reconnection.
    ///
    /// - Parameters:
    ///   - reconnector: the reconnector.
    ///   - flags: the reachability flags of the stream's host now.
    /// - Returns: whether to attempt now.
    func reconnector(_ reconnector: Reconnector, shouldAttemptAutoReconnect flags: ReachabilityFlags) -> Bool
}

extension ReconnectorDelegate {
    /// Does nothing.
    public func reconnector(_ reconnector: Reconnector, didDetectAccidentalDisconnect flags: ReachabilityFlags) {}
    /// Allows every attempt.
    public func reconnector(_ reconnector: Reconnector, shouldAttemptAutoReconnect flags: ReachabilityFlags) -> Bool { true }
}

/// A delegate made of closures (see `Reconnector.addDelegate(queue:didDetectAccidentalDisconnect:shouldAttemptAutoReconnect:)`).
final class ClosureReconnectorDelegate: ReconnectorDelegate {
    let accidental: (@Sendable (ReachabilityFlags) -> Void)?
    let shouldAttempt: (@Sendable (ReachabilityFlags) -> Bool)?

    init(accidental: (@Sendable (ReachabilityFlags) -> Void)?, shouldAttempt: (@Sendable (ReachabilityFlags) -> Bool)?) {
        self.accidental = accidental
        self.shouldAttempt = shouldAttempt
    }

    func reconnector(_ reconnector: Reconnector, didDetectAccidentalDisconnect flags: ReachabilityFlags) {
        accidental?(flags)
    }

    func reconnector(_ reconnector: Reconnector, shouldAttemptAutoReconnect flags: ReachabilityFlags) -> Bool {
        shouldAttempt?(flags) ?? true
    }
}
