import Glibc
import Reachability
@testable import ReachabilityNetlink
import ReconnectTesting
import Testing
import NetworkLab

/// Reachability answers computed from the kernel's route lookup inside a private namespace.
@Suite(.networkLab) struct RouteLookupTests {
    @Test("no route: not reachable, network unreachable", arguments: ["198.51.100.7", "2001:db8:5::7"])
    func noRoute(host: String) throws {
        let fixture = try LabFixture()
        let value = try fixture.watch(host).reachability.currentReachability()
        #expect(!value.isReachable)
        #expect(value.reason == .networkUnreachable)
        #expect(value.flags == [])
    }

    @Test("a route via a gateway: reachable, not direct", arguments: [
        ("198.51.100.7", "198.51.100.0/24", "192.0.2.1", "192.0.2.2"),
        ("2001:db8:5::7", "2001:db8:5::/64", "2001:db8::1", "2001:db8::2"),
    ])
    func gatewayRoute(host: String, prefix: String, gateway: String, source: String) throws {
        let fixture = try LabFixture()
        try fixture.lab.local.addRoute(prefix, via: gateway)
        let value = try fixture.watch(host).reachability.currentReachability()
        #expect(value.flags == [.reachable])
        let path = try #require(value.primaryPath)
        #expect(path.gateway == IPAddress(gateway))
        #expect(path.sourceAddress == IPAddress(source))
        #expect(path.interface?.name == "veth0")
        #expect(path.interface?.kind == .wired)
        #expect(path.routeType == .unicast)
    }

    @Test("an on-link destination: reachable and direct", arguments: ["192.0.2.1", "2001:db8::1"])
    func onLink(host: String) throws {
        let fixture = try LabFixture()
        let value = try fixture.watch(host).reachability.currentReachability()
        #expect(value.flags == [.reachable, .isDirect])
        #expect(value.primaryPath?.gateway == nil)
    }

    @Test("our own address and loopback are local addresses", arguments: ["192.0.2.2", "2001:db8::2", "127.0.0.1", "::1"])
    func local(host: String) throws {
        let fixture = try LabFixture()
        let value = try fixture.watch(host).reachability.currentReachability()
        #expect(value.flags == [.reachable, .isDirect, .isLocalAddress])
        #expect(value.primaryPath?.routeType == .local)
        #expect(value.primaryPath?.interface?.kind == .loopback)
    }

    @Test("unreachable, prohibit and blackhole routes give the kernel's reason", arguments: [
        (RouteKind.unreachable, "203.0.113.0/24", "203.0.113.9", UnreachableReason.hostUnreachable),
        (.prohibit, "203.0.113.0/24", "203.0.113.9", .prohibited),
        (.blackhole, "203.0.113.0/24", "203.0.113.9", .blackhole),
        (.unreachable, "2001:db8:7::/48", "2001:db8:7::9", .hostUnreachable),
        (.prohibit, "2001:db8:7::/48", "2001:db8:7::9", .prohibited),
        (.blackhole, "2001:db8:7::/48", "2001:db8:7::9", .blackhole),
    ])
    func refusingRoutes(kind: RouteKind, prefix: String, host: String, reason: UnreachableReason) throws {
        let fixture = try LabFixture()
        try fixture.lab.local.addRoute(kind, prefix)
        let value = try fixture.watch(host).reachability.currentReachability()
        #expect(!value.isReachable)
        #expect(value.reason == reason)
    }

    @Test("a name with several addresses is reachable when one of them is")
    func severalAddresses() throws {
        let resolver = StaticResolver(["multi.test": ["2001:db8:5::7", "198.51.100.7"]])
        let fixture = try LabFixture(resolver: resolver)
        let recorder = try fixture.watch("multi.test")
        #expect(recorder.reachability.currentReachability().paths.count == 2)
        #expect(!recorder.reachability.currentReachability().isReachable)
        try fixture.change { try fixture.lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1") }
        let value = recorder.last
        #expect(value.isReachable)
        #expect(value.primaryPath?.destination == IPAddress("198.51.100.7"))
        #expect(value.paths.first?.reason == .networkUnreachable)
    }

    @Test("an unresolvable name is not reachable, with the resolver's error")
    func unresolvable() throws {
        let fixture = try LabFixture()
        let value = try fixture.watch("nowhere.invalid").reachability.currentReachability()
        #expect(!value.isReachable)
        #expect(value.paths.isEmpty)
        guard case .resolutionFailed(let host, _, _)? = value.resolutionError else {
            Issue.record("expected a resolution error, got \(String(describing: value.resolutionError))")
            return
        }
        #expect(host == "nowhere.invalid")
        guard case .resolutionFailed? = value.reason else {
            Issue.record("expected resolutionFailed, got \(String(describing: value.reason))")
            return
        }
    }
}

/// A resolver with fixed answers, for names that must resolve inside a namespace.
struct StaticResolver: HostResolver {
    let table: [String: [String]]
    init(_ table: [String: [String]]) { self.table = table }

    func resolve(_ name: String) throws(ReachabilityError) -> [IPAddress] {
        guard let addresses = table[name]?.compactMap(IPAddress.init), !addresses.isEmpty else {
            throw .resolutionFailed(host: name, code: -2, message: "Name or service not known")
        }
        return addresses
    }
}
