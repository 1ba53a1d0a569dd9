/// The stale-connection check as deadlines (realtime-connection-lifecycle seed,
/// "Stale-connection check"): after `timeout` of silence, ping; if nothing arrives within the
/// pong deadline, the connection is dead. A value type with no timers of its own: every
/// method returns what to schedule, in the manner of hummingbird's connection state handler.
///
/// A frame costs a clock read, not a new timer: the activity check is armed once and, when it
/// comes due, re-armed for the rest of the timeout if a frame arrived meanwhile.
struct ActivityMonitor: Hashable {
    /// What the owner does next.
    enum Action: Hashable {
        /// Arm the activity check at this instant (replacing any armed one).
        case scheduleActivityCheck(at: ContinuousClock.Instant)
        /// Send a ping.
        case sendPing
        /// Arm the pong deadline `sequence` at this instant.
        case schedulePongDeadline(sequence: UInt64, at: ContinuousClock.Instant)
        /// Disarm the pong deadline `sequence`.
        case cancelPongDeadline(sequence: UInt64)
    }

    /// A ping awaiting any frame.
    struct Probe: Hashable {
        var sequence: UInt64
        var deadline: ContinuousClock.Instant
        /// The probe came from a network path change (its failure backs off instead of
        /// retrying at once).
        var pathChange: Bool
    }

    /// Silence before a ping: the handshake's `activity_timeout`, or the default.
    let timeout: Duration
    private(set) var lastActivity: ContinuousClock.Instant
    private(set) var activityCheckArmed: Bool
    private(set) var probe: Probe?
    private var nextSequence: UInt64 = 0

    /// Starts watching at `now` (the handshake).
    ///
    /// - Returns: the monitor and the first activity check to arm.
    static func start(timeout: Duration, now: ContinuousClock.Instant) -> (ActivityMonitor, Action) {
        let monitor = ActivityMonitor(timeout: timeout, lastActivity: now, activityCheckArmed: true, probe: nil)
        return (monitor, .scheduleActivityCheck(at: now + timeout))
    }

    /// A frame arrived when there is nothing to do for it (no probe out, the check armed):
    /// the instant is noted and `true` returned; `false`, with nothing changed, when
    /// `frameReceived` has actions to give (the per-frame path builds no action array).
    mutating func frameReceivedQuietly(now: ContinuousClock.Instant) -> Bool {
        guard probe == nil, activityCheckArmed else { return false }
        lastActivity = now
        return true
    }

    /// A frame arrived: the connection is alive; a pending probe is answered.
    mutating func frameReceived(now: ContinuousClock.Instant) -> [Action] {
        lastActivity = now
        var actions: [Action] = []
        if let probe {
            self.probe = nil
            actions.append(.cancelPongDeadline(sequence: probe.sequence))
        }
        if !activityCheckArmed {
            activityCheckArmed = true
            actions.append(.scheduleActivityCheck(at: now + timeout))
        }
        return actions
    }

    /// The activity check came due: re-arm for the rest of the timeout after a recent frame,
    /// else ping (unless a probe is already out).
    mutating func activityCheckDue(now: ContinuousClock.Instant, pongTimeout: Duration) -> [Action] {
        activityCheckArmed = false
        if now < lastActivity + timeout {
            activityCheckArmed = true
            return [.scheduleActivityCheck(at: lastActivity + timeout)]
        }
        guard probe == nil else { return [] }
        return ping(deadline: pongTimeout, pathChange: false, now: now)
    }

    /// Pings now with `deadline` for an answer. A path change, or a deadline earlier than the
    /// pending probe's, replaces that probe; otherwise the earlier deadline is kept.
    mutating func ping(deadline: Duration, pathChange: Bool, now: ContinuousClock.Instant) -> [Action] {
        if let probe, !pathChange, probe.deadline <= now + deadline { return [.sendPing] }
        var actions: [Action] = [.sendPing]
        if let probe { actions.append(.cancelPongDeadline(sequence: probe.sequence)) }
        nextSequence += 1
        let due = now + deadline
        probe = Probe(sequence: nextSequence, deadline: due, pathChange: pathChange)
        actions.append(.schedulePongDeadline(sequence: nextSequence, at: due))
        return actions
    }

    /// The pong deadline `sequence` came due.
    ///
    /// - Returns: the probe that failed, or `nil` for a deadline already answered or replaced.
    mutating func pongDeadlinePassed(sequence: UInt64) -> Probe? {
        guard let probe, probe.sequence == sequence else { return nil }
        self.probe = nil
        return probe
    }
}
