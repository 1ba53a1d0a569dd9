import Locking
import Reachability

/// Carries a stream's events to the `Reconnector` attached to it and to any other observer
/// (an app's UI, a log). The stream owns the relay and calls `send(_:)`; handlers capture
/// their owners weakly, so stream and reconnector never retain each other.
public final class StreamEventRelay: Sendable {
    private struct State {
        var reconnector: (@Sendable (StreamEvent) -> Void)?
        var observers: [UInt64: @Sendable (StreamEvent) -> Void] = [:]
        var nextID: UInt64 = 0
    }

    private let state = Locked(State())

    /// Creates a relay with no listener.
    public init() {}

    /// Reports an event to the observers, then to the reconnector, synchronously on the
    /// caller's thread, so a log shows the event before the reconnector's reaction to it.
    ///
    /// - Parameter event: what happened to the stream.
    public func send(_ event: StreamEvent) {
        let (observers, reconnector) = state.withLock { (Array($0.observers.values), $0.reconnector) }
        for observer in observers { observer(event) }
        reconnector?(event)
    }

    /// Calls `handler` with every event the stream reports, until the token is cancelled.
    ///
    /// - Parameter handler: runs on the thread that reported the event; keep it short.
    /// - Returns: the registration.
    public func observe(_ handler: @escaping @Sendable (StreamEvent) -> Void) -> ObservationToken {
        let id = state.withLock { state in
            state.nextID += 1
            state.observers[state.nextID] = handler
            return state.nextID
        }
        return ObservationToken { [weak self] in
            _ = self?.state.withLock { $0.observers.removeValue(forKey: id) }
        }
    }

    /// Installs (or, with `nil`, removes) the attached reconnector's handler.
    func setReconnector(_ handler: (@Sendable (StreamEvent) -> Void)?) {
        state.withLock { $0.reconnector = handler }
    }
}
