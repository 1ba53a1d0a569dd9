import SystemSupport
import Reachability

/// Carries a stream's events to the `Reconnector` attached to it and to any other observer
/// (an app's UI, a log). The stream owns the relay and calls `send(_:)`; handlers capture
/// their owners weakly, so stream and reconnector never retain each other.
public final class StreamEventRelay: Sendable {
    private let reconnector = Locked<(@Sendable (StreamEvent) -> Void)?>(nil)
    private let observers = ObserverList<StreamEvent>()

    /// Creates a relay with no listener.
    public init() {}

    /// Reports an event to the observers, then to the reconnector, synchronously on the
    /// caller's thread, so a log shows the event before the reconnector's reaction to it.
    ///
    /// - Parameter event: what happened to the stream.
    public func send(_ event: StreamEvent) {
        observers.send(event)
        reconnector.withLock { $0 }?(event)
    }

    /// Calls `handler` with every event the stream reports, until the token is cancelled.
    ///
    /// - Parameter handler: runs on the thread that reported the event; keep it short.
    /// - Returns: the registration.
    public func observe(_ handler: @escaping @Sendable (StreamEvent) -> Void) -> ObservationToken {
        observers.add(handler)
    }

    /// Installs (or, with `nil`, removes) the attached reconnector's handler.
    func setReconnector(_ handler: (@Sendable (StreamEvent) -> Void)?) {
        reconnector.withLock { $0 = handler }
    }
}
