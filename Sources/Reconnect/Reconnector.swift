import Dispatch
import SystemSupport
import Reachability

/// Keeps a stream connected: a Swift port of XMPPFramework's XMPPReconnect that attaches to
/// any `ReconnectableStream`.
///
/// It tells accidental disconnects from intentional ones, waits `reconnectDelay`, retries on a
/// periodic timer (or a backoff policy), asks delegates before each attempt, and watches the
/// host's reachability: a host that becomes reachable ends the wait at once, and a path that
/// changes under a connected stream makes it verify itself.
///
/// ```swift
/// let reconnector = Reconnector(reachability: { try NetworkReachability(host: $0) })
/// reconnector.activate(stream)
/// ```
///
/// Thread-safe; delegates run on their own queues, events are published in order.
public final class Reconnector: Sendable {
    private struct DelegateEntry {
        weak var delegate: (any ReconnectorDelegate)?
        var strong: (any ReconnectorDelegate)?
        let queue: DispatchQueue
        var target: (any ReconnectorDelegate)? { strong ?? delegate }
    }

    private struct Vote {
        var id: UInt64
        var waiting: Int
        var approved = true
        var deadline: (any ScheduledWork)?
    }

    private struct State {
        var machine: ReconnectStateMachine
        weak var stream: (any ReconnectableStream)?
        var timer: (any ScheduledWork)?
        var vote: Vote?
        var delegates: [DelegateEntry] = []
        var reachability: (any ReachabilitySource)?
        var observation: ObservationToken?
        var reachabilityError: (any Error)?
        /// Actions chosen by the machine and not yet performed, in order.
        var pendingActions: [ReconnectStateMachine.Action] = []
        /// Whether a thread is performing `pendingActions`.
        var draining = false
    }

    private let state: Locked<State>
    private let listeners = ObserverList<ReconnectEvent>()
    private let scheduler: any ReconnectScheduler
    private let makeReachability: (@Sendable (String) throws -> any ReachabilitySource)?

    /// Creates a reconnector; attach it to a stream with `activate(_:)`.
    ///
    /// - Parameters:
    ///   - configuration: delays, policy and timeouts (XMPPReconnect's defaults).
    ///   - scheduler: time and timers (real time by default; `ManualClock` in tests).
    ///   - random: the random source for backoff jitter.
    ///   - reachability: makes the reachability source for the stream's host
    ///     (`{ try NetworkReachability(host: $0) }` on Linux); `nil` reconnects on timers only.
    public init(
        configuration: ReconnectConfiguration = ReconnectConfiguration(),
        scheduler: any ReconnectScheduler = DispatchReconnectScheduler(),
        random: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
        reachability: (@Sendable (String) throws -> any ReachabilitySource)? = nil
    ) {
        state = Locked(State(machine: ReconnectStateMachine(configuration: configuration, random: random)))
        self.scheduler = scheduler
        makeReachability = reachability
    }

    deinit {
        let (timer, observation) = state.withLock { ($0.timer, $0.observation) }
        timer?.cancel()
        observation?.cancel()
    }

    // MARK: - Attaching

    /// Attaches to `stream` (held weakly) and starts watching its host's reachability.
    /// Replaces any stream attached before.
    ///
    /// - Parameter stream: the connection to keep alive.
    public func activate(_ stream: any ReconnectableStream) {
        deactivate()
        stream.reconnectEvents.setReconnector { [weak self] event in self?.handle(event) }
        var source: (any ReachabilitySource)?
        var failure: (any Error)?
        do { source = try makeReachability?(stream.destinationHost) } catch { failure = error }
        let initial = source.map { ReconnectPath($0.currentReachability()) }
        state.withLock { state in
            state.stream = stream
            state.reachability = source
            state.reachabilityError = failure
            if let initial { _ = state.machine.reachabilityChanged(initial, now: scheduler.now) }
        }
        let observation = source?.observe { [weak self] value in self?.reachabilityChanged(value) }
        state.withLock { $0.observation = observation }
    }

    /// Detaches from the stream: stops the current process and reachability watching.
    public func deactivate() {
        let (stream, observation) = state.withLock { state -> ((any ReconnectableStream)?, ObservationToken?) in
            defer {
                state.stream = nil
                state.observation = nil
                state.reachability = nil
            }
            return (state.stream, state.observation)
        }
        observation?.cancel()
        stream?.reconnectEvents.setReconnector(nil)
        run { $0.stop() }
    }

    /// Why no reachability source could be made for the stream's host (an invalid host, a
    /// netlink failure), in which case retries run on timers only; `nil` otherwise.
    public var reachabilityError: (any Error)? { state.withLock { $0.reachabilityError } }

    // MARK: - XMPPReconnect's API

    /// Whether accidental disconnects start reconnecting (default on). Changing it affects
    /// only later disconnects, not a process already running.
    public var autoReconnect: Bool {
        get { state.withLock { $0.machine.configuration.autoReconnect } }
        set { state.withLock { $0.machine.configuration.autoReconnect = newValue } }
    }

    /// Wait before the first attempt (default 2 s; 0 attempts at once).
    public var reconnectDelay: Duration {
        get { state.withLock { $0.machine.configuration.reconnectDelay } }
        set { state.withLock { $0.machine.configuration.reconnectDelay = newValue } }
    }

    /// Period of the retry timer (default 20 s; 0 disables it).
    public var reconnectTimerInterval: Duration {
        get { state.withLock { $0.machine.configuration.reconnectTimerInterval } }
        set { state.withLock { $0.machine.configuration.reconnectTimerInterval = newValue } }
    }

    /// The whole configuration.
    public var configuration: ReconnectConfiguration {
        get { state.withLock { $0.machine.configuration } }
        set { state.withLock { $0.machine.configuration = newValue } }
    }

    /// The reachability flags of the stream's host as last seen.
    public var flags: ReachabilityFlags { state.withLock { $0.machine.flags } }

    /// Whether a reconnect process is running.
    public var isReconnecting: Bool { state.withLock { $0.machine.isReconnecting } }

    /// Acts as if an accidental disconnect just happened: the first attempt after
    /// `reconnectDelay` (or at once with `immediately`), or as soon as the host becomes
    /// reachable; failed attempts are retried. Ends when the stream is next opened. Does
    /// nothing unless the stream is disconnected and no process runs (seed, `manualStart`).
    ///
    /// `manualStart(immediately: true)` is the way to make a stream's first connection keep
    /// trying when there is no network at launch (XMPPReconnect did nothing then).
    ///
    /// - Parameter immediately: attempt now instead of after `reconnectDelay`.
    public func manualStart(immediately: Bool = false) {
        let now = scheduler.now
        run { $0.manualStart(now: now, immediately: immediately) }
    }

    /// Stops the current process only: later accidental disconnects still reconnect, and
    /// `manualStart()` still works. An attempt in progress is aborted; a delegate vote in
    /// progress leads to no attempt.
    public func stop() {
        run { $0.stop() }
    }

    // MARK: - Delegates and events

    /// Adds a delegate, held weakly, called on `queue`.
    ///
    /// - Parameters:
    ///   - delegate: the delegate.
    ///   - queue: where its methods run.
    public func addDelegate(_ delegate: any ReconnectorDelegate, queue: DispatchQueue) {
        state.withLock { $0.delegates.append(DelegateEntry(delegate: delegate, strong: nil, queue: queue)) }
    }

    /// Removes a delegate added with `addDelegate(_:queue:)`.
    ///
    /// - Parameter delegate: the delegate.
    public func removeDelegate(_ delegate: any ReconnectorDelegate) {
        state.withLock { $0.delegates.removeAll { $0.target === delegate || $0.target == nil } }
    }

    /// Adds a delegate made of closures, kept until the returned token is cancelled.
    ///
    /// - Parameters:
    ///   - queue: where the closures run.
    ///   - didDetectAccidentalDisconnect: called once per accidental disconnect with the flags.
    ///   - shouldAttemptAutoReconnect: asked before each attempt; `false` vetoes it.
    /// - Returns: a token whose `cancel()` removes the closures.
    public func addDelegate(
        queue: DispatchQueue,
        didDetectAccidentalDisconnect: (@Sendable (ReachabilityFlags) -> Void)? = nil,
        shouldAttemptAutoReconnect: (@Sendable (ReachabilityFlags) -> Bool)? = nil
    ) -> ObservationToken {
        let delegate = ClosureReconnectorDelegate(accidental: didDetectAccidentalDisconnect, shouldAttempt: shouldAttemptAutoReconnect)
        state.withLock { $0.delegates.append(DelegateEntry(delegate: delegate, strong: delegate, queue: queue)) }
        return ObservationToken { [weak self] in
            self?.state.withLock { $0.delegates.removeAll { $0.target === delegate } }
        }
    }

    /// Calls `listener` with every event, synchronously and in order, on the thread that
    /// caused it; keep it short.
    ///
    /// - Parameter listener: receives events.
    /// - Returns: a token whose `cancel()` removes the listener.
    public func onEvent(_ listener: @escaping @Sendable (ReconnectEvent) -> Void) -> ObservationToken {
        listeners.add(listener)
    }

    /// Every event from now on, as an `AsyncStream` (unbounded buffer); ends when the consuming
    /// task is cancelled.
    public func events() -> AsyncStream<ReconnectEvent> {
        listeners.stream()
    }

    // MARK: - Inputs

    private func handle(_ event: StreamEvent) {
        let now = scheduler.now
        run { machine in
            switch event {
            case .willConnect: return machine.streamWillConnect()
            case .opened: return machine.streamOpened()
            case .ready: return machine.streamReady(now: now)
            case .toldToDisconnect: return machine.streamToldToDisconnect()
            case .disconnected(_, let retry): return machine.streamDisconnected(now: now, retry: retry)
            case .refused(let reason): return machine.streamRefused(reason: reason)
            }
        }
    }

    private func reachabilityChanged(_ value: HostReachability) {
        let now = scheduler.now
        run { $0.reachabilityChanged(ReconnectPath(value), now: now) }
    }

    private func timerFired(_ id: UInt64) {
        let now = scheduler.now
        run { $0.timerFired(id: id, now: now) }
    }

    private func voteAnswered(_ id: UInt64, approve: Bool?) {
        let finished = state.withLock { state -> Bool? in
            guard var vote = state.vote, vote.id == id else { return nil }
            if let approve {
                vote.waiting -= 1
                if !approve { vote.approved = false }
            } else {
                vote.waiting = 0  // the deadline passed: silent delegates do not veto
            }
            guard vote.waiting <= 0 else {
                state.vote = vote
                return nil
            }
            state.vote = nil
            vote.deadline?.cancel()
            return vote.approved
        }
        guard let approved = finished else { return }
        let now = scheduler.now
        run { $0.voteFinished(id: id, approved: approved, now: now) }
    }

    // MARK: - Actions

    /// Applies an event to the machine and performs the actions, in order, one event's
    /// actions after another's even when events arrive on several threads at once.
    private func run(_ event: (inout ReconnectStateMachine) -> [ReconnectStateMachine.Action]) {
        // The transition and the queueing of its actions happen under one lock, so actions
        // leave in the order the machine chose them, whatever thread each event came from.
        let shouldDrain = state.withLock { state -> Bool in
            state.pendingActions.append(contentsOf: event(&state.machine))
            if state.draining { return false }
            state.draining = true
            return true
        }
        guard shouldDrain else { return }
        // One thread drains at a time; actions queued meanwhile by others are drained here.
        while let next = state.withLock({ state -> ReconnectStateMachine.Action? in
            if state.pendingActions.isEmpty {
                state.draining = false
                return nil
            }
            return state.pendingActions.removeFirst()
        }) {
            perform(next)
        }
    }

    private func perform(_ action: ReconnectStateMachine.Action) {
        switch action {
        case .notifyAccidentalDisconnect(let flags):
            for entry in state.withLock({ $0.delegates }) {
                guard let delegate = entry.target else { continue }
                entry.queue.async { delegate.reconnector(self, didDetectAccidentalDisconnect: flags) }
            }
        case .scheduleTimer(let id, let deadline):
            let timer = scheduler.schedule(at: deadline) { [weak self] in self?.timerFired(id) }
            let old = state.withLock { state in
                defer { state.timer = timer }
                return state.timer
            }
            old?.cancel()
        case .cancelTimer:
            state.withLock { state in
                defer { state.timer = nil }
                return state.timer
            }?.cancel()
        case .askDelegates(let id, let flags, let deadline):
            askDelegates(id, flags: flags, deadline: deadline)
        case .connect:
            // Reconnect the way the app last connected (XMPPReconnect's usesOldSchoolSecureConnect).
            if let stream = state.withLock({ $0.stream }) { stream.startConnectAttempt(using: stream.lastConnectMethod) }
        case .abortAttempt:
            state.withLock { $0.stream }?.abortConnectAttempt()
        case .verifyConnection:
            state.withLock { $0.stream }?.verifyConnection()
        case .emit(let event):
            listeners.send(event)
        }
    }

    private func askDelegates(_ id: UInt64, flags: ReachabilityFlags, deadline: ContinuousClock.Instant) {
        let delegates = state.withLock { state in
            state.delegates.removeAll { $0.target == nil }
            return state.delegates.compactMap { entry in entry.target.map { ($0, entry.queue) } }
        }
        state.withLock { $0.vote = Vote(id: id, waiting: delegates.count) }
        guard !delegates.isEmpty else {
            voteAnswered(id, approve: nil)
            return
        }
        let timer = scheduler.schedule(at: deadline) { [weak self] in self?.voteAnswered(id, approve: nil) }
        state.withLock { state in
            if state.vote?.id == id { state.vote?.deadline = timer } else { timer.cancel() }
        }
        for (delegate, queue) in delegates {
            queue.async { [weak self] in
                guard let self else { return }
                self.voteAnswered(id, approve: delegate.reconnector(self, shouldAttemptAutoReconnect: flags))
            }
        }
    }
}
