import Dispatch
import SystemSupport
import Reachability
import Realtime
import RealtimeProtocol
import RealtimeServer
import Reconnect
import ReconnectTesting
import Testing
import NetworkLab

/// `BirdRealtime` across a private network (root): the client, its `WebSocketTransport` and its
/// netlink reachability live in the lab's local namespace, the reference server in the remote one.
///
///     local: veth0 192.0.2.2/24  <->  remote: peer0 192.0.2.1/24 (RealtimeServer)
///
/// The backoff is 60 s (base and cap) with a seeded random source whose first delay is 37 s, so
/// a reconnection within seconds can only come from reachability. Waits poll real time with
/// 10 s bounds; the measured times are asserted.
@Suite(.serialized, .enabled(if: NetworkLab.shouldRunTests, "needs root and ip netns: \(NetworkLab.unavailableReason ?? "")"))
struct NetworkLabRealtimeTests {
    /// The app the lab's server serves.
    static let app = RealtimeApp(id: "lab", key: "lab-key", secret: "lab-secret")
    /// The server's address, on the remote end of the veth link.
    static let serverAddress = "192.0.2.1"

    /// What the client reported, each with the instant it was seen (on the delivery queue for
    /// states and events, synchronously for reconnector events).
    final class Timeline: Sendable {
        /// Everything recorded, in arrival order per kind.
        private struct Entries {
            /// State transitions with the instant each was seen.
            var states: [(state: ConnectionState, at: ContinuousClock.Instant)] = []
            /// The reconnector's events.
            var reconnect: [ReconnectEvent] = []
            /// The data of delivered `tick` events.
            var received: [String] = []
            /// Connection-level errors.
            var errors: [RealtimeError] = []
        }

        /// The record, written from the delivery queue and the reconnector's threads.
        private let entries = Locked(Entries())

        /// Records a state transition.
        func record(state: ConnectionState) {
            let now = ContinuousClock.now
            entries.withLock { $0.states.append((state, now)) }
        }

        /// Records a reconnector event.
        func record(_ event: ReconnectEvent) { entries.withLock { $0.reconnect.append(event) } }

        /// Records the data of a delivered event.
        func record(received data: String) { entries.withLock { $0.received.append(data) } }

        /// Records a connection-level error.
        func record(_ error: RealtimeError) { entries.withLock { $0.errors.append(error) } }

        /// The states so far, in order.
        var states: [ConnectionState] { entries.withLock { $0.states.map(\.state) } }
        /// The reconnector's events so far, in order.
        var reconnect: [ReconnectEvent] { entries.withLock { $0.reconnect } }
        /// The data of the events delivered so far, in order.
        var received: [String] { entries.withLock { $0.received } }
        /// The connection-level errors so far, in order.
        var errors: [RealtimeError] { entries.withLock { $0.errors } }

        /// When the client first entered `state` at or after `start`, if it has.
        func firstTime(of state: ConnectionState, since start: ContinuousClock.Instant) -> ContinuousClock.Instant? {
            entries.withLock { $0.states.first { $0.state == state && $0.at >= start }?.at }
        }
    }

    /// The lab, the server in `remote`, and a client in `local` subscribed to `prices`.
    final class LabClient: Sendable {
        /// The two namespaces and the veth link between them.
        let lab: NetworkLab
        /// The reference server, listening on 192.0.2.1 in `remote`.
        let server: RealtimeServer
        /// The client's transport, whose service thread runs in `local`.
        let transport: WebSocketTransport
        /// The client, whose netlink reachability watches 192.0.2.1 from `local`.
        let bird: BirdRealtime
        /// The client's `prices` channel.
        let channel: RealtimeChannel
        /// What the client reported.
        let timeline = Timeline()
        /// The handlers' registrations, cancelled by `close()`.
        private let tokens: [ObservationToken]

        /// Makes the lab (veth0 192.0.2.2/24 in `local`, peer0 192.0.2.1/24 in `remote`), starts
        /// the server in `remote` and makes the client in `local`, subscribed but not connected.
        ///
        /// - Throws: `NetworkLabError` when the lab cannot be made, `WebSocketError` when the
        ///   server or the transport cannot start.
        init() throws {
            let lab = try NetworkLab()
            try lab.addVethLink("veth0", peer: "peer0")
            try lab.local.addAddress("192.0.2.2/24", to: "veth0")
            try lab.remote.addAddress("\(NetworkLabRealtimeTests.serverAddress)/24", to: "peer0")
            // The listener's socket and the server's service thread belong to `remote`.
            let server = try lab.remote.run {
                try RealtimeServer(options: RealtimeServerOptions(
                    host: NetworkLabRealtimeTests.serverAddress, port: 0, apps: [NetworkLabRealtimeTests.app]))
            }
            var options = BirdRealtime.Options(appKey: NetworkLabRealtimeTests.app.key, host: NetworkLabRealtimeTests.serverAddress, port: server.port)
            options.deliveryQueue = DispatchQueue(label: "NetworkLabRealtimeTests.delivery")
            // Far beyond every wait below: only reachability can explain a reconnection in seconds.
            options.backoff = ExponentialBackoff(base: .seconds(60), cap: .seconds(60))
            let clientOptions = options
            // The transport's service thread (so every socket it opens) and the client's netlink
            // reachability, made by `BirdRealtime.init`, belong to `local`.
            let (transport, bird) = try lab.local.run {
                let transport = WebSocketTransport()
                try transport.start()
                // SplitMix64 with seed 8 draws 37 s, 36 s, 41 s … from 0…60 s.
                let bird = BirdRealtime(options: clientOptions, transport: transport, random: SeededRandomNumberGenerator(seed: 8))
                return (transport, bird)
            }
            let channel = bird.subscribe("prices")
            let timeline = timeline
            tokens = [
                bird.onConnectionStateChange { _, current in timeline.record(state: current) },
                bird.onError { timeline.record($0) },
                bird.reconnector.onEvent { timeline.record($0) },
                channel.bind("tick") { timeline.record(received: $0.data ?? "") },
            ]
            self.lab = lab
            self.server = server
            self.transport = transport
            self.bird = bird
            self.channel = channel
        }

        /// Disconnects the client, stops the server and deletes the namespaces.
        func close() {
            for token in tokens { token.cancel() }
            bird.disconnect()
            transport.shutdown()
            server.shutdown(grace: .zero)
            lab.close()
        }

        /// Waits, polling real time every 5 ms, until `condition` holds.
        ///
        /// - Throws: `LabTimeout` (after recording an issue with the client's history) when it
        ///   does not hold within `timeout`.
        func waitUntil(_ what: String, timeout: Duration = .seconds(10), _ condition: @Sendable () -> Bool) async throws {
            let deadline = ContinuousClock.now + timeout
            while !condition() {
                guard ContinuousClock.now < deadline else {
                    Issue.record("timed out after \(timeout) waiting for \(what); states \(timeline.states), reconnector \(timeline.reconnect), errors \(timeline.errors)")
                    throw LabTimeout()
                }
                try await Task.sleep(for: .milliseconds(5))
            }
        }

        /// Waits until the client is connected and the server confirmed `prices`.
        func waitSubscribed() async throws {
            try await waitUntil("connected and subscribed") { self.bird.connectionState == .connected && self.channel.subscribed }
        }

        /// Publishes one `tick` on `prices` from the server and waits until the client got it.
        func roundTrip(_ data: String) async throws {
            // After a path loss the server still holds the dead connection until it notices (its
            // activity timeout, or a reset once the path is back), so it may queue two frames.
            #expect(server.hub.publish(appID: NetworkLabRealtimeTests.app.id, channels: ["prices"], event: "tick", data: data) >= 1)
            try await waitUntil("the event \(data)") { self.timeline.received.last == data }
        }

        /// Runs `change` with the client connected and measures how long until `unavailable`.
        ///
        /// - Returns: when `change` started, and the time from then to `unavailable`.
        func measureLoss(_ change: () throws -> Void) async throws -> (start: ContinuousClock.Instant, elapsed: Duration) {
            let start = ContinuousClock.now
            try change()
            try await waitUntil("unavailable") { self.timeline.firstTime(of: .unavailable, since: start) != nil }
            return (start, try #require(timeline.firstTime(of: .unavailable, since: start)) - start)
        }

        /// Runs `change` with the client unavailable and measures how long until `connected`,
        /// waiting afterwards for the resubscription.
        ///
        /// - Returns: the time from the start of `change` to `connected`.
        func measureReturn(_ change: () throws -> Void) async throws -> Duration {
            let start = ContinuousClock.now
            try change()
            try await waitUntil("connected") { self.timeline.firstTime(of: .connected, since: start) != nil }
            try await waitSubscribed()
            return try #require(timeline.firstTime(of: .connected, since: start)) - start
        }

        /// The triggers of the attempts started after the first `mark` reconnector events.
        func attemptTriggers(after mark: Int) -> [ReconnectEvent.Trigger] {
            timeline.reconnect.dropFirst(mark).compactMap { if case .attemptStarted(_, let trigger) = $0 { trigger } else { nil } }
        }

        /// The backoff delays scheduled after the first `mark` reconnector events.
        func scheduledDelays(after mark: Int) -> [Duration] {
            timeline.reconnect.dropFirst(mark).compactMap { if case .scheduled(_, let delay) = $0 { delay } else { nil } }
        }
    }

    /// A bounded wait ran out (the issue is already recorded).
    struct LabTimeout: Error {}

    /// Loses the path with `loss`, keeps it lost at least 1.2 s (past the kernel's 1 s
    /// linkwatch rate limit, so the carrier's return is normally reported at once; link changes
    /// in other namespaces share that limit and can still defer it by up to 1 s), restores it
    /// with `restore`, and checks the timings and the trigger.
    ///
    /// - Parameters:
    ///   - client: a connected, subscribed client.
    ///   - lossLimit: the longest acceptable time from `loss` to `unavailable`.
    ///   - loss: takes the path away.
    ///   - restore: gives it back.
    func lossAndReturn(_ client: LabClient, lossLimit: Duration, loss: () throws -> Void, restore: () throws -> Void) async throws {
        try await client.roundTrip("before")
        let lossMark = client.timeline.reconnect.count
        let (lossStart, toUnavailable) = try await client.measureLoss(loss)
        #expect(toUnavailable < lossLimit, "path lost → unavailable took \(toUnavailable)")
        // The state reaches the delivery queue before the reconnector has necessarily handled
        // the disconnect on the timer's thread: wait for the retry it schedules.
        try await client.waitUntil("the backoff scheduled") { !client.scheduledDelays(after: lossMark).isEmpty }
        let afterLoss = client.timeline.reconnect.dropFirst(lossMark)
        #expect(afterLoss.contains { if case .verifyingConnection = $0 { true } else { false } }, "the path change made the client probe its socket")
        #expect(client.timeline.errors.contains { $0.kind == .pongTimeout }, "the dead socket was found by the probe's pong deadline")
        let delays = client.scheduledDelays(after: lossMark)
        try #require(delays.first.map { $0 > .seconds(10) } == true, "the seeded backoff must schedule its retry far beyond this test: \(delays)")

        try await Task.sleep(until: lossStart + .milliseconds(1200), clock: .continuous)
        let returnMark = client.timeline.reconnect.count
        let toConnected = try await client.measureReturn(restore)
        #expect(toConnected < .seconds(3), "path back → connected took \(toConnected); the backoff timer was \(delays)")
        #expect(client.attemptTriggers(after: returnMark) == [.reachability], "one attempt, started by reachability")
        #expect(client.timeline.reconnect.dropFirst(returnMark).contains { if case .succeeded = $0 { true } else { false } })
        try await client.roundTrip("after")
        #expect(client.timeline.received == ["before", "after"])
    }

    /// The set-up itself: every socket where it should be, an event end to end.
    @Test("the client in the local namespace connects to the server in the remote one, subscribes and receives")
    func connectsAcrossTheLink() async throws {
        let client = try LabClient()
        defer { client.close() }
        client.bird.connect()
        try await client.waitSubscribed()
        // On-link without a gateway: the reachability source lives in the local namespace.
        #expect(client.bird.reconnector.flags.isSuperset(of: [.reachable, .isDirect]))
        #expect(client.bird.reconnector.reachabilityError == nil)
        try await client.roundTrip(#"{"seq":1,"p":1.5}"#)
        #expect(client.timeline.states == [.connecting, .connected])
    }

    /// `ip link set veth0 down`, then up (the link's admin state, on the client's side).
    @Test("link down: unavailable within 2 s by the path-change probe; link up: connected by reachability, not the 60 s backoff")
    func linkDownAndUp() async throws {
        let client = try LabClient()
        defer { client.close() }
        client.bird.connect()
        try await client.waitSubscribed()
        // Admin down is announced at once (no linkwatch): about the 1 s pong deadline.
        try await lossAndReturn(client, lossLimit: .seconds(2),
                                loss: { try client.lab.local.setLink("veth0", up: false) },
                                restore: { try client.lab.local.setLink("veth0", up: true) })
    }

    /// The far end of the veth pair down, then up: veth0 stays up without carrier, its route
    /// stays (marked linkdown) and the socket looks alive, as when a cable is pulled.
    @Test("carrier loss: unavailable within 3 s (linkwatch, then the path-change probe); carrier back: connected by reachability")
    func carrierLossAndReturn() async throws {
        let client = try LabClient()
        defer { client.close() }
        client.bird.connect()
        try await client.waitSubscribed()
        // A carrier change reaches netlink through the kernel's linkwatch, which defers it by up
        // to 1 s after its previous run (a global limit, shared with every other namespace):
        // up to 1 s more than an admin down.
        try await lossAndReturn(client, lossLimit: .seconds(3),
                                loss: { try client.lab.setCarrier(of: "veth0", present: false) },
                                restore: { try client.lab.setCarrier(of: "veth0", present: true) })
    }
}
