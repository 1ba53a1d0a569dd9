import Dispatch
import SystemSupport
import Reachability
import RealtimeProtocol

/// A channel the app subscribed to (realtime-connection-lifecycle seed, "What happens to
/// channels"). The object lives as long as the subscription: it is kept across drops, its
/// bindings are kept, and the client resubscribes it after every `connected`.
///
/// `BirdRealtime.subscribe(_:)` returns the same object for the same name until
/// `unsubscribe()`, a `PresenceChannel` for `presence-` names. Handlers run on the client's
/// delivery queue, in arrival order.
///
/// `@unchecked Sendable` only because a class with a subclass cannot be checked: every stored
/// property is a `let` of a `Sendable` type, and the mutable state is behind `Locked`.
public class RealtimeChannel: @unchecked Sendable {
    /// What a channel's name makes of it (DESIGN.md "The wire protocol").
    public typealias Kind = ChannelKind


    /// What a channel needs from its connection: the delivery outbox, its state on the current
    /// connection (kept by the connection's state machine, read under the connection's lock),
    /// and the unsubscribe and client-event commands.
    struct Parts: Sendable {
        var outbox: DeliveryOutbox
        var record: @Sendable (String) -> ChannelTable.Record?
        var onUnsubscribe: @Sendable (String) -> Void
        var onTrigger: @Sendable (_ channel: String, _ event: String, _ data: String) -> Bool
    }

    /// The channel name (`prices`, `private-orders`, `presence-room`).
    public let name: String
    /// What the name makes of the channel.
    public let kind: Kind
    /// The protocol namespace the client speaks, in which `BirdProtocol.Event`s are named.
    public let namespace: ProtocolNamespace

    private let state = Locked(HandlerTable<@Sendable (RealtimeEvent) -> Void>())
    private let parts: Parts

    init(name: String, namespace: ProtocolNamespace, parts: Parts) {
        self.name = name
        self.namespace = namespace
        kind = Kind(channelName: name)
        self.parts = parts
    }

    /// Whether the server confirmed the subscription on the current connection. `false` while
    /// connecting, reconnecting, or after a refusal; `true` from
    /// `bird:subscription_succeeded` until the connection drops.
    public var subscribed: Bool { parts.record(name)?.subscribed ?? false }

    /// Presence channels: the members, in the server's order, each once. Replaced by the
    /// server's list at every (re)subscription, so members who left while the client was away
    /// are gone; empty while not subscribed and for other kinds.
    public var members: [PresenceMember] { parts.record(name)?.members.list ?? [] }

    /// Presence channels: this connection's member (from the authorisation's `channel_data`).
    public var me: PresenceMember? { parts.record(name)?.me }

    /// Sends a client event to the other members (seed: "While a channel is reconnecting,
    /// `channel.trigger` returns false and sends nothing").
    ///
    /// - Parameters:
    ///   - event: the event name; must start with `client-`.
    ///   - data: the event's data, JSON text.
    /// - Returns: `false`, with nothing sent, unless the name starts with `client-`, the channel
    ///   is private or presence (not public, not encrypted), and it is subscribed now.
    @discardableResult
    public func trigger(_ event: String, data: String) -> Bool {
        guard event.hasPrefix("client-"), kind.allowsClientEvents, subscribed else { return false }
        return parts.onTrigger(name, event, data)
    }

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

    /// Calls `handler` with the data of every `event` on this channel, named in the namespace
    /// the client speaks (seed: `room.bind(BirdProtocol.Event.subscriptionSucceeded) { _ in … }`,
    /// `room.bind(BirdProtocol.Event.subscriptionError) { error in print(error ?? "") }`).
    ///
    /// - Parameters:
    ///   - event: a protocol event.
    ///   - handler: receives the event's data text (`nil` when it had none).
    /// - Returns: a token whose `cancel()` removes the binding.
    @discardableResult
    public func bind(_ event: BirdProtocol.Event, _ handler: @escaping @Sendable (String?) -> Void) -> ObservationToken {
        add(event: event.name(in: namespace)) { handler($0.data) }
    }

    /// Calls `handler` for every event on this channel, protocol events included, after the
    /// handlers bound to that event's name.
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
    public func unsubscribe() { parts.onUnsubscribe(name) }

    // MARK: - Used by the client

    private func add(event: String?, _ handler: @escaping @Sendable (RealtimeEvent) -> Void) -> ObservationToken {
        let id = state.withLock { $0.add(handler, for: event) }
        return ObservationToken { [weak self] in
            self?.state.withLock { $0.remove(id) }
        }
    }

    /// Queues `event` for this channel's handlers on the delivery queue. Call in arrival order
    /// (the connection's single drainer calls it, so order is kept across threads).
    func enqueue(_ event: RealtimeEvent) {
        parts.outbox.enqueue(contentsOf: [.channel(self, event)])
    }

    /// Runs the handlers for `event`, on the delivery queue (the outbox's drain).
    func deliver(_ event: RealtimeEvent) {
        let (named, all) = state.withLock { $0.handlers(for: event.event) }
        for entry in named { entry.handler(event) }
        for entry in all { entry.handler(event) }
    }
}
