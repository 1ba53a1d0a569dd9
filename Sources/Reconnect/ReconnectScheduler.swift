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

    /// Schedules `work` on a one-shot `DispatchSourceTimer`. Cancelling releases the work (and
    /// everything it captured) at once, not at its deadline: a client that rearms a timer on
    /// every rejoin held each cancelled closure until its deadline, 50 minutes for a room token
    /// (found by a hostile-server trial).
    public func schedule(at deadline: ContinuousClock.Instant, _ work: @escaping @Sendable () -> Void) -> any ScheduledWork {
        let delay = max(.zero, deadline - ContinuousClock.now)
        // Delays beyond a century never fire in practice; they must not overflow either.
        let when: DispatchTime
        if delay >= .seconds(100 * 365 * 86_400) {
            when = .distantFuture
        } else {
            when = .now() + .nanoseconds(Int(delay.components.seconds * 1_000_000_000 + delay.components.attoseconds / 1_000_000_000))
        }
        let source = DispatchSource.makeTimerSource(queue: queue)
        source.setEventHandler {
            work()
            // One shot: cancelling releases this handler, and with it the source.
            source.cancel()
        }
        source.schedule(deadline: when, repeating: .never)
        source.resume()
        return DispatchScheduledWork(source: source)
    }
}

/// `@unchecked Sendable`: its one property is a Dispatch source, whose `cancel()` may be called
/// from any thread (Dispatch's own guarantee; the protocol is not annotated `Sendable`).
private final class DispatchScheduledWork: ScheduledWork, @unchecked Sendable {
    private let source: any DispatchSourceTimer
    init(source: any DispatchSourceTimer) { self.source = source }
    /// Cancelling an already fired or cancelled source does nothing.
    func cancel() { source.cancel() }
}
