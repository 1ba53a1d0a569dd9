import Foundation
import Reachability
@testable import ReachabilityNetlink
import ReconnectTesting
import Testing
import NetworkLab

/// Changes the kernel announces badly, or not at all, still reach observers, once.
@Suite(.networkLab) struct ChangeNotificationTests {
    @Test("a link set admin-down (routes vanish silently) is unreachable; up and route re-added is reachable again")
    func adminDown() throws {
        let fixture = try LabFixture()
        try fixture.lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1")
        let recorder = try fixture.watch("198.51.100.7")
        #expect(recorder.reachability.currentReachability().isReachable)

        try fixture.change { try fixture.lab.local.setLink("veth0", up: false) }
        #expect(recorder.notifications.count == 1)
        #expect(recorder.last.reason == .networkUnreachable)

        try fixture.change {
            try fixture.lab.local.setLink("veth0", up: true)
            try fixture.lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1")
        }
        #expect(recorder.last.isReachable)
        #expect(recorder.last.flags == [.reachable])
    }

    @Test("carrier lost on the peer: the route stays, the host is not reachable and needs a connection")
    func carrierLost() throws {
        let fixture = try LabFixture()
        try fixture.lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1")
        let recorder = try fixture.watch("198.51.100.7")

        try fixture.change { try fixture.lab.setCarrier(of: "veth0", present: false) }
        #expect(recorder.waitForNotifications(1))
        fixture.monitor.synchronize()
        #expect(recorder.notifications.count == 1)
        #expect(recorder.last.reason == .noCarrier("veth0"))
        #expect(recorder.last.flags == [.connectionRequired])
        #expect(recorder.last.primaryPath?.gateway == IPAddress("192.0.2.1"))

        try fixture.change { try fixture.lab.setCarrier(of: "veth0", present: true) }
        #expect(recorder.waitForNotifications(2))
        fixture.monitor.synchronize()
        #expect(recorder.notifications.count == 2)
        #expect(recorder.last.isReachable)
    }

    @Test("an address removed so that gateway routes are flushed silently: not reachable")
    func addressRemoved() throws {
        let fixture = try LabFixture()
        try fixture.lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1")
        let recorder = try fixture.watch("198.51.100.7")
        try fixture.change { try fixture.lab.local.removeAddress("192.0.2.2/24", from: "veth0") }
        #expect(recorder.notifications.count == 1)
        #expect(recorder.last.reason == .networkUnreachable)
    }

    @Test("a default route added later makes the host reachable", arguments: [
        ("198.51.100.7", "192.0.2.1"), ("2001:db8:5::7", "2001:db8::1"),
    ])
    func defaultRouteLater(host: String, gateway: String) throws {
        let fixture = try LabFixture()
        let recorder = try fixture.watch(host)
        #expect(!recorder.reachability.currentReachability().isReachable)
        try fixture.change { try fixture.lab.local.addRoute("default", via: gateway) }
        #expect(recorder.notifications.count == 1)
        #expect(recorder.last.isReachable)
        #expect(recorder.last.primaryPath?.gateway == IPAddress(gateway))
    }

    @Test("IPv6: link down and carrier loss make an IPv6 host unreachable")
    func ipv6LinkChanges() throws {
        let fixture = try LabFixture()
        try fixture.lab.local.addRoute("2001:db8:5::/64", via: "2001:db8::1")
        let recorder = try fixture.watch("2001:db8:5::7")
        #expect(recorder.reachability.currentReachability().isReachable)
        try fixture.change { try fixture.lab.setCarrier(of: "veth0", present: false) }
        #expect(recorder.waitForNotifications(1))
        #expect(recorder.last.reason == .noCarrier("veth0"))
        try fixture.change { try fixture.lab.local.setLink("veth0", up: false) }
        #expect(recorder.last.reason == .networkUnreachable)
    }

    @Test("one change is notified once, not once per netlink message")
    func oneNotificationPerChange() throws {
        let fixture = try LabFixture()
        try fixture.lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1")
        let recorder = try fixture.watch("198.51.100.7")
        let before = fixture.monitor.statistics
        // Link down sends several messages (link, addresses, IPv6 routes) for one change.
        try fixture.change { try fixture.lab.local.setLink("veth0", up: false) }
        let after = fixture.monitor.statistics
        #expect(after.datagrams - before.datagrams > 1)
        #expect(recorder.notifications.count == 1)
    }

    @Test("changes that do not touch a watched host are noise and notify nothing")
    func unrelatedChangesAreSilent() throws {
        let fixture = try LabFixture()
        try fixture.lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1")
        let recorder = try fixture.watch("198.51.100.7")
        try fixture.change {
            try fixture.lab.addVethLink("veth1", peer: "peer1")
            try fixture.lab.local.addAddress("203.0.113.1/24", to: "veth1")
            try fixture.lab.local.addAddress("2001:db8:9::1/64", to: "veth1")
            try fixture.lab.local.addRoute("203.0.113.128/25", via: "203.0.113.2")
        }
        #expect(fixture.monitor.statistics.datagrams > 0)
        #expect(recorder.notifications.isEmpty)
    }

    @Test("after an overrun (ENOBUFS) everything is re-evaluated and the final state is right")
    func overrun() throws {
        let fixture = try LabFixture(options: NetlinkOptions(receiveBufferSize: 4096))
        let recorder = try fixture.watch("198.51.100.7")
        // Hold the monitor's queue so the socket overflows while the burst is sent.
        let hold = DispatchSemaphore(value: 0)
        fixture.monitor.queue.async { hold.wait() }
        var script = ""
        for index in 0..<2000 {
            script += "route add 203.0.113.\(index % 250)/32 via 192.0.2.1 metric \(index / 250 + 1)\n"
        }
        script += "route add 198.51.100.0/24 via 192.0.2.1\n"
        let path = "/tmp/overrun-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).batch"
        try script.write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        try fixture.lab.local.ip("-batch", path)
        hold.signal()
        fixture.monitor.synchronize()
        #expect(fixture.monitor.statistics.overruns >= 1)
        #expect(recorder.notifications.count == 1)
        #expect(recorder.last.isReachable)
    }

    @Test("a netlink socket that fails to open is a typed error")
    func socketFailure() {
        var options = NetlinkOptions()
        options.netlinkProtocol = 31  // no such netlink family: connect fails
        #expect {
            _ = try ReachabilityMonitor(options: options)
        } throws: { error in
            guard case .netlink(let operation, let code, _, _) = error as? ReachabilityError else { return false }
            return operation == "nl_connect" && code > 0
        }
    }

    @Test("NetworkReachability alone: changes arrive as an AsyncSequence")
    func asyncSequence() async throws {
        let lab = try NetworkLab()
        try lab.addVethLink("veth0", peer: "peer0")
        try lab.local.addAddress("192.0.2.2/24", to: "veth0")
        let queue = DispatchQueue(label: "asyncSequence")
        let reachability = try lab.local.run { try NetworkReachability(host: "198.51.100.7", deliveryQueue: queue) }
        #expect(reachability.flags == [])
        let changes = reachability.changes()
        try lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1")
        reachability.monitor.synchronize()
        var iterator = changes.makeAsyncIterator()
        let value = await iterator.next()
        #expect(value?.isReachable == true)
    }
}
