/// A network interface (a link, in netlink terms) as the kernel reports it in `RTM_NEWLINK`.
public struct NetworkInterface: Hashable, Sendable {
    /// The interface name (`IFLA_IFNAME`), for example `eth0`.
    public var name: String
    /// The interface index (`ifi_index`), stable while the interface exists.
    public var index: Int32
    /// What kind of link this is; see `InterfaceKind` for the rules.
    public var kind: InterfaceKind
    /// Administratively up (`IFF_UP`, `ip link set … up`).
    public var isAdminUp: Bool
    /// Carrier present (`IFF_LOWER_UP`): the physical or virtual peer is there.
    public var hasCarrier: Bool
    /// The RFC 2863 operational state (`IFLA_OPERSTATE`).
    public var operState: OperState
    /// A point-to-point link (`IFF_POINTOPOINT`): PPP, most tunnels, WireGuard.
    public var isPointToPoint: Bool

    /// Creates an interface description.
    ///
    /// - Parameters:
    ///   - name: `IFLA_IFNAME`.
    ///   - index: `ifi_index`.
    ///   - kind: the classified link kind.
    ///   - isAdminUp: `IFF_UP`.
    ///   - hasCarrier: `IFF_LOWER_UP`.
    ///   - operState: `IFLA_OPERSTATE`.
    ///   - isPointToPoint: `IFF_POINTOPOINT`.
    public init(
        name: String,
        index: Int32,
        kind: InterfaceKind,
        isAdminUp: Bool,
        hasCarrier: Bool,
        operState: OperState,
        isPointToPoint: Bool = false
    ) {
        self.name = name
        self.index = index
        self.kind = kind
        self.isAdminUp = isAdminUp
        self.hasCarrier = hasCarrier
        self.operState = operState
        self.isPointToPoint = isPointToPoint
    }

    /// Whether traffic can leave through this interface now: administratively up, with carrier
    /// (loopback always has it), and an operstate of `up` or `unknown` (drivers that do not
    /// report operstate say `unknown`; the kernel's `netif_oper_up()` accepts both).
    public var isUsable: Bool {
        isAdminUp && (hasCarrier || kind == .loopback) && (operState == .up || operState == .unknown)
    }
}

/// The kind of link behind an interface, for `NetworkPath` and the `isWWAN` /
/// `transientConnection` flags.
///
/// Rules, first match wins: ARPHRD_LOOPBACK → loopback; sysfs `DEVTYPE=wlan` → wifi;
/// sysfs `DEVTYPE=wwan` or ARPHRD_RAWIP → wwan; ARPHRD_PPP, ARPHRD_NONE (tun, WireGuard), the
/// ARPHRD tunnel types, or a link kind of `tun`, `wireguard`, `ipip`, `gre`, `sit`, `vti`,
/// `ip6tnl` → tunnel; ARPHRD_ETHER → wired; anything else → other.
public enum InterfaceKind: String, Hashable, Sendable, CaseIterable, Codable {
    /// Ethernet and Ethernet-like virtual links (veth, bridge, macvlan).
    case wired
    /// A wireless LAN (802.11) interface.
    case wifi
    /// A cellular modem (WWAN) interface.
    case wwan
    /// The loopback interface, `lo`.
    case loopback
    /// A tunnel or PPP link.
    case tunnel
    /// Anything else.
    case other

    /// ARPHRD_* hardware types from `<linux/if_arp.h>` that decide a kind.
    enum HardwareType {
        static let ether: UInt32 = 1
        static let ppp: UInt32 = 512
        static let tunnel: UInt32 = 768
        static let tunnel6: UInt32 = 769
        static let ipgre: UInt32 = 778
        static let sit: UInt32 = 776
        static let ip6gre: UInt32 = 823
        static let loopback: UInt32 = 772
        static let none: UInt32 = 0xFFFE
        static let rawIP: UInt32 = 519
    }

    /// Classifies a link from what the kernel says about it.
    ///
    /// - Parameters:
    ///   - hardwareType: `ifi_type`, an ARPHRD_* value.
    ///   - linkKind: `IFLA_INFO_KIND` (`veth`, `wireguard`, `tun` …), if any.
    ///   - deviceType: sysfs `uevent` `DEVTYPE` (`wlan`, `wwan` …), if any.
    /// - Returns: the kind, by the rules in the type's documentation.
    public static func classify(hardwareType: UInt32, linkKind: String?, deviceType: String?) -> InterfaceKind {
        if hardwareType == HardwareType.loopback { return .loopback }
        if deviceType == "wlan" { return .wifi }
        if deviceType == "wwan" || hardwareType == HardwareType.rawIP { return .wwan }
        let tunnelTypes: Set<UInt32> = [
            HardwareType.ppp, HardwareType.none, HardwareType.tunnel, HardwareType.tunnel6,
            HardwareType.ipgre, HardwareType.sit, HardwareType.ip6gre,
        ]
        let tunnelKinds: Set<String> = ["tun", "wireguard", "ipip", "gre", "sit", "vti", "ip6tnl", "ppp"]
        if tunnelTypes.contains(hardwareType) || tunnelKinds.contains(linkKind ?? "") { return .tunnel }
        if hardwareType == HardwareType.ether { return .wired }
        return .other
    }
}

/// An RFC 2863 operational state, as in `IFLA_OPERSTATE` (`IF_OPER_*` in `<linux/if.h>`).
///
/// A struct over the kernel's value rather than a closed enum: the kernel may add states.
public struct OperState: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The kernel's `IF_OPER_*` value.
    public let rawValue: UInt8
    /// Creates a state from the kernel's `IF_OPER_*` value.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// `IF_OPER_UNKNOWN` (0): the driver does not report it (loopback, many virtual links).
    public static let unknown = OperState(rawValue: 0)
    /// `IF_OPER_NOTPRESENT` (1).
    public static let notPresent = OperState(rawValue: 1)
    /// `IF_OPER_DOWN` (2).
    public static let down = OperState(rawValue: 2)
    /// `IF_OPER_LOWERLAYERDOWN` (3): for example a veth whose peer is down.
    public static let lowerLayerDown = OperState(rawValue: 3)
    /// `IF_OPER_TESTING` (4).
    public static let testing = OperState(rawValue: 4)
    /// `IF_OPER_DORMANT` (5): waiting for an external event (802.1X, association).
    public static let dormant = OperState(rawValue: 5)
    /// `IF_OPER_UP` (6).
    public static let up = OperState(rawValue: 6)

    /// The kernel's name for the state, as `ip link` prints it in lower case.
    public var description: String {
        let names = ["unknown", "notpresent", "down", "lowerlayerdown", "testing", "dormant", "up"]
        return Int(rawValue) < names.count ? names[Int(rawValue)] : "operstate(\(rawValue))"
    }
}
