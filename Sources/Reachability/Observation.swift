import SystemSupport

/// A registration (an observer, a listener, a delegate made of closures) that lasts until
/// `cancel()` is called: returned by `ReachabilitySource.observe(_:)`, `Reconnector.onEvent(_:)`
/// and similar.
public final class ObservationToken: Sendable {
    private let onCancel: Locked<(@Sendable () -> Void)?>

    /// Creates a token that runs `onCancel` on the first `cancel()`.
    ///
    /// - Parameter onCancel: removes the handler from the source.
    public init(onCancel: @escaping @Sendable () -> Void) {
        self.onCancel = Locked(onCancel)
    }

    /// Removes the handler; later calls do nothing.
    public func cancel() {
        let action = onCancel.withLock { action in
            defer { action = nil }
            return action
        }
        action?()
    }
}

/// Callbacks for one kind of value, called in the order they were added, each registration
/// undone by cancelling its token: the observer list behind `onEvent`-style APIs.
package final class ObserverList<Value: Sendable>: Sendable {
    private struct State {
        var next: UInt64 = 0
        var handlers: [(id: UInt64, handler: @Sendable (Value) -> Void)] = []
    }

    private let state = Locked(State())

    /// Creates an empty list.
    package init() {}

    /// Adds a handler.
    ///
    /// - Parameter handler: called with each value sent, on the sender's thread.
    /// - Returns: the token that removes it.
    package func add(_ handler: @escaping @Sendable (Value) -> Void) -> ObservationToken {
        let id = state.withLock { state in
            state.next += 1
            state.handlers.append((state.next, handler))
            return state.next
        }
        return ObservationToken { [weak self] in
            self?.state.withLock { $0.handlers.removeAll { $0.id == id } }
        }
    }

    /// Calls every handler with `value`, outside the lock (a handler may add or cancel).
    package func send(_ value: Value) {
        for entry in state.withLock({ $0.handlers }) { entry.handler(value) }
    }

    /// Whether no handler is registered.
    package var isEmpty: Bool { state.withLock { $0.handlers.isEmpty } }

    /// How many handlers are registered.
    package var count: Int { state.withLock { $0.handlers.count } }

    /// Every value sent from now on, as an `AsyncStream` (unbounded buffer); the handler is
    /// removed when the stream ends.
    package func stream() -> AsyncStream<Value> {
        AsyncStream { continuation in
            let token = add { continuation.yield($0) }
            continuation.onTermination = { _ in token.cancel() }
        }
    }
}
