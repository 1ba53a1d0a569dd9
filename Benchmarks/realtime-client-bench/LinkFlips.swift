import Dispatch
import Foundation
import SystemSupport
import Realtime
import RealtimeServer
import Reconnect
import ReconnectTesting
import NetworkLab

/// Records a client's state transitions and reconnector events with the instants they were
/// seen, and wakes waiters on each.
final class ClientTimeline: Sendable {
    /// Everything recorded, in arrival order per kind.
    private struct Entries {
        /// State transitions with the instant each was seen.
        var states: [(state: ConnectionState, at: ContinuousClock.Instant)] = []
        /// The reconnector's events with the instant each was seen.
        var reconnect: [(event: ReconnectEvent, at: ContinuousClock.Instant)] = []
    }

    /// The record, written from the delivery queue and the reconnector's threads.
    private let entries = Locked(Entries())
    /// Signalled once per state transition.
    private let changed = DispatchSemaphore(value: 0)

    /// Records a state transition (called on the delivery queue).
    ///
    /// - Parameter state: the new state.
    func record(state: ConnectionState) {
        let now = ContinuousClock.now
        entries.withLock { $0.states.append((state, now)) }
        changed.signal()
    }

    /// Records a reconnector event.
    ///
    /// - Parameter event: the event.
    func record(_ event: ReconnectEvent) {
        let now = ContinuousClock.now
        entries.withLock { $0.reconnect.append((event, now)) }
    }

    /// Reconnector events so far.
    var reconnectCount: Int { entries.withLock { $0.reconnect.count } }

    /// The last attempt started after the first `mark` reconnector events: its trigger and
    /// when it started.
    ///
    /// - Parameter mark: events to skip.
    /// - Returns: the trigger and the instant, or `nil` when no attempt started.
    func lastAttempt(after mark: Int) -> (trigger: ReconnectEvent.Trigger, at: ContinuousClock.Instant)? {
        entries.withLock { $0.reconnect.dropFirst(mark) }.reversed().lazy.compactMap { entry in
            if case .attemptStarted(_, let trigger) = entry.event { (trigger, entry.at) } else { nil }
        }.first
    }

    /// Waits until the client entered `state` at or after `start`.
    ///
    /// - Parameters:
    ///   - state: the state waited for.
    ///   - start: transitions before this instant do not count.
    ///   - seconds: the longest wait.
    /// - Returns: when the state was entered, or `nil` after the timeout.
    func wait(for state: ConnectionState, since start: ContinuousClock.Instant, seconds: Int) -> ContinuousClock.Instant? {
        let deadline = DispatchTime.now() + .seconds(seconds)
        while true {
            if let found = entries.withLock({ $0.states.first { $0.state == state && $0.at >= start }?.at }) { return found }
            if changed.wait(timeout: deadline) == .timedOut { return nil }
        }
    }
}

/// Link-up → `connected` times of one variant, with the trigger of each successful attempt.
struct FlipResults {
    /// The times, in flip order.
    var times: [Duration] = []
    /// What started the attempt that connected, per flip.
    var triggers: [ReconnectEvent.Trigger?] = []
    /// Link up → the start of the attempt that connected, per flip (for the reachability-driven
    /// client: how long the kernel took to report the path).
    var untilAttempt: [Duration] = []
}

/// Part (b): a `RealtimeServer` in the lab's remote namespace, a `BirdRealtime` (transport,
/// sockets and netlink reachability) in the local one, a veth link between; the local link is
/// set down and up `flips` times and the time from `ip link set veth0 up` to `connected` taken.
struct LinkFlipBenchmark {
    /// The backoff both variants use: base = cap, so every delay is drawn from the cap's range.
    var backoff = ExponentialBackoff(base: .seconds(30), cap: .seconds(30))

    /// Runs one variant.
    ///
    /// - Parameters:
    ///   - reachabilityDriven: `true` for the default client (netlink reachability); `false`
    ///     for `watchesReachability = false`, where only the backoff timer retries.
    ///   - flips: link down/up cycles.
    /// - Returns: the times and triggers, in flip order.
    /// - Throws: `NetworkLabError` when the lab cannot be made, `WebSocketError` when the
    ///   server cannot start, `BenchFailure` when a flip does not complete in time.
    func run(reachabilityDriven: Bool, flips: Int) throws -> FlipResults {
        let lab = try NetworkLab()
        defer { lab.close() }
        try lab.addVethLink("veth0", peer: "peer0")
        try lab.local.addAddress("192.0.2.2/24", to: "veth0")
        try lab.remote.addAddress("192.0.2.1/24", to: "peer0")
        let app = RealtimeApp(id: "bench", key: "bench-key", secret: "bench-secret")
        let server = try lab.remote.run {
            try RealtimeServer(options: RealtimeServerOptions(host: "192.0.2.1", port: 0, apps: [app]))
        }
        defer { server.shutdown(grace: .zero) }
        var options = BirdRealtime.Options(appKey: app.key, host: "192.0.2.1", port: server.port)
        options.deliveryQueue = DispatchQueue(label: "bench.lab.delivery")
        options.backoff = backoff
        // With `reachability:` nil, BirdRealtime.init makes a NetworkReachability only when
        // this is set.
        options.watchesReachability = reachabilityDriven
        let clientOptions = options
        let (transport, bird) = try lab.local.run {
            let transport = WebSocketTransport()
            try transport.start()
            return (transport, BirdRealtime(options: clientOptions, transport: transport))
        }
        defer {
            bird.disconnect()
            transport.shutdown()
        }
        let timeline = ClientTimeline()
        let tokens = [
            bird.onConnectionStateChange { _, current in timeline.record(state: current) },
            bird.reconnector.onEvent { timeline.record($0) },
        ]
        defer { for token in tokens { token.cancel() } }

        let connectStart = ContinuousClock.now
        bird.connect()
        guard timeline.wait(for: .connected, since: connectStart, seconds: 10) != nil else { throw BenchFailure("first connect failed") }
        var results = FlipResults()
        for index in 0..<flips {
            let downStart = ContinuousClock.now
            try lab.local.setLink("veth0", up: false)
            // The reachability-driven client probes by itself when the path goes; the other has
            // no trigger, so the same probe is made by hand: either way the dead socket is found
            // in about `pathChangePongTimeout` and the backoff starts.
            if !reachabilityDriven { bird.connection.verifyConnection() }
            guard timeline.wait(for: .unavailable, since: downStart, seconds: 10) != nil else {
                throw BenchFailure("flip \(index): link down not detected")
            }
            // Down past the kernel's linkwatch rate limit (1 s), so the carrier-up report is not
            // deferred.
            Thread.sleep(forTimeInterval: 1.1 + Double.random(in: 0...0.5))
            let mark = timeline.reconnectCount
            let upStart = ContinuousClock.now
            try lab.local.setLink("veth0", up: true)
            let limit = reachabilityDriven ? 10 : Int(backoff.cap.seconds) + 15
            guard let connected = timeline.wait(for: .connected, since: upStart, seconds: limit) else {
                throw BenchFailure("flip \(index): not connected within \(limit) s of link up")
            }
            let attempt = timeline.lastAttempt(after: mark)
            results.times.append(connected - upStart)
            results.triggers.append(attempt?.trigger)
            if let attempt { results.untilAttempt.append(attempt.at - upStart) }
            progress(String(format: "  flip %d/%d: %.1f ms, attempt at %.1f ms", index + 1, flips, (connected - upStart).milliseconds,
                            ((attempt?.at ?? connected) - upStart).milliseconds)
                + " (\(attempt?.trigger.rawValue ?? "no attempt"))")
        }
        return results
    }
}
