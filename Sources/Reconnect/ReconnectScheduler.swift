import Dispatch
import SystemSupport

/// The time source and timers of a `Reconnector`: real time in production
/// (`DispatchReconnectScheduler`), `ManualClock` in tests.
public protocol ReconnectScheduler: Sendable {
    /// The current instant.
    var now: ContinuousClock.Instant { get }
    /// Runs `work` once at `deadline` (at once if it has passed), unless cancelled first.
    ///
    /// - Parameters:
    ///   - deadline: when to run.
    ///   - work: what to run.
    /// - Returns: a handle that cancels the timer.
    func schedule(at deadline: ContinuousClock.Instant, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork
}

/// A timer created by a `ReconnectScheduler`.
public protocol ScheduledWork: Sendable {
    /// Stops the work from running if it has not started.
    func cancel()
}

/// Timers on a Dispatch queue, in `ContinuousClock` time.
public struct DispatchReconnectScheduler: ReconnectScheduler {
    private let queue: DispatchQueue

    /// Creates a scheduler.
    ///
    /// - Parameter queue: where timer work runs (a private serial queue by default).
    public init(queue: DispatchQueue = DispatchQueue(label: "Reconnector.timers")) {
        self.queue = queue
    }

    /// `ContinuousClock.now`.
    public var now: ContinuousClock.Instant { ContinuousClock.now }

    /// Schedules `work` with `DispatchQueue.asyncAfter`; a cancelled timer's work is dropped.
    public func schedule(at deadline: ContinuousClock.Instant, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork {
        let timer = DispatchScheduledWork()
        let delay = max(.zero, deadline - ContinuousClock.now)
        // Delays beyond a century never fire in practice; they must not overflow either.
        let when: DispatchTime
        if delay >= .seconds(100 * 365 * 86_400) {
            when = .distantFuture
        } else {
            when = .now() + .nanoseconds(Int(delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000))
        }
        queue.asyncAfter(deadline: when) {
            if !timer.isCancelled { work() }
        }
        return timer
    }
}

private final class DispatchScheduledWork: ScheduledWork {
    private let cancelled = Locked(false)
    var isCancelled: Bool { cancelled.withLock { $0 } }
    func cancel() { cancelled.withLock { $0 = true } }
}
