import Dispatch
import SystemSupport
import Realtime
import RealtimeProtocol
import RealtimeServer
import Reconnect
import Testing

/// The client against the reference server over loopback WebSockets, with the server injecting
/// the seed's faults.
@Suite struct EndToEndTests {
    static let app = RealtimeApp(id: "e2e", key: "e2e-key", secret: "e2e-secret", activityTimeout: 120)

    /// A server, a client subscribed to `prices`, and what the client saw.
    final class Harness: Sendable {
        let server: Locked<RealtimeServer>
        let bird: BirdRealtime
        let channel: RealtimeChannel
        let received = Locked<[String]>([])
        let states = Locked<[ConnectionState]>([])
        let errors = Locked<[RealtimeError]>([])
        let queue = DispatchQueue(label: "EndToEndTests.delivery")

        init(appKey: String = EndToEndTests.app.key) throws {
            let server = try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: [EndToEndTests.app]))
            self.server = Locked(server)
            var options = try BirdRealtime.Options(url: "ws://127.0.0.1:\(server.port)/app/\(appKey)")
            options.deliveryQueue = queue
            // Short backoff so that the tests are quick; the policy is the same.
            options.backoff = ExponentialBackoff(base: .milliseconds(50), cap: .milliseconds(200))
            options.watchesReachability = false
            bird = BirdRealtime(options: options)
            channel = bird.subscribe("prices")
            let received = received, states = states, errors = errors
            channel.bind("tick") { event in received.withLock { $0.append(event.data ?? "") } }
            bird.onConnectionStateChange { _, current in states.withLock { $0.append(current) } }
            bird.onError { error in errors.withLock { $0.append(error) } }
        }

        deinit {
            bird.disconnect()
            server.withLock { $0.shutdown(grace: .zero) }
        }

        var port: Int { server.withLock { $0.port } }
        var socketID: String? { bird.connection.connectionId }

        func publish(_ data: String) -> Int {
            server.withLock { $0.hub.publish(appID: EndToEndTests.app.id, channels: ["prices"], event: "tick", data: data) }
        }

        /// Waits (real time, bounded) until the client is connected and subscribed.
        func waitSubscribed() async throws {
            try await waitUntil("subscribed") { self.bird.connectionState == .connected && self.channel.subscribed }
        }

        func waitUntil(_ what: String, timeout: Duration = .seconds(10), _ condition: @Sendable () -> Bool) async throws {
            let states = states, errors = errors
            guard await eventually(what, timeout: timeout, context: { "states \(states.withLock { $0 }), errors \(errors.withLock { $0 })" }, condition) else {
                throw CancellationError()
            }
        }

        /// Publishes `count` events and waits until they all arrived.
        func roundTrip(_ label: String, count: Int = 5) async throws {
            let before = received.withLock { $0.count }
            for index in 0..<count { #expect(publish("\(label)-\(index)") == 1) }
            try await waitUntil("\(count) events") { self.received.withLock { $0.count } == before + count }
            #expect(received.withLock { Array($0.suffix(count)) } == (0..<count).map { "\(label)-\($0)" }, "in publish order")
        }
    }

    @Test("connect, subscribe, receive in order; the id is the server's socket id")
    func basic() async throws {
        let harness = try Harness()
        harness.bird.connect()
        try await harness.waitSubscribed()
        let id = try #require(harness.socketID)
        #expect(id.split(separator: ".").count == 2)
        try await harness.roundTrip("a", count: 50)
    }

    @Test("4201 from the server: reconnect at once, resubscribed, events flow again, no duplicates")
    func closeNow() async throws {
        let harness = try Harness()
        harness.bird.connect()
        try await harness.waitSubscribed()
        let first = try #require(harness.socketID)
        #expect(harness.server.withLock { $0.hub.close(appID: EndToEndTests.app.id, socketID: first, code: 4201, reason: "test") })
        try await harness.waitUntil("a new connection") { harness.socketID != nil && harness.socketID != first && harness.channel.subscribed }
        #expect(!harness.states.withLock { $0 }.contains(.unavailable), "4201 retries at once, without unavailable")
        try await harness.roundTrip("b")
        #expect(harness.received.withLock { $0.count } == 5)
    }

    @Test("a drop without a close frame: unavailable, then back after the backoff")
    func drop() async throws {
        let harness = try Harness()
        harness.bird.connect()
        try await harness.waitSubscribed()
        let first = try #require(harness.socketID)
        #expect(harness.server.withLock { $0.hub.drop(appID: EndToEndTests.app.id, socketID: first) })
        try await harness.waitUntil("a new connection") { harness.socketID != nil && harness.socketID != first && harness.channel.subscribed }
        #expect(harness.states.withLock { $0 }.contains(.unavailable))
        // Errors reach handlers on the delivery queue: the report may follow the state.
        try await harness.waitUntil("the 1006 reported") { harness.errors.withLock { $0 }.contains { $0.code == 1006 } }
        try await harness.roundTrip("c")
    }

    @Test("a server restart on the same port: back once the server is")
    func restart() async throws {
        let harness = try Harness()
        harness.bird.connect()
        try await harness.waitSubscribed()
        let port = harness.port
        harness.server.withLock { $0.shutdown(grace: .milliseconds(50)) }
        try await harness.waitUntil("unavailable") { harness.bird.connectionState == .unavailable }
        try await Task.sleep(for: .milliseconds(300))
        let restarted = try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: UInt16(port), apps: [EndToEndTests.app]))
        harness.server.withLock { $0 = restarted }
        try await harness.waitSubscribed()
        try await harness.roundTrip("d")
    }

    @Test("4009: failed, no retry; connect() makes a new connection and resubscribes")
    func terminated() async throws {
        let harness = try Harness()
        harness.bird.connect()
        try await harness.waitSubscribed()
        let first = try #require(harness.socketID)
        #expect(harness.server.withLock { $0.hub.terminate(appID: EndToEndTests.app.id, socketID: first) })
        try await harness.waitUntil("failed") { harness.bird.connectionState == .failed }
        try await Task.sleep(for: .milliseconds(300))
        #expect(harness.bird.connectionState == .failed, "no retry after 4009")
        #expect(harness.server.withLock { $0.hub.connectionCount } == 0)
        // Errors reach handlers on the delivery queue: the report may follow the state.
        try await harness.waitUntil("the 4009 reported") { harness.errors.withLock { $0 }.contains { $0.code == 4009 } }
        harness.bird.connect()
        try await harness.waitSubscribed()
        #expect(harness.socketID != first)
        try await harness.roundTrip("e")
    }

    @Test("an unknown app key: 4001, failed, no retry")
    func unknownKey() async throws {
        let harness = try Harness(appKey: "no-such-key")
        harness.bird.connect()
        try await harness.waitUntil("failed") { harness.bird.connectionState == .failed }
        // Errors reach handlers on the delivery queue: the report may follow the state.
        try await harness.waitUntil("the 4001 reported") { harness.errors.withLock { $0 }.contains { $0.code == 4001 } }
        try await Task.sleep(for: .milliseconds(300))
        #expect(harness.bird.connectionState == .failed)
    }

    @Test("disconnect() closes with 1000 on the server side and nothing reconnects")
    func disconnect() async throws {
        let harness = try Harness()
        harness.bird.connect()
        try await harness.waitSubscribed()
        harness.bird.disconnect()
        try await harness.waitUntil("the server forgets the connection") { harness.server.withLock { $0.hub.connectionCount } == 0 }
        try await Task.sleep(for: .milliseconds(300))
        #expect(harness.bird.connectionState == .disconnected)
        #expect(harness.server.withLock { $0.hub.connectionCount } == 0)
        harness.bird.connect()
        try await harness.waitSubscribed()
        try await harness.roundTrip("f")
    }
}
