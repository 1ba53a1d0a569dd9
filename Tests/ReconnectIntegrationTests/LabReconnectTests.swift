import Dispatch
import Glibc
import Reachability
import ReachabilityNetlink
import Reconnect
import ReconnectTesting
import SampleSupport
import Testing

/// The whole product across a private network (root): a `TCPLineStream` whose socket and
/// netlink reachability live in the lab's local namespace, a `LineServer` in the remote one,
/// and a veth link that loses its carrier under the connection.
///
///     local: veth0 192.0.2.2/24  <->  remote: peer0 192.0.2.1/24 (LineServer)
@Suite(.enabled(if: NetworkLab.shouldRunTests, "needs root and ip netns: \(NetworkLab.unavailableReason ?? "")"))
struct LabReconnectTests {
    @Test("carrier loss makes the reconnector verify the connection; the dead one is dropped and replaced when the link returns")
    func carrierLoss() async throws {
        let lab = try NetworkLab()
        try lab.addVethLink("veth0", peer: "peer0")
        try lab.local.addAddress("192.0.2.2/24", to: "veth0")
        try lab.remote.addAddress("192.0.2.1/24", to: "peer0")
        let socketType = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)

        let server = LineServer(host: "192.0.2.1", openSocket: { family in try lab.remote.run { socket(family, socketType, 0) } })
        try server.start()
        defer { server.stop() }

        let stream = TCPLineStream(host: "192.0.2.1", port: server.port, openSocket: { family in
            try lab.local.run { socket(family, socketType, 0) }
        })
        stream.pingTimeout = .milliseconds(300)
        let queue = DispatchQueue(label: "LabReconnectTests.reachability")
        let fixture = ReconnectFixture(stream, reachability: { host in
            try lab.local.run { try NetworkReachability(host: host, deliveryQueue: queue) }
        }) { $0.attemptTimeout = .seconds(1) }
        #expect(fixture.reconnector.reachabilityError == nil)
        stream.connect()
        try #require(await fixture.streamEvents.wait(for: .ready))
        #expect(fixture.reconnector.flags.contains(.reachable))

        // The cable is pulled: the route stays (linkdown), the socket looks connected.
        try lab.setCarrier(of: "veth0", present: false)
        #expect(await fixture.events.wait { $0.contains { if case .verifyingConnection = $0 { true } else { false } } })
        #expect(await fixture.streamEvents.wait(for: .disconnected))
        #expect(fixture.streamEvents.lastDisconnectError as? TCPLineStreamError == .noPong(timeout: .milliseconds(300)))
        #expect(await fixture.events.wait { $0.contains { if case .accidentalDisconnect = $0 { true } else { false } } })

        // The cable is back: the reconnector does not wait for its timer.
        let before = fixture.events.values.count
        try lab.setCarrier(of: "veth0", present: true)
        #expect(await fixture.events.waitForSuccess(after: before, timeout: .seconds(10)))
        #expect(stream.isConnected)
        let lines = Recorder<String>()
        let token = stream.onLine { lines.record($0) }
        defer { token.cancel() }
        #expect(stream.send("back"))
        #expect(await lines.wait { $0 == ["back"] })
    }
}
