import Dispatch
import SystemSupport
import Reachability
import Realtime
import RealtimeProtocol
import Reconnect
import ReconnectTesting
import Testing
import RealtimeTesting

/// A `BirdRealtime` on a manual clock, an in-memory transport and a fake reachability source:
/// every test is deterministic, with no sleeps and no network.
final class ClientFixture: Sendable {
    let clock = ManualClock()
    let transport = InMemoryTransport()
    let reachability = FakeReachabilitySource(host: .name("realtime.test"), flags: [.reachable])
    let queue = DispatchQueue(label: "ClientFixture.delivery")
    let bird: BirdRealtime
    private let recorded = Locked<(changes: [ConnectionStateChange], errors: [RealtimeError], reconnect: [ReconnectEvent], idAtConnected: [String?])>(([], [], [], []))

    init(seed: UInt64 = 7, random: (any RandomNumberGenerator & Sendable)? = nil, configure: (inout BirdRealtime.Options) -> Void = { _ in }) {
        var options = BirdRealtime.Options(appKey: "test-key", host: "realtime.test", port: 6001)
        options.deliveryQueue = queue
        configure(&options)
        let reachability = reachability
        bird = BirdRealtime(options: options, transport: transport, scheduler: clock,
                            random: random ?? SeededRandomNumberGenerator(seed: seed), reachability: { _ in reachability })
        let recorded = recorded
        // Weak: the connection keeps this handler, so a strong capture would keep both alive
        // after the test (LeakSanitizer found it).
        bird.onConnectionStateChange { [weak connection = bird.connection] previous, current in
            recorded.withLock {
                $0.changes.append(ConnectionStateChange(previous: previous, current: current))
                if current == .connected { $0.idAtConnected.append(connection?.connectionId) }
            }
        }
        bird.onError { error in recorded.withLock { $0.errors.append(error) } }
        _ = bird.reconnector.onEvent { event in recorded.withLock { $0.reconnect.append(event) } }
    }

    /// Waits until every handler queued so far has run.
    func drain() { queue.sync {} }

    var state: ConnectionState { bird.connectionState }
    var states: [ConnectionState] {
        drain()
        return recorded.withLock { $0.changes.map(\.current) }
    }
    var errors: [RealtimeError] {
        drain()
        return recorded.withLock { $0.errors }
    }
    var idsAtConnected: [String?] {
        drain()
        return recorded.withLock { $0.idAtConnected }
    }
    var reconnectEvents: [ReconnectEvent] { recorded.withLock { $0.reconnect } }
    var scheduledDelays: [Duration] {
        reconnectEvents.compactMap { if case .scheduled(_, let delay) = $0 { delay } else { nil } }
    }
    var socket: InMemorySocket { transport.latest! }
    var socketCount: Int { transport.sockets.count }

    /// Accepts the latest socket and sends a handshake.
    func handshake(_ id: String = "1.1", activityTimeout: Int? = 120) {
        socket.accept()
        socket.sendHandshake(socketID: id, activityTimeout: activityTimeout)
    }

    /// `connect()` and a handshake on the first socket.
    func connected(_ id: String = "1.1", activityTimeout: Int? = 120) {
        bird.connect()
        handshake(id, activityTimeout: activityTimeout)
    }

    /// Lets the connection stay up for the client's `stableConnectionDuration` (5 s), so its
    /// drop counts as a healthy connection's: a 42xx is retried at once, the backoff resets.
    func stayUp() {
        clock.advance(by: bird.options.stableConnectionDuration)
    }

    /// Advances the clock to the next timer (the backoff, typically) and returns the wait.
    @discardableResult
    func advanceToNextTimer() -> Duration? {
        guard let deadline = clock.nextDeadline else { return nil }
        let wait = deadline - clock.now
        clock.advance(to: deadline)
        return wait
    }

    /// Sends an app event on `channel` over the latest socket.
    func publish(_ event: String, on channel: String, data: String, socket: InMemorySocket? = nil) {
        (socket ?? self.socket).receive(RealtimeMessage(event: event, channel: channel, data: data))
    }

    /// Confirms a subscription on the latest socket.
    func confirm(_ channel: String) {
        socket.receive(RealtimeMessage(event: ProtocolNamespace.bird.internalEvent(.subscriptionSucceeded), channel: channel, data: "{}"))
    }

    /// The channels the latest (or given) socket was asked to subscribe, in order.
    func subscribes(on socket: InMemorySocket? = nil) -> [String] {
        (socket ?? self.socket).sentMessages.filter { $0.event == "bird:subscribe" }.compactMap {
            try? $0.decodeData(SubscribeRequest.self).channel
        }
    }
}

/// Collects a channel's deliveries.
final class Deliveries: Sendable {
    private let events = Locked<[RealtimeEvent]>([])
    func record(_ event: RealtimeEvent) { events.withLock { $0.append(event) } }
    var all: [RealtimeEvent] { events.withLock { $0 } }
    func named(_ name: String) -> [RealtimeEvent] { all.filter { $0.event == name } }
}

/// Waits (real time, bounded, polling every 2 ms) until `condition` holds: for what tasks,
/// sockets and peers do. On timeout records an issue with `context()` and returns `false`.
@discardableResult
func eventually(_ what: String, timeout: Duration = .seconds(10), context: @Sendable () -> String = { "" },
                _ condition: @Sendable () -> Bool) async -> Bool {
    let deadline = ContinuousClock.now + timeout
    while !condition() {
        if ContinuousClock.now > deadline {
            Issue.record("timed out waiting for \(what) \(context())")
            return false
        }
        try? await Task.sleep(for: .milliseconds(2))
    }
    return true
}
