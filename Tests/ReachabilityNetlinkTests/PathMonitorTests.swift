import Dispatch
import Reachability
import ReachabilityNetlink
import ReconnectTesting
import SystemSupport
import Testing
import NetworkLab

@Suite(.networkLab) struct PathMonitorTests {
    @Test("the path monitor reports usable interfaces and default routes as they change")
    func defaultRoutes() throws {
        let lab = try NetworkLab()
        try lab.addVethLink("veth0", peer: "peer0")
        try lab.local.addAddress("192.0.2.2/24", to: "veth0")
        let queue = DispatchQueue(label: "PathMonitorTests")
        let monitor = try lab.local.run { try PathMonitor(deliveryQueue: queue) }
        let initial = try monitor.currentStatus()
        #expect(initial.status == .unsatisfied)
        #expect(initial.usableInterfaces.map(\.name) == ["veth0"])

        let seen = Locked<[NetworkStatus]>([])
        let delivered = DispatchSemaphore(value: 0)
        let observation = monitor.observe { status in
            seen.withLock { $0.append(status) }
            delivered.signal()
        }
        defer { observation.cancel() }

        try lab.local.addRoute("default", via: "192.0.2.1")
        monitor.synchronize()
        #expect(delivered.wait(timeout: .now()) == .success)
        let satisfied = try #require(seen.withLock { $0.last })
        #expect(satisfied.status == .satisfied)
        #expect(satisfied.defaultRoute(for: .ipv4)?.gateway == IPAddress("192.0.2.1"))
        #expect(satisfied.defaultRoute(for: .ipv4)?.interface.name == "veth0")
        #expect(satisfied.defaultRoute(for: .ipv6) == nil)

        try lab.setCarrier(of: "veth0", present: false)
        // Carrier changes reach netlink through the kernel's linkwatch work, possibly late.
        #expect(delivered.wait(timeout: .now() + .seconds(5)) == .success)
        monitor.synchronize()
        let lost = try #require(seen.withLock { $0.last })
        #expect(lost.status == .unsatisfied)
        #expect(lost.usableInterfaces.isEmpty)
    }
}
