import Dispatch
import Foundation
import SystemSupport
import Reachability
import RealtimeProtocol

/// A room the app joined (rooms seed, "Joining"): `bird.join("order:1042")` gives the same
/// object for the same name until it is left.
///
/// ```swift
/// let order = bird.join("order:1042")
/// order.on("updated") { data, meta in status = data["status"]?.string ?? status }
/// try await order.ready()
/// ```
///
/// The client keeps the room's position (epoch, last id) and token across drops, server
/// restarts and moves: after a reconnect it rejoins from the position, and the events missed
/// meanwhile come first, in order, with `meta.replayed`, then the live ones; an event already
/// delivered never comes twice (docs/rooms-protocol.md "Replay").
///
/// Handlers run in arrival order. `on` and `onAny` handlers are main-actor isolated (the
/// seed's handlers mutate app state), so they run on the main queue: on the delivery queue
/// itself when it is `.main` (the default), else hopped to main in order. `bind` and `bindAll`
/// take `@Sendable` handlers that run on the delivery queue, whatever it is.
public final class Room: Sendable {
    /// Where a room stands (rooms seed: `.joining, .joined, .failed, .left`).
    public enum State: String, Sendable, Hashable {
        /// Asking for its token, joining, or rejoining after a drop.
        case joining
        /// Joined on the current connection: events are live.
        case joined
        /// Refused (`error` says why: `forbidden`, `no_rule`, `full`, `kicked` …); not rejoined
        /// until the app calls `join` again.
        case failed
        /// The app left it.
        case left
    }

    /// What a room needs from its connection.
    struct Parts: Sendable {
        var outbox: DeliveryOutbox
        var record: @Sendable (String) -> RoomTable.Record?
        var members: @Sendable (String) -> [String: RoomMember]
        var leave: @Sendable (String) -> Void
        var send: @Sendable (_ room: String, _ event: String, _ data: String) -> RoomError?
        var history: @Sendable (_ room: String, _ before: UInt64?, _ limit: Int) async -> Result<RoomHistoryPage, RoomError>
        var report: @Sendable (RealtimeError) -> Void
        var isCurrent: @Sendable (Room) -> Bool
        /// Why nothing will join until the app calls `connect()` (the connection failed, or
        /// `disconnect()`), or `nil` while it connects or will.
        var stalled: @Sendable () -> RoomError?
    }

    private enum Handler {
        case main(@MainActor @Sendable (String, JSONValue, RoomEventMeta) -> Void)
        case queue(@Sendable (String, JSONValue, RoomEventMeta) -> Void)
    }


    private struct Handlers {
        var table = HandlerTable<Handler>()
        /// `ready()` waiters, by a key from `lastWaiter`.
        var lastWaiter: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, any Error>] = [:]
        /// The app left the room: queued deliveries reach no handler.
        var left = false
    }

    /// The room name (`order:1042`).
    public let name: String
    private let parts: Parts
    private let handlers = Locked(Handlers())

    /// Most events an `events(_:)` sequence holds for a consumer that falls behind; past it,
    /// new events are not added to that sequence and the client reports it (`onError`).
    public static let maxBufferedEvents = 10_000

    init(name: String, parts: Parts) {
        self.name = name
        self.parts = parts
    }

    // MARK: - State

    /// Where the room stands now.
    public var state: State {
        guard parts.isCurrent(self), let record = parts.record(name) else { return .left }
        return record.state
    }

    /// Why the room failed, or the last refusal or unrecovered gap it reported; `nil` otherwise.
    public var error: RoomError? {
        guard parts.isCurrent(self) else { return RoomError(.left, "the room was left") }
        return parts.record(name)?.error
    }

    /// The room's position on this client: the epoch and the id of the last kept event
    /// delivered (or of the room when it was joined); `nil` before the first `joined`.
    public var position: RoomPosition? { parts.isCurrent(self) ? parts.record(name)?.position : nil }

    /// A presence room's members, sorted by id; replaced at every (re)join, so a member who
    /// left while the client was away is gone.
    public var members: [RoomMember] {
        guard parts.isCurrent(self) else { return [] }
        return parts.members(name).values.sorted { $0.id < $1.id }
    }

    /// The room's users, from `joined` and the `count` events; `nil` before the first `joined`.
    public var count: Int? { parts.isCurrent(self) ? parts.record(name)?.count : nil }

    /// Waits until the room is joined (rooms seed: "waits until joined, throws its error").
    ///
    /// - Throws: `RoomError`: the room's error when it fails (`forbidden`, `no_rule`, `full`,
    ///   `kicked` …), `left` when it is left, `cancelled` when the calling task is cancelled.
    public func ready() async throws(RoomError) {
        let key = handlers.withLock { state -> UInt64 in
            state.lastWaiter += 1
            return state.lastWaiter
        }
        do {
            try await withTaskCancellationHandler {
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    // The room's state is read under the handlers' lock: `settle` runs after the
                    // machine changed the state, so either this read sees the new state or the
                    // settlement finds the waiter.
                    let outcome = handlers.withLock { handlers -> Result<Void, RoomError>? in
                        switch state {
                        case .joined: return .success(())
                        case .failed: return .failure(error ?? RoomError(.unknown, "failed"))
                        case .left: return .failure(RoomError(.left, "the room was left"))
                        case .joining:
                            // The connection will not join it by itself: answered now, read under
                            // the handlers' lock as `settle` runs, so a settlement is never missed.
                            if let stalled = parts.stalled() { return .failure(stalled) }
                            // Cancelled before this registration: the cancellation handler found
                            // no waiter (it takes the same lock), so answer here.
                            if Task.isCancelled { return .failure(RoomError(.cancelled, "the waiting task was cancelled")) }
                            handlers.waiters[key] = continuation
                            return nil
                        }
                    }
                    if let outcome { continuation.resume(with: outcome.mapError { $0 as any Error }) }
                }
            } onCancel: {
                handlers.withLock { $0.waiters.removeValue(forKey: key) }?.resume(throwing: RoomError(.cancelled, "the waiting task was cancelled"))
            }
        } catch let error as RoomError {
            throw error
        } catch {
            throw RoomError(.cancelled, "\(error)")
        }
    }

    /// Leaves the room: `room_leave` is sent when joined, the room is never rejoined, and
    /// `bird.room(name)` is `nil`. Same as `bird.leave(name)`.
    public func leave() {
        guard parts.isCurrent(self) else { return }
        parts.leave(name)
    }

    // MARK: - Handlers

    /// Calls `handler(data, meta)` on the main actor for every `event` of the room, in order.
    /// The room's own events are heard by name too: `joined` (every (re)join, data `{epoch, id,
    /// count, members?, recovered?, reason?}`), `join`, `leave`, `count` (`{n}`), `error`
    /// (`{code, message}`), `kicked`.
    ///
    /// - Parameters:
    ///   - event: the event name.
    ///   - handler: receives the event's data (opened, in a sealed room) and meta.
    /// - Returns: the listener, for `off(_:)`.
    @discardableResult
    public func on(_ event: String, _ handler: @escaping @MainActor @Sendable (JSONValue, RoomEventMeta) -> Void) -> RoomListener {
        add(event: event, .main { _, data, meta in handler(data, meta) })
    }

    /// Calls `handler(event, data, meta)` on the main actor for every event of the room, the
    /// room's own included, after the handlers of that event's name.
    ///
    /// - Returns: the listener, for `off(_:)`.
    @discardableResult
    public func onAny(_ handler: @escaping @MainActor @Sendable (String, JSONValue, RoomEventMeta) -> Void) -> RoomListener {
        add(event: nil, .main(handler))
    }

    /// `on` for a handler that is not main-actor isolated: it runs on the client's delivery
    /// queue (`Options.deliveryQueue`), in order with every other delivery.
    ///
    /// - Returns: the listener, for `off(_:)`.
    @discardableResult
    public func bind(_ event: String, _ handler: @escaping @Sendable (JSONValue, RoomEventMeta) -> Void) -> RoomListener {
        add(event: event, .queue { _, data, meta in handler(data, meta) })
    }

    /// `onAny` for a handler that runs on the delivery queue.
    ///
    /// - Returns: the listener, for `off(_:)`.
    @discardableResult
    public func bindAll(_ handler: @escaping @Sendable (String, JSONValue, RoomEventMeta) -> Void) -> RoomListener {
        add(event: nil, .queue(handler))
    }

    /// Removes a handler; events already queued for it are not delivered to it.
    public func off(_ listener: RoomListener) {
        handlers.withLock { $0.table.remove(listener.id) }
    }

    /// Every `event` of the room from now on, as an async sequence of (data, meta). The
    /// sequence ends when the consuming task is cancelled, and its handler is removed with it.
    /// It holds at most `maxBufferedEvents` for a consumer that falls behind; an event that
    /// does not fit is reported through the client's `onError`, never dropped silently.
    public func events(_ event: String) -> AsyncStream<(JSONValue, RoomEventMeta)> {
        stream(event) { data, _ in data }
    }

    /// Every `event` of the room from now on, each decoded into `T` (rooms seed: `for await
    /// (update, meta) in order.events("updated", as: OrderUpdate.self)`). An event whose data
    /// does not decode is skipped and reported through the client's `onError` (kind `.room`).
    public func events<T: Decodable & Sendable>(_ event: String, as type: T.Type) -> AsyncStream<(T, RoomEventMeta)> {
        stream(event) { data, meta in
            try JSONDecoder().decode(T.self, from: JSONEncoder().encode(data))
        }
    }

    private func stream<T: Sendable>(_ event: String, _ transform: @escaping @Sendable (JSONValue, RoomEventMeta) throws -> T) -> AsyncStream<(T, RoomEventMeta)> {
        let (stream, continuation) = AsyncStream.makeStream(of: (T, RoomEventMeta).self, bufferingPolicy: .bufferingOldest(Self.maxBufferedEvents))
        let name = name
        let report = parts.report
        let listener = bind(event) { data, meta in
            let value: T
            do {
                value = try transform(data, meta)
            } catch {
                report(RealtimeError(kind: .room, message: "\(name): event \(meta.id) (\(event)) skipped by events(as: \(T.self)): it does not decode: \(error)"))
                return
            }
            if case .dropped = continuation.yield((value, meta)) {
                report(RealtimeError(kind: .room, message: "\(name): event \(meta.id) (\(event)) not added to a sequence whose consumer is \(Self.maxBufferedEvents) events behind"))
            }
        }
        continuation.onTermination = { [weak self] _ in self?.off(listener) }
        return stream
    }

    // MARK: - Sending and history

    /// Sends an event into the room, where its rule lets members send (`members_send`). The
    /// server keeps it and sends it to every member, this client included; a refusal arrives as
    /// an `error` event (`not_allowed`, `rate_limited` …). In a sealed room the data is sealed
    /// with the room's key first.
    ///
    /// - Parameters:
    ///   - event: the event name: 1…200 bytes, none of the room's own event names.
    ///   - data: the event's data.
    /// - Throws: `RoomError` `notJoined` (not joined now), `notAllowed` (a reserved or invalid
    ///   name), `badRequest` (data over 10 KiB), `badData` (data that cannot be encoded).
    public func send(_ event: String, data: JSONValue) throws(RoomError) {
        let text: String
        do {
            text = try RealtimeMessage.jsonText(data)
        } catch {
            throw RoomError(.badData, "the data cannot be encoded as JSON: \(error)")
        }
        guard parts.isCurrent(self) else { throw RoomError(.left, "the room was left") }
        if let error = parts.send(name, event, text) { throw error }
    }

    /// A page of the room's history (rooms seed, "Paging back"): the newest `limit` events
    /// before `before` (all kept events when `nil`), oldest first. Waits until the room is
    /// joined.
    ///
    /// - Parameters:
    ///   - before: an event id (`page.events.first?.meta.id` of a newer page), or `nil`.
    ///   - limit: 1…100 (50 by default).
    /// - Returns: the page; `page.more` when older events are kept.
    /// - Throws: `RoomError`: `no_history` for a room that keeps none, `bad_request` for a
    ///   limit outside 1…100, `disconnected` when the connection dropped before the answer,
    ///   `timed_out` after the auth timeout (10 s), the room's own error when it fails.
    public func history(before: UInt64? = nil, limit: Int = 50) async throws(RoomError) -> RoomHistoryPage {
        try await ready()
        return try await parts.history(name, before, limit).get()
    }

    // MARK: - Used by the connection

    /// Queues `delivery` for the handlers (the connection's single drainer calls this in
    /// arrival order).
    func enqueue(_ delivery: RoomDelivery) {
        parts.outbox.enqueue(contentsOf: [.room(self, delivery)])
    }

    /// Runs the handlers for `delivery`, on the delivery queue (the outbox's drain).
    func deliver(_ delivery: RoomDelivery) {
        let (named, all) = handlers.withLock { state in state.left ? ([], []) : state.table.handlers(for: delivery.event) }
        guard !named.isEmpty || !all.isEmpty else { return }
        // Built here, once, on the delivery queue (the socket thread read only the meta).
        let data = delivery.data
        for entry in named { Self.call(entry.handler, delivery.event, data, delivery.meta) }
        for entry in all { Self.call(entry.handler, delivery.event, data, delivery.meta) }
    }

    /// The app left: nothing queued from now on reaches a handler, and waiters end with `left`.
    func markLeft() { markGone(RoomError(.left, "the room was left")) }

    /// The room is over for good (left, or its client released): nothing queued from now on
    /// reaches a handler, and waiters end with `error`.
    func markGone(_ error: RoomError) {
        handlers.withLock { $0.left = true }
        settle(error)
    }

    /// Answers the `ready()` waiters once the handlers before have run: `nil` when joined.
    func settle(_ error: RoomError?) {
        parts.outbox.enqueue { [self] in
            let waiters = handlers.withLock { state in
                defer { state.waiters = [:] }
                return state.waiters
            }
            for (_, waiter) in waiters.sorted(by: { $0.key < $1.key }) {
                if let error { waiter.resume(throwing: error) } else { waiter.resume() }
            }
        }
    }

    private static func call(_ handler: Handler, _ event: String, _ data: JSONValue, _ meta: RoomEventMeta) {
        switch handler {
        case .queue(let handler):
            handler(event, data, meta)
        case .main(let handler):
            if MainQueue.isCurrent {
                MainActor.assumeIsolated { handler(event, data, meta) }
            } else {
                DispatchQueue.main.async { MainActor.assumeIsolated { handler(event, data, meta) } }
            }
        }
    }

    /// Handlers now (for tests: a sequence's handler ends with its task).
    var listenerCount: Int { handlers.withLock { $0.table.count } }

    private func add(event: String?, _ handler: Handler) -> RoomListener {
        RoomListener(id: handlers.withLock { $0.table.add(handler, for: event) })
    }
}

extension RoomErrorCode {
    /// The task waiting in `ready()` or `history` was cancelled.
    public static let cancelled = RoomErrorCode(rawValue: "cancelled")
    /// A failure without a code.
    public static let unknown = RoomErrorCode(rawValue: "unknown")
}
