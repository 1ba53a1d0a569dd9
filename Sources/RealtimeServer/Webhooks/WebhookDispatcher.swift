import Dispatch
import Foundation
import SystemSupport
import RealtimeProtocol

/// Posts webhook events to each app's `webhookURL`, signed as Pusher signs them: a JSON body
/// `{"time_ms": …, "events": [WebhookEvent…]}` with `X-Pusher-Key` (the app key) and
/// `X-Pusher-Signature` (hex HMAC-SHA256 of the body under the app secret), so Pusher's server
/// libraries (`pusher.validate_webhook` in Python) accept them.
///
/// Bounded: at most `maxQueued` events and `maxQueuedBytes` bytes of them wait per app and
/// class (membership events, message events; see `enqueue`); past either new events are dropped and
/// counted (`dropped`), with one log line per 1,000. A batch that fails (no 2xx, no answer
/// within `timeout`) is retried after 1 s, 2 s, 4 s … (at most 30 s) up to `maxAttempts`
/// times, then counted as `failed` and logged. One request per queue is in flight at a time
/// (libcurl ends it at `timeout`; an answer body over 64 KiB fails it),
/// so events reach the backend in order.
public final class WebhookDispatcher: Sendable {
    /// Limits and timings.
    public struct Configuration: Sendable {
        /// Events waiting per app and class before new ones are dropped.
        public var maxQueued = 10_000
        /// Bytes of events (`WebhookEvent.size`) waiting per app and class before new ones are
        /// dropped (8 MiB): 10,000 room events of 10 KB would otherwise hold 100 MB while a
        /// backend does not answer.
        public var maxQueuedBytes = 8 * 1024 * 1024
        /// Events per request.
        public var maxBatch = 100
        /// Tries per batch.
        public var maxAttempts = 5
        /// The first retry's delay; each next one doubles, up to `maxRetryDelay`.
        public var firstRetryDelay: Duration = .seconds(1)
        /// The longest delay between tries.
        public var maxRetryDelay: Duration = .seconds(30)
        /// How long one request may take.
        public var timeout: Duration = .seconds(10)

        /// The defaults.
        public init() {}
    }

    /// What happened to the events so far.
    public struct Counts: Hashable, Sendable {
        /// Events the backend answered 2xx for.
        public var delivered = 0
        /// Events refused at the queue's limit.
        public var dropped = 0
        /// Events given up after `maxAttempts`.
        public var failed = 0
        /// Requests sent (tries included).
        public var requests = 0

        /// All zero.
        public init() {}
    }

    struct State {
        var queues: [String: WebhookQueue] = [:]
        var counts = Counts()
        var stopped = false
    }

    private let configuration: Configuration
    private let state = Locked(State())
    private let queue = DispatchQueue(label: "WebhookDispatcher")
    private let wallClock: @Sendable () -> Int64
    private let log: (@Sendable (String) -> Void)?

    /// Creates a dispatcher.
    ///
    /// - Parameters:
    ///   - configuration: limits and timings.
    ///   - wallClock: milliseconds since 1970, for `time_ms`.
    ///   - log: one line per failure or drop, or `nil`.
    public init(configuration: Configuration = Configuration(),
                wallClock: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) },
                log: (@Sendable (String) -> Void)? = nil) {
        self.configuration = configuration
        self.wallClock = wallClock
        self.log = log
    }

    /// The counts so far.
    public var counts: Counts { state.withLock { $0.counts } }

    /// Events waiting (all apps).
    public var queued: Int { state.withLock { $0.queues.values.reduce(0) { $0 + $1.count } } }

    /// Bytes of events waiting (all apps), as `WebhookEvent.size` counts them.
    public var queuedBytes: Int { state.withLock { $0.queues.values.reduce(0) { $0 + $1.bytes } } }

    /// Queues one event for `app`'s webhook; never blocks. Ignored for an app without a URL.
    /// Membership events (occupied/vacated, member added/removed) and message events
    /// (`client_event`, `room_event`) wait in separate queues, so churn in the one never drops
    /// the other; each is delivered in order.
    public func enqueue(_ event: WebhookEvent, for app: RealtimeApp) {
        guard app.webhookURL != nil else { return }
        let queueKey = "\(app.id)\u{0}\(event.name == "client_event" || event.name == "room_event" ? "events" : "membership")"
        enum Outcome { case queued, start, dropped(log: String?) }
        let outcome = state.withLock { state -> Outcome in
            guard !state.stopped else { return .dropped(log: nil) }
            // In place: a copy of the queue per event cost every event the whole queue.
            let admitted = state.queues[queueKey, default: WebhookQueue(app: app)]
                .admit(event, maxEvents: configuration.maxQueued, maxBytes: configuration.maxQueuedBytes)
            guard admitted else {
                state.counts.dropped += 1
                guard state.counts.dropped % 1000 == 1 else { return .dropped(log: nil) }
                return .dropped(log: "webhook queue for app \(app.id) full (\(configuration.maxQueued) events or \(configuration.maxQueuedBytes) bytes): \(state.counts.dropped) event(s) dropped so far")
            }
            guard state.queues[queueKey]?.sending == false else { return .queued }
            state.queues[queueKey]?.sending = true
            return .start
        }
        switch outcome {
        case .start: queue.async { self.sendNext(appID: queueKey, attempt: 1) }
        case .dropped(let line?): log?(line)
        case .queued, .dropped(nil): break
        }
    }

    /// Stops sending; queued events are dropped. Calling it again does nothing.
    public func stop() {
        state.withLock { $0.stopped = true; $0.queues = [:] }
    }

    /// Sends the head batch of an app's queue, or marks the queue idle when empty.
    private func sendNext(appID queueKey: String, attempt: Int) {
        let batch = state.withLock { state -> (RealtimeApp, [WebhookEvent])? in
            guard !state.stopped, let entry = state.queues[queueKey] else { return nil }
            guard entry.count > 0 else {
                state.queues[queueKey]?.sending = false
                return nil
            }
            state.counts.requests += 1
            return (entry.app, entry.head(configuration.maxBatch))
        }
        guard let (app, events) = batch, let url = app.webhookURL else { return }
        let body = Self.body(timeMS: wallClock(), events: events)
        let headers = [
            "Content-Type: application/json",
            // No `Expect: 100-continue` (libcurl's default for bodies over 1 KiB): a backend that
            // does not answer it would cost every request a second.
            "Expect:",
            "X-Pusher-Key: \(app.key)",
            "X-Pusher-Signature: \(Crypto.hex(Crypto.hmacSHA256(key: app.secret, message: body)))",
        ]
        let timeout = configuration.timeout
        // One blocking request at a time per queue, on a thread of its own: libcurl ends it at
        // the deadline, so no two requests of a queue are ever in flight.
        DispatchQueue.global().async {
            let status = WebhookPoster.post(url: url, body: Array(body.utf8), headers: headers, timeout: timeout)
            self.queue.async { self.completed(appID: queueKey, count: events.count, status: status, attempt: attempt) }
        }
    }

    private func completed(appID: String, count: Int, status: Int?, attempt: Int) {
        if let status, (200...299).contains(status) {
            state.withLock { state in
                Self.removeHead(count, of: appID, in: &state)
                state.counts.delivered += count
            }
            sendNext(appID: appID, attempt: 1)
            return
        }
        guard attempt < configuration.maxAttempts else {
            state.withLock { state in
                Self.removeHead(count, of: appID, in: &state)
                state.counts.failed += count
            }
            log?("webhook for app \(appID.prefix { $0 != "\u{0}" }): \(count) event(s) given up after \(attempt) tries (last: \(status.map { "HTTP \($0)" } ?? "no answer"))")
            sendNext(appID: appID, attempt: 1)
            return
        }
        var delay = configuration.firstRetryDelay
        for _ in 1..<attempt { delay = min(delay * 2, configuration.maxRetryDelay) }
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(delay.seconds * 1e9))) {
            self.sendNext(appID: appID, attempt: attempt + 1)
        }
    }
}

extension WebhookDispatcher {
    /// Removes a sent batch from the head of an app's queue (`stop()` may have emptied it).
    /// A request's body: `{"time_ms": …, "events": […]}` (Pusher's webhook format).
    static func body(timeMS: Int64, events: [WebhookEvent]) -> String {
        struct Body: Encodable {
            var timeMS: Int64
            var events: [WebhookEvent]
            enum CodingKeys: String, CodingKey {
                case timeMS = "time_ms"
                case events
            }
        }
        // WebhookEvent's fields are strings and integers: it always encodes.
        return (try? RealtimeMessage.jsonText(Body(timeMS: timeMS, events: events))) ?? "{}"
    }

    fileprivate static func removeHead(_ count: Int, of appID: String, in state: inout State) {
        state.queues[appID]?.removeHead(count)
    }
}
