import Reachability
import Testing

@Suite struct InterfaceKindTests {
    @Test("link kinds are classified from ARPHRD type, link kind and sysfs DEVTYPE", arguments: [
        (UInt32(772), String?.none, String?.none, InterfaceKind.loopback),
        (1, "veth", nil, .wired),
        (1, nil, "wlan", .wifi),
        (1, nil, "wwan", .wwan),
        (519, nil, nil, .wwan),
        (512, nil, nil, .tunnel),
        (0xFFFE, "wireguard", nil, .tunnel),
        (768, "ipip", nil, .tunnel),
        (1, "gre", nil, .tunnel),
        (824, nil, nil, .other),
    ])
    func classify(type: UInt32, kind: String?, devtype: String?, expected: InterfaceKind) {
        #expect(InterfaceKind.classify(hardwareType: type, linkKind: kind, deviceType: devtype) == expected)
    }

    @Test("operstate names match ip link's")
    func operStateNames() {
        #expect(OperState.lowerLayerDown.description == "lowerlayerdown")
        #expect(OperState(rawValue: 42).description == "operstate(42)")
        #expect(RouteType.blackhole.description == "blackhole")
    }
}
