import SystemSupport
import Reconnect

/// A clock that moves only when a test says so: `advance(by:)` runs every timer that falls
/// due, in deadline order, synchronously on the caller's thread. Use it as a `Reconnector`'s
/// scheduler (or as a `Clock`) to test timing rules with no sleeps.
public final class ManualClock: Clock, ReconnectScheduler, Sendable {
    /// The clock's instants are `ContinuousClock`'s, so it can stand in for real time.
    public typealias Instant = ContinuousClock.Instant

    private struct Timer {
        var id: UInt64
        var deadline: Instant
        var work: @Sendable () -> Void
    }

    private struct State {
        var now: Instant
        var timers: [Timer] = []
        var nextID: UInt64 = 0
    }

    private let state: Locked<State>

    /// Creates a clock standing at `now`.
    ///
    /// - Parameter now: the starting instant (the real now by default; only differences matter).
    public init(now: Instant = ContinuousClock.now) {
        state = Locked(State(now: now))
    }

    /// The clock's current instant.
    public var now: Instant { state.withLock { $0.now } }

    /// Zero: the clock jumps exactly where it is told.
    public var minimumResolution: Duration { .zero }

    /// Timers scheduled and not yet run or cancelled.
    public var pendingTimers: Int { state.withLock { $0.timers.count } }

    /// The earliest pending deadline, if any.
    public var nextDeadline: Instant? { state.withLock { $0.timers.map(\.deadline).min() } }

    /// Registers `work` to run when the clock reaches `deadline`.
    ///
    /// - Returns: a handle that cancels it.
    public func schedule(at deadline: Instant, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork {
        let id = state.withLock { state in
            state.nextID += 1
            state.timers.append(Timer(id: state.nextID, deadline: deadline, work: work))
            return state.nextID
        }
        return ManualTimer { [weak self] in
            self?.state.withLock { $0.timers.removeAll { $0.id == id } }
        }
    }

    /// Suspends until the clock is advanced to `deadline`.
    ///
    /// - Throws: `CancellationError` if the task is cancelled first.
    public func sleep(until deadline: Instant, tolerance: Duration? = nil) async throws {
        // Resumed once: by the timer, or by cancellation, whichever takes the continuation.
        let waiter = Locked<(continuation: CheckedContinuation<Void, Never>?, timer: (any ScheduledWork)?, cancelled: Bool)>((nil, nil, false))
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let alreadyCancelled = waiter.withLock { state -> Bool in
                    state.continuation = continuation
                    return state.cancelled
                }
                if alreadyCancelled {
                    waiter.withLock { $0.continuation = nil }
                    continuation.resume()
                    return
                }
                let timer = schedule(at: deadline) {
                    waiter.withLock { state in
                        defer { state.continuation = nil }
                        return state.continuation
                    }?.resume()
                }
                waiter.withLock { $0.timer = timer }
            }
        } onCancel: {
            let (continuation, timer) = waiter.withLock { state in
                defer {
                    state.continuation = nil
                    state.cancelled = true
                }
                return (state.continuation, state.timer)
            }
            timer?.cancel()
            continuation?.resume()
        }
        try Task.checkCancellation()
    }

    /// Moves the clock forward by `duration`, running each timer that falls due, in order.
    ///
    /// - Parameter duration: how far to move (not negative).
    public func advance(by duration: Duration) {
        advance(to: now + duration)
    }

    /// Moves the clock to `instant`, running each timer due by then in deadline order; each
    /// runs with the clock at its own deadline, and timers they schedule that fall due run too.
    ///
    /// - Parameter instant: where to stop; the clock never moves back.
    public func advance(to instant: Instant) {
        while true {
            let due = state.withLock { state -> Timer? in
                guard let index = state.timers.indices.filter({ state.timers[$0].deadline <= instant })
                    .min(by: { state.timers[$0].deadline < state.timers[$1].deadline || (state.timers[$0].deadline == state.timers[$1].deadline && state.timers[$0].id < state.timers[$1].id) })
                else {
                    if instant > state.now { state.now = instant }
                    return nil
                }
                let timer = state.timers.remove(at: index)
                if timer.deadline > state.now { state.now = timer.deadline }
                return timer
            }
            guard let due else { return }
            due.work()
        }
    }

    /// Moves the clock forward without running the timers that fall due, as a process that was
    /// stopped (SIGSTOP, a suspended machine) sees time: they run late, with the clock at the
    /// new instant, at the next `runDueTimers` or `advance`.
    ///
    /// - Parameter duration: how long the process was frozen.
    public func jump(by duration: Duration) {
        state.withLock { $0.now = $0.now + duration }
    }

    /// Runs the timers already due now (deadline at or before `now`).
    public func runDueTimers() { advance(to: now) }
}

private final class ManualTimer: ScheduledWork {
    private let onCancel: Locked<(@Sendable () -> Void)?>
    init(onCancel: @escaping @Sendable () -> Void) { self.onCancel = Locked(onCancel) }
    func cancel() {
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }
}
