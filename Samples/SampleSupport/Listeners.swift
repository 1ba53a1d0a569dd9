import Locking
import Reachability

/// A set of callbacks for one kind of value, called in the order they were added; each
/// registration is undone by cancelling its token.
final class Listeners<Value: Sendable>: Sendable {
    private struct State {
        var next: UInt64 = 0
        var handlers: [(id: UInt64, handler: @Sendable (Value) -> Void)] = []
    }

    private let state = Locked(State())

    func add(_ handler: @escaping @Sendable (Value) -> Void) -> ObservationToken {
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
    func send(_ value: Value) {
        for entry in state.withLock({ $0.handlers }) { entry.handler(value) }
    }

    /// Every value from now on, as an `AsyncStream` (unbounded buffer).
    func stream() -> AsyncStream<Value> {
        AsyncStream { continuation in
            let token = add { continuation.yield($0) }
            continuation.onTermination = { _ in token.cancel() }
        }
    }
}
