import Foundation
import Realtime
import ReconnectTesting
import RealtimeTesting
import Testing

/// A client the app lets go is freed with everything it made (issue 14: bounded memory; found
/// by LeakSanitizer over the whole suite): no cycle through its connection, reconnector,
/// timers or delivery outbox keeps it alive.
@Suite struct ClientReleaseTests {
    @Test("a BirdRealtime connected, subscribed, then disconnected and dropped is freed, with its connection and reconnector")
    func droppedClientIsFreed() {
        let clock = ManualClock()
        let transport = InMemoryTransport()
        let reachability = FakeReachabilitySource(host: .name("realtime.test"), flags: [.reachable])
        let queue = DispatchQueue(label: "ClientReleaseTests.delivery")
        weak var weakBird: BirdRealtime?
        weak var weakConnection: RealtimeConnection?
        do {
            var options = BirdRealtime.Options(appKey: "test-key", host: "realtime.test", port: 6001)
            options.deliveryQueue = queue
            let bird = BirdRealtime(options: options, transport: transport, scheduler: clock,
                                    random: SeededRandomNumberGenerator(seed: 1), reachability: { _ in reachability })
            weakBird = bird
            weakConnection = bird.connection
            bird.onConnectionStateChange { _, _ in }
            _ = bird.subscribe("news").bind("e") { _ in }
            bird.connect()
            transport.latest?.accept()
            transport.latest?.sendHandshake(socketID: "1.1", activityTimeout: 120)
            clock.advance(by: .seconds(1))
            bird.disconnect()
            queue.sync {}
        }
        queue.sync {}
        #expect(weakBird == nil, "the client outlived the app's last reference")
        #expect(weakConnection == nil, "the connection outlived its client")
    }
}
