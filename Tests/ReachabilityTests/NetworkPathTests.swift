import Glibc
import Reachability
import Testing

/// The Linux flag rules, on plain values: a route lookup and an interface in, flags out.
@Suite struct NetworkPathTests {
    static let destination = IPAddress("198.51.100.7")!
    static let gateway = IPAddress("192.0.2.1")!

    static func interface(
        _ kind: InterfaceKind = .wired,
        up: Bool = true,
        carrier: Bool = true,
        oper: OperState = .up,
        pointToPoint: Bool = false
    ) -> NetworkInterface {
        NetworkInterface(name: "eth0", index: 2, kind: kind, isAdminUp: up, hasCarrier: carrier, operState: oper, isPointToPoint: pointToPoint)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var label: String
        var lookup: RouteLookup
        var interface: NetworkInterface?
        var flags: ReachabilityFlags
        var reason: UnreachableReason?
        var testDescription: String { label }
    }

    static let cases: [Case] = [
        Case(label: "gateway route: reachable, not direct",
             lookup: .route(.init(type: .unicast, interfaceIndex: 2, gateway: gateway)),
             interface: interface(), flags: [.reachable], reason: nil),
        Case(label: "on-link route: reachable and direct",
             lookup: .route(.init(type: .unicast, interfaceIndex: 2)),
             interface: interface(), flags: [.reachable, .isDirect], reason: nil),
        Case(label: "local route: local address, direct",
             lookup: .route(.init(type: .local, interfaceIndex: 1)),
             interface: interface(.loopback, carrier: false, oper: .unknown), flags: [.reachable, .isDirect, .isLocalAddress], reason: nil),
        Case(label: "no route: network unreachable",
             lookup: .failed(errno: ENETUNREACH), interface: nil, flags: [], reason: .networkUnreachable),
        Case(label: "unreachable route: host unreachable",
             lookup: .failed(errno: EHOSTUNREACH), interface: nil, flags: [], reason: .hostUnreachable),
        Case(label: "prohibit route: prohibited",
             lookup: .failed(errno: EACCES), interface: nil, flags: [], reason: .prohibited),
        Case(label: "blackhole route",
             lookup: .failed(errno: EINVAL), interface: nil, flags: [], reason: .blackhole),
        Case(label: "another errno is kept",
             lookup: .failed(errno: ENOMEM), interface: nil, flags: [], reason: .lookupFailed(errno: ENOMEM)),
        Case(label: "interface admin-down",
             lookup: .route(.init(type: .unicast, interfaceIndex: 2)),
             interface: interface(up: false, carrier: false, oper: .down), flags: [], reason: .interfaceDown("eth0")),
        Case(label: "no carrier: connection required",
             lookup: .route(.init(type: .unicast, interfaceIndex: 2, gateway: gateway)),
             interface: interface(carrier: false, oper: .lowerLayerDown), flags: [.connectionRequired], reason: .noCarrier("eth0")),
        Case(label: "route marked linkdown",
             lookup: .route(.init(type: .unicast, interfaceIndex: 2, isLinkDown: true)),
             interface: interface(), flags: [.connectionRequired], reason: .noCarrier("eth0")),
        Case(label: "dormant: intervention required",
             lookup: .route(.init(type: .unicast, interfaceIndex: 2, gateway: gateway)),
             interface: interface(.wifi, oper: .dormant), flags: [.connectionRequired, .interventionRequired], reason: .noCarrier("eth0")),
        Case(label: "operstate unknown with carrier counts as up",
             lookup: .route(.init(type: .unicast, interfaceIndex: 2, gateway: gateway)),
             interface: interface(oper: .unknown), flags: [.reachable], reason: nil),
        Case(label: "wwan interface",
             lookup: .route(.init(type: .unicast, interfaceIndex: 2, gateway: gateway)),
             interface: interface(.wwan), flags: [.reachable, .isWWAN], reason: nil),
        Case(label: "point-to-point tunnel: transient",
             lookup: .route(.init(type: .unicast, interfaceIndex: 2)),
             interface: interface(.tunnel, oper: .unknown, pointToPoint: true), flags: [.reachable, .isDirect, .transientConnection], reason: nil),
        Case(label: "interface gone",
             lookup: .route(.init(type: .unicast, interfaceIndex: 9)),
             interface: nil, flags: [], reason: .interfaceMissing(index: 9)),
        Case(label: "multicast route is not reachable",
             lookup: .route(.init(type: .multicast, interfaceIndex: 2)),
             interface: interface(), flags: [], reason: .unsupportedRouteType(.multicast)),
    ]

    @Test("flags and reason follow the Linux rules", arguments: cases)
    func rules(_ example: Case) {
        let path = NetworkPath(destination: Self.destination, lookup: example.lookup, interface: example.interface)
        #expect(path.flags == example.flags)
        #expect(path.reason == example.reason)
        #expect(path.status == (example.flags.contains(.reachable) ? .satisfied : .unsatisfied))
    }

    @Test("a route's details are kept on the path")
    func details() {
        let source = IPAddress("192.0.2.2")!
        let path = NetworkPath(
            destination: Self.destination,
            lookup: .route(.init(type: .unicast, interfaceIndex: 2, gateway: Self.gateway, preferredSource: source)),
            interface: Self.interface()
        )
        #expect(path.gateway == Self.gateway)
        #expect(path.sourceAddress == source)
        #expect(path.routeType == .unicast)
        #expect(path.interface?.name == "eth0")
        #expect(path.family == .ipv4)
    }

    @Test("flags keep SCNetworkReachabilityFlags' bit values and names")
    func bitValues() {
        #expect(ReachabilityFlags.reachable.rawValue == 2)
        #expect(ReachabilityFlags.isLocalAddress.rawValue == 1 << 16)
        #expect(ReachabilityFlags.isWWAN.rawValue == 1 << 18)
        #expect(ReachabilityFlags([.reachable, .isDirect]).names == ["reachable", "isDirect"])
        #expect(ReachabilityFlags.named.count == 9)
    }
}
