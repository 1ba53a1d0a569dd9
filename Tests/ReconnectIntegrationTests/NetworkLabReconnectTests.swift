import Dispatch
import Glibc
import Reachability
import ReachabilityNetlink
import Reconnect
import ReconnectTesting
import SampleSupport
import Testing

/// The Reconnector against real network changes: a line server in one namespace, the client
/// and its netlink reachability in another, a veth link between them.
@Suite(.enabled(if: NetworkLab.shouldRunTests, "needs root and ip netns: \(NetworkLab.unavailableReason ?? "")"))
struct NetworkLabReconnectTests {
    @Test("link down: the accidental disconnect is detected; link up: reconnected by the netlink change, not the timer")
    func linkDownAndUp() async throws {
        let lab = try NetworkLab()
        try lab.addVethLink("veth0", peer: "peer0")
        try lab.local.addAddress("192.0.2.2/24", to: "veth0")
        try lab.remote.addAddress("192.0.2.1/24", to: "peer0")
        let server = LineServer(host: "192.0.2.1", openSocket: { family in
            try lab.remote.run { socket(family, Int32(SOCK_STREAM.rawValue), 0) }
        })
        try server.start()
        defer { server.stop() }

        let stream = TCPLineStream(host: "192.0.2.1", port: server.port, openSocket: { family in
            try lab.local.run { socket(family, Int32(SOCK_STREAM.rawValue), 0) }
        })
        stream.pingTimeout = .milliseconds(500)
        let reachabilityQueue = DispatchQueue(label: "lab.reachability")
        // Timers far longer than the test: any reconnection must come from reachability.
        let fixture = ReconnectFixture(stream, reachability: { host in
            try lab.local.run { try NetworkReachability(host: host, deliveryQueue: reachabilityQueue) }
        }) { configuration in
            configuration.reconnectDelay = .seconds(120)
            configuration.reconnectTimerInterval = .seconds(120)
        }
        stream.connect()
        #expect(await fixture.streamEvents.wait(for: .ready))

        let started = ContinuousClock.now
        try lab.local.setLink("veth0", up: false)
        let detected = await fixture.events.wait { if case .accidentalDisconnect = $0 { true } else { false } }
        #expect(detected)
        #expect(fixture.events.values.contains { if case .verifyingConnection = $0 { true } else { false } })

        let before = fixture.events.values.count
        try lab.local.setLink("veth0", up: true)
        #expect(await fixture.events.waitForSuccess(after: before, timeout: .seconds(10)))
        #expect(fixture.events.values.contains(.attemptStarted(attempt: 1, trigger: .reachability)))
        #expect(ContinuousClock.now - started < .seconds(120))
        #expect(stream.send("hello"))
    }
}
