import Reachability

/// The reconnect rules of XMPPReconnect (seed `XMPPReconnect.h.txt`) as a value type: each
/// event is a `mutating func` returning the actions its owner performs (timers, delegate
/// votes, connect/abort/verify calls, events). No I/O, no clock: instants come in with events,
/// deadlines go out with actions.
///
/// Fixed defects of the original (DESIGN.md): an interval of 0 disables the periodic timer;
/// an attempt has a timeout; `stop()` during a vote prevents the attempt; the accidental
/// disconnect is reported once per disconnect, not per failed retry; a path change while
/// connected asks the stream to verify itself; a reachable host ends the wait at once.
package struct ReconnectStateMachine {
    /// The instants events come with and deadlines go out with.
    package typealias Instant = ContinuousClock.Instant

    /// What the owner must do.
    package enum Action: Hashable, Sendable {
        /// Tell delegates `didDetectAccidentalDisconnect`.
        case notifyAccidentalDisconnect(ReachabilityFlags)
        /// Replace the single timer with one firing `timerFired(id)` at `deadline`.
        case scheduleTimer(id: UInt64, deadline: Instant)
        /// Cancel the timer.
        case cancelTimer
        /// Ask delegates `shouldAttemptAutoReconnect`; answer with `voteFinished(id:approved:)`,
        /// treating delegates silent at `deadline` as approving.
        case askDelegates(vote: UInt64, flags: ReachabilityFlags, deadline: Instant)
        /// Call `startConnectAttempt(using: stream.lastConnectMethod)` on the stream.
        case connect
        /// Call `abortConnectAttempt()` on the stream.
        case abortAttempt
        /// Call `verifyConnection()` on the stream.
        case verifyConnection
        /// Publish an event.
        case emit(ReconnectEvent)
    }

    private enum Phase { case disconnected, connecting, opened, ready }

    /// A running reconnect process: its step, and what only it counts.
    private struct Process {
        var step: Step
        /// Attempts started by this process.
        var attempts = 0
        /// Retry at once after the current attempt fails, for this reason (the path changed
        /// while it hung, or the peer asked for an immediate retry).
        var retryAtOnce: ReconnectEvent.Trigger?
    }

    /// What a disconnect reported next means, when it is not accidental.
    private enum ExpectedDisconnect {
        /// The app told the stream to disconnect (`toldToDisconnect`).
        case intentional
        /// `stop()` aborted an attempt: its disconnect is expected.
        case stopped
    }

    private enum Step: Hashable {
        /// Waiting for the retry timer (`nil`: for reachability only).
        case waiting(timer: UInt64?)
        /// Delegates are being asked.
        case voting(vote: UInt64, trigger: ReconnectEvent.Trigger)
        /// The stream is connecting; the timer is the attempt timeout.
        case attempting(timer: UInt64?)
        /// The attempt timed out and was aborted; waiting for its disconnect, or for the
        /// timer, after which the attempt counts as failed even if the stream never reports.
        case aborting(timer: UInt64)
    }

    var configuration: ReconnectConfiguration
    private var random: any RandomNumberGenerator & Sendable
    private var phase = Phase.disconnected
    private var process: Process?
    /// XMPPReconnect's "should reconnect": set when the stream becomes ready, cleared by an
    /// intentional disconnect or a refusal.
    private var shouldReconnect = false
    private var manuallyStarted = false
    private var refused = false
    private var expectedDisconnect: ExpectedDisconnect?
    /// Backoff retries since a healthy connection last dropped (the backoff's exponent).
    private var retries = 0
    /// When the last attempt started, whichever process made it (`minimumAttemptInterval`
    /// holds across handshakes: a new process after a drop is no exception).
    private var lastAttemptStart: Instant?
    /// When the stream last became ready, while it is (`stableConnectionDuration`).
    private var readyAt: Instant?
    /// Short connections still allowed to count as healthy (`shortConnectionAllowance`), as of
    /// `allowanceAt` (`nil`: never used, the whole allowance).
    private var allowance = 0.0
    private var allowanceAt: Instant?
    private var nextID: UInt64 = 0
    private(set) var path: ReconnectPath?

    /// A machine following `configuration`, its backoff's jitter drawn from `random`.
    package init(configuration: ReconnectConfiguration, random: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator()) {
        self.configuration = configuration
        self.random = random
    }

    /// The flags of the last known path (none before reachability is known).
    var flags: ReachabilityFlags { path?.flags ?? [] }

    /// Whether a reconnect process is running.
    package var isReconnecting: Bool { process != nil }

    // MARK: - Stream events

    /// The stream starts an attempt (`StreamEvent.willConnect`).
    package mutating func streamWillConnect() -> [Action] {
        phase = .connecting
        // A new attempt starts: a disconnect expected from an aborted one can no longer come.
        if expectedDisconnect == .stopped { expectedDisconnect = nil }
        return []
    }

    /// The stream's transport is open (`StreamEvent.opened`).
    package mutating func streamOpened() -> [Action] {
        phase = .opened
        // A manual start ends when the stream is next opened (seed, manualStart).
        manuallyStarted = false
        return []
    }

    /// The stream is ready. The backoff's retry count is not reset here but when the
    /// connection drops healthy (`stableConnectionDuration`, or within the
    /// `shortConnectionAllowance`): one a peer ends at once must not restart the backoff from
    /// its base every time.
    package mutating func streamReady(now: Instant) -> [Action] {
        phase = .ready
        readyAt = now
        if expectedDisconnect == .stopped { expectedDisconnect = nil }
        shouldReconnect = true
        refused = false
        guard let finished = process else { return [] }
        process = nil
        return [.cancelTimer, .emit(.succeeded(attempts: finished.attempts))]
    }

    /// The app asked the stream to disconnect: the disconnect that follows is intentional.
    package mutating func streamToldToDisconnect() -> [Action] {
        expectedDisconnect = .intentional
        shouldReconnect = false
        manuallyStarted = false
        return endProcess(emitting: .stopped)
    }

    /// The peer refused the stream for good: no retry (`StreamEvent.refused`).
    package mutating func streamRefused(reason: String) -> [Action] {
        refused = true
        shouldReconnect = false
        manuallyStarted = false
        var actions = endProcess(emitting: nil)
        actions.append(.emit(.refused(reason: reason)))
        return actions
    }

    /// The stream disconnected. A peer's request to retry at once (`retry`) is honoured only
    /// when the connection was healthy: ready for at least `stableConnectionDuration`, or
    /// ready at all while the `shortConnectionAllowance` lasts; a healthy connection also
    /// resets the backoff's retry count.
    package mutating func streamDisconnected(now: Instant, retry requested: RetryTiming = .policy) -> [Action] {
        let previous = phase
        phase = .disconnected
        let lasted = previous == .ready ? readyAt.map { now - $0 } : nil
        let healthy = lasted.map { $0 >= configuration.stableConnectionDuration || takeAllowance(now: now) } ?? false
        readyAt = nil
        if healthy { retries = 0 }
        let retry: RetryTiming = healthy ? requested : .policy
        if expectedDisconnect != nil {
            expectedDisconnect = nil
            return []
        }
        if refused { return [] }
        switch process?.step {
        case .attempting?, .aborting?:
            guard manuallyStarted || shouldReconnect else { return endProcess(emitting: nil) }
            if retry == .immediately { process?.retryAtOnce = .immediate }
            return scheduleRetry(now: now)
        case .waiting?, .voting?:
            return []
        case nil:
            guard previous != .disconnected, shouldReconnect, configuration.autoReconnect else { return [] }
            return startProcess(now: now, accidental: true, immediately: retry == .immediately)
        }
    }

    /// Takes one short connection from the allowance, if one is left: one comes back per
    /// `stableConnectionDuration`, up to `shortConnectionAllowance`.
    private mutating func takeAllowance(now: Instant) -> Bool {
        let capacity = Double(max(0, configuration.shortConnectionAllowance))
        var left = capacity
        if let since = allowanceAt {
            let refill = configuration.stableConnectionDuration > .zero ? (now - since) / configuration.stableConnectionDuration : capacity
            left = min(capacity, allowance + max(0, refill))
        }
        allowanceAt = now
        guard left >= 1 else {
            allowance = left
            return false
        }
        allowance = left - 1
        return true
    }

    // MARK: - Commands

    /// The app starts a process: its first attempt is not held to `minimumAttemptInterval`
    /// after the last one (the floor paces the reconnector's own retries, not the app).
    package mutating func manualStart(now: Instant, immediately: Bool = false) -> [Action] {
        guard phase == .disconnected, process == nil else { return [] }
        manuallyStarted = true
        refused = false
        lastAttemptStart = nil
        return startProcess(now: now, accidental: false, immediately: immediately)
    }

    /// Ends the running process only (`Reconnector.stop()`): an attempt in progress is aborted.
    package mutating func stop() -> [Action] {
        manuallyStarted = false
        switch process?.step {
        case .attempting?, .aborting?:
            expectedDisconnect = .stopped
            var actions = endProcess(emitting: .stopped)
            actions.append(.abortAttempt)
            return actions
        default:
            return endProcess(emitting: .stopped)
        }
    }

    // MARK: - Timers, votes, reachability

    /// The timer armed as `id` fired (an older one's id is ignored).
    package mutating func timerFired(id: UInt64, now: Instant) -> [Action] {
        switch process?.step {
        case .waiting(let timer)? where timer == id:
            return beginVote(trigger: .timer, now: now)
        case .attempting(let timer)? where timer == id:
            // A stream that ignores the abort must not leave the process hanging: after one more
            // timeout the attempt counts as failed.
            let grace = makeID()
            process?.step = .aborting(timer: grace)
            return [
                .emit(.attemptTimedOut(attempt: process?.attempts ?? 0)),
                .scheduleTimer(id: grace, deadline: now + (configuration.attemptTimeout ?? .seconds(30))),
                .abortAttempt,
            ]
        case .aborting(let timer)? where timer == id:
            // Given up on: the stream is taken as disconnected, so the next attempt connects.
            phase = .disconnected
            return scheduleRetry(now: now)
        default:
            return []
        }
    }

    /// The delegates asked in vote `id` answered (or stayed silent past its deadline).
    package mutating func voteFinished(id: UInt64, approved: Bool, now: Instant) -> [Action] {
        guard var running = process, case .voting(let vote, let trigger) = running.step, vote == id else { return [] }
        guard approved else {
            var actions: [Action] = [.emit(.vetoed(attempt: running.attempts + 1))]
            actions += scheduleRetry(now: now)
            return actions
        }
        running.attempts += 1
        lastAttemptStart = now
        var actions: [Action] = [.emit(.attemptStarted(attempt: running.attempts, trigger: trigger))]
        var timer: UInt64?
        if let timeout = configuration.attemptTimeout {
            let id = makeID()
            timer = id
            actions.append(.scheduleTimer(id: id, deadline: now + timeout))
        }
        running.step = .attempting(timer: timer)
        process = running
        // The app may have connected the stream itself meanwhile; then this attempt is that one.
        if phase == .disconnected { actions.append(.connect) }
        return actions
    }

    mutating func reachabilityChanged(_ newPath: ReconnectPath, now: Instant) -> [Action] {
        let old = path
        path = newPath
        guard let old else { return [] }
        switch process?.step {
        case .waiting?:
            guard newPath.isReachable, !old.isReachable || old != newPath else { return [] }
            var actions: [Action] = [.cancelTimer]
            actions += beginVote(trigger: .reachability, now: now)
            return actions
        case .aborting?:
            return []
        case .attempting?:
            // The attempt may hang on a path that no longer exists: abort it and retry at once.
            guard newPath.isReachable, old != newPath, phase != .ready else { return [] }
            process?.retryAtOnce = .reachability
            return [.abortAttempt]
        case .voting?:
            return []
        case nil:
            guard phase == .opened || phase == .ready, old.isReachable, old != newPath else { return [] }
            return [.verifyConnection, .emit(.verifyingConnection(flags: newPath.flags))]
        }
    }

    // MARK: - Scheduling

    private mutating func startProcess(now: Instant, accidental: Bool, immediately: Bool = false) -> [Action] {
        // The step is set by `wait` (or `beginVote`) below.
        process = Process(step: .waiting(timer: nil))
        var actions: [Action] = []
        if accidental {
            actions += [.notifyAccidentalDisconnect(flags), .emit(.accidentalDisconnect(flags: flags))]
        }
        let delay: Duration
        switch configuration.policy {
        case _ where immediately: delay = .zero
        case .xmpp: delay = configuration.reconnectDelay
        case .backoff(let backoff):
            delay = backoff.delay(forRetry: retries, using: &random)
            retries += 1
        }
        actions += wait(delay, now: now)
        return actions
    }

    /// After a failed or vetoed attempt: the policy's next delay, or at once after a path change,
    /// but never sooner than `minimumAttemptInterval` after the last attempt started.
    ///
    /// Only delays drawn from the backoff count as retries: an immediate retry (a peer's 42xx
    /// request, a path change) does not grow the ceiling, so the first real wait after them is
    /// still drawn under the base (realtime seed: "base 1 s").
    private mutating func scheduleRetry(now: Instant) -> [Action] {
        if let trigger = process?.retryAtOnce {
            process?.retryAtOnce = nil
            // A new path is paced by the kernel's reports; a peer asking again and again is not.
            let floor = trigger == .reachability ? .zero : attemptFloor(now: now)
            return floor > .zero ? wait(floor, now: now) : beginVote(trigger: trigger, now: now)
        }
        switch configuration.policy {
        case .xmpp:
            guard configuration.reconnectTimerInterval > .zero else {
                // XMPPReconnect turned an interval of 0 into a 1 ns repeating timer; 0 means off.
                process?.step = .waiting(timer: nil)
                return [.cancelTimer, .emit(.waitingForReachability(attempt: (process?.attempts ?? 0) + 1))]
            }
            return wait(configuration.reconnectTimerInterval, now: now)
        case .backoff(let backoff):
            let delay = backoff.delay(forRetry: retries, using: &random)
            retries += 1
            return wait(delay, now: now)
        }
    }

    /// How long until another attempt may start.
    private func attemptFloor(now: Instant) -> Duration {
        guard let lastAttemptStart else { return .zero }
        return max(.zero, lastAttemptStart + configuration.minimumAttemptInterval - now)
    }

    private mutating func wait(_ requested: Duration, now: Instant) -> [Action] {
        let delay = max(requested, attemptFloor(now: now))
        guard delay > .zero else { return beginVote(trigger: .immediate, now: now) }
        let id = makeID()
        process?.step = .waiting(timer: id)
        return [.scheduleTimer(id: id, deadline: now + delay), .emit(.scheduled(attempt: (process?.attempts ?? 0) + 1, delay: delay))]
    }

    private mutating func beginVote(trigger: ReconnectEvent.Trigger, now: Instant) -> [Action] {
        let id = makeID()
        process?.step = .voting(vote: id, trigger: trigger)
        return [.askDelegates(vote: id, flags: flags, deadline: now + configuration.delegateTimeout)]
    }

    private mutating func endProcess(emitting event: ReconnectEvent?) -> [Action] {
        guard process != nil else { return [] }
        process = nil
        var actions: [Action] = [.cancelTimer]
        if let event { actions.append(.emit(event)) }
        return actions
    }

    private mutating func makeID() -> UInt64 {
        nextID += 1
        return nextID
    }
}
