import Dispatch
import Locking
import Reachability

/// A channel the app subscribed to (realtime-connection-lifecycle seed, "What happens to
/// channels"). The object lives as long as the subscription: it is kept across drops, its
/// bindings are kept, and the client resubscribes it after every `connected`.
///
/// `BirdRealtime.subscribe(_:)` returns the same object for the same name until
/// `unsubscribe()`. Handlers run on the client's delivery queue, in arrival order.
public final class RealtimeChannel: Sendable {
    private struct State {
        var subscribed = false
        var nextID: UInt64 = 0
        var bindings: [(id: UInt64, event: String?, handler: @Sendable (RealtimeEvent) -> Void)] = []
    }

    /// The channel name (`prices`, `private-orders`, `presence-room`).
    public let name: String
    private let state = Locked(State())
    private let deliveryQueue: DispatchQueue
    private let onUnsubscribe: @Sendable (String) -> Void

    init(name: String, deliveryQueue: DispatchQueue, onUnsubscribe: @escaping @Sendable (String) -> Void) {
        self.name = name
        self.deliveryQueue = deliveryQueue
        self.onUnsubscribe = onUnsubscribe
    }

    /// Whether the server confirmed the subscription on the current connection. `false` while
    /// connecting, reconnecting, or after a refusal; `true` from
    /// `bird:subscription_succeeded` until the connection drops.
    public var subscribed: Bool { state.withLock { $0.subscribed } }

    /// Calls `handler` for every event named `event` on this channel, on the delivery queue.
    /// Bindings survive reconnects; each event reaches each handler once.
    ///
    /// - Parameters:
    ///   - event: the event name (`price-update`, or `ProtocolNamespace.bird.event(.subscriptionSucceeded)`).
    ///   - handler: receives the event.
    /// - Returns: a token whose `cancel()` removes the binding.
    @discardableResult
    public func bind(_ event: String, _ handler: @escaping @Sendable (RealtimeEvent) -> Void) -> ObservationToken {
        add(event: event, handler)
    }

    /// Calls `handler` for every event on this channel, protocol events included.
    ///
    /// - Parameter handler: receives each event.
    /// - Returns: a token whose `cancel()` removes the binding.
    @discardableResult
    public func bindAll(_ handler: @escaping @Sendable (RealtimeEvent) -> Void) -> ObservationToken {
        add(event: nil, handler)
    }

    /// Every event on this channel from now on, as an `AsyncStream` (unbounded buffer); ends
    /// when the consuming task is cancelled.
    public func events() -> AsyncStream<RealtimeEvent> {
        AsyncStream { continuation in
            let token = bindAll { continuation.yield($0) }
            continuation.onTermination = { _ in token.cancel() }
        }
    }

    /// Unsubscribes: the client sends `<ns>:unsubscribe` if connected, and never resubscribes
    /// this channel after a reconnect. Same as `BirdRealtime.unsubscribe(name)`.
    public func unsubscribe() { onUnsubscribe(name) }

    // MARK: - Used by the client

    private func add(event: String?, _ handler: @escaping @Sendable (RealtimeEvent) -> Void) -> ObservationToken {
        let id = state.withLock { state in
            state.nextID += 1
            state.bindings.append((state.nextID, event, handler))
            return state.nextID
        }
        return ObservationToken { [weak self] in
            self?.state.withLock { $0.bindings.removeAll { $0.id == id } }
        }
    }

    func setSubscribed(_ value: Bool) { state.withLock { $0.subscribed = value } }

    /// Queues `event` for this channel's handlers on the delivery queue. Call in arrival order
    /// (the client calls it under its own lock, so order is kept across threads).
    func enqueue(_ event: RealtimeEvent) {
        deliveryQueue.async { [self] in
            let handlers = state.withLock { state in
                state.bindings.filter { $0.event == nil || $0.event == event.event }.map(\.handler)
            }
            for handler in handlers { handler(event) }
        }
    }
}
