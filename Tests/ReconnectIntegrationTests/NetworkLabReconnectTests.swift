import Dispatch
import Glibc
import Reachability
import ReachabilityNetlink
import Reconnect
import ReconnectTesting
import SampleSupport
import Testing
import NetworkLab
import LineStream

/// The whole product across a private network (root): a `TCPLineStream` whose socket and
/// netlink reachability live in the lab's local namespace, a `LineServer` in the remote one.
///
///     local: veth0 192.0.2.2/24  <->  remote: peer0 192.0.2.1/24 (LineServer)
///
/// Timers are set far longer than the tests, so any reconnection comes from reachability.
@Suite(.enabled(if: NetworkLab.shouldRunTests, "needs root and ip netns: \(NetworkLab.unavailableReason ?? "")"))
struct NetworkLabReconnectTests {
    final class LabLine: Sendable {
        let lab: NetworkLab
        let server: LineServer
        let stream: TCPLineStream
        let fixture: ReconnectFixture<TCPLineStream>

        init(pingTimeout: Duration) throws {
            let lab = try NetworkLab()
            try lab.addVethLink("veth0", peer: "peer0")
            try lab.local.addAddress("192.0.2.2/24", to: "veth0")
            try lab.remote.addAddress("192.0.2.1/24", to: "peer0")
            let socketType = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
            server = LineServer(host: "192.0.2.1", openSocket: { family in try lab.remote.run { socket(family, socketType, 0) } })
            try server.start()
            stream = TCPLineStream(host: "192.0.2.1", port: server.port, openSocket: { family in
                try lab.local.run { socket(family, socketType, 0) }
            })
            stream.pingTimeout = pingTimeout
            let queue = DispatchQueue(label: "NetworkLabReconnectTests.reachability")
            fixture = ReconnectFixture(stream, reachability: { host in
                try lab.local.run { try NetworkReachability(host: host, deliveryQueue: queue) }
            }) { configuration in
                configuration.reconnectDelay = .seconds(120)
                configuration.reconnectTimerInterval = .seconds(120)
                configuration.attemptTimeout = .seconds(5)
            }
            self.lab = lab
        }

        deinit { server.stop() }

        func waitForAccidentalDisconnect() async -> Bool {
            await fixture.events.wait { $0.contains { if case .accidentalDisconnect = $0 { true } else { false } } }
        }

        /// Waits for `succeeded` and checks that reachability, not a timer, started the attempt.
        func waitForReconnectByReachability(after mark: Int) async -> Bool {
            guard await fixture.events.waitForSuccess(after: mark, timeout: .seconds(10)) else { return false }
            return fixture.events.values.dropFirst(mark).contains { if case .attemptStarted(_, .reachability) = $0 { true } else { false } }
        }
    }

    @Test("link down: the accidental disconnect is detected; link up: reconnected by the netlink change, not the timer")
    func linkDownAndUp() async throws {
        let line = try LabLine(pingTimeout: .milliseconds(500))
        line.stream.connect()
        try #require(await line.fixture.streamEvents.wait(for: .ready))

        try line.lab.local.setLink("veth0", up: false)
        #expect(await line.waitForAccidentalDisconnect())
        #expect(line.fixture.events.values.contains { if case .verifyingConnection = $0 { true } else { false } })

        let mark = line.fixture.events.values.count
        try line.lab.local.setLink("veth0", up: true)
        #expect(await line.waitForReconnectByReachability(after: mark))
        #expect(line.stream.send("hello"))
    }

    @Test("carrier loss: the connection is verified, the dead one dropped, and replaced when the carrier returns")
    func carrierLoss() async throws {
        let line = try LabLine(pingTimeout: .milliseconds(300))
        line.stream.connect()
        try #require(await line.fixture.streamEvents.wait(for: .ready))
        #expect(line.fixture.reconnector.flags.contains(.reachable))

        // The cable is pulled: the route stays (linkdown), the socket looks connected.
        try line.lab.setCarrier(of: "veth0", present: false)
        #expect(await line.fixture.events.wait { $0.contains { if case .verifyingConnection = $0 { true } else { false } } })
        #expect(await line.fixture.streamEvents.wait(for: .disconnected))
        #expect(line.fixture.streamEvents.lastDisconnectError as? TCPLineStreamError == .noPong(timeout: .milliseconds(300)))
        #expect(await line.waitForAccidentalDisconnect())

        let mark = line.fixture.events.values.count
        try line.lab.setCarrier(of: "veth0", present: true)
        #expect(await line.waitForReconnectByReachability(after: mark))
        let lines = Recorder<String>()
        let token = line.stream.onLine { lines.record($0) }
        defer { token.cancel() }
        #expect(line.stream.send("back"))
        #expect(await lines.wait { $0 == ["back"] })
    }
}
