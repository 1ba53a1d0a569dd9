/// What is known about reaching a destination, with the names and bit values of Apple's
/// `SCNetworkReachabilityFlags`, so code ported from XMPPReconnect reads the same.
///
/// On Linux the flags are computed from the kernel's route lookup for the destination
/// (`RTM_GETROUTE` with `RTA_DST`, what `ip route get` does) and the state of the route's
/// output interface. Each flag documents its Linux rule; `NetworkPath.flags` applies them.
public struct ReachabilityFlags: OptionSet, Hashable, Sendable, CustomStringConvertible {
    /// The bits, laid out as `SCNetworkReachabilityFlags`.
    public let rawValue: UInt32

    /// Creates flags from the raw bit pattern (the `SCNetworkReachabilityFlags` bit layout).
    public init(rawValue: UInt32) { self.rawValue = rawValue }

    /// The route's interface is point-to-point (`IFF_POINTOPOINT`), PPP or a tunnel: the
    /// connection may go away when that link is torn down.
    public static let transientConnection = ReachabilityFlags(rawValue: 1 << 0)
    /// The kernel's route lookup returns a unicast or local route whose output interface is
    /// administratively up (`IFF_UP`) and has carrier (`IFF_LOWER_UP`, or is loopback), and
    /// the route is not marked `linkdown`.
    public static let reachable = ReachabilityFlags(rawValue: 1 << 1)
    /// A route exists but its interface must first come up: the interface is up without
    /// carrier, or its operstate is `dormant` (RFC 2863 §3.1.12). Never set with `reachable`.
    public static let connectionRequired = ReachabilityFlags(rawValue: 1 << 2)
    /// Never set on Linux: the kernel has no dial-on-traffic; kept for source compatibility.
    public static let connectionOnTraffic = ReachabilityFlags(rawValue: 1 << 3)
    /// The interface's operstate is `dormant`: it waits for something outside the kernel
    /// (802.1X or a captive login, RFC 2863 §3.1.12); set with `connectionRequired`.
    public static let interventionRequired = ReachabilityFlags(rawValue: 1 << 4)
    /// Never set on Linux: the kernel has no connect-on-demand; kept for source compatibility.
    public static let connectionOnDemand = ReachabilityFlags(rawValue: 1 << 5)
    /// The route lookup returned a route of type `local` (`RTN_LOCAL`): the destination is one
    /// of this host's own addresses, including 127.0.0.0/8 and ::1.
    public static let isLocalAddress = ReachabilityFlags(rawValue: 1 << 16)
    /// Reachable with no gateway (no `RTA_GATEWAY`): the destination is on-link or local.
    public static let isDirect = ReachabilityFlags(rawValue: 1 << 17)
    /// The route's interface is a WWAN (cellular) device: sysfs `DEVTYPE=wwan`, or ARPHRD_RAWIP.
    public static let isWWAN = ReachabilityFlags(rawValue: 1 << 18)

    /// Every flag with its name, in bit order.
    public static let named: [(name: String, flag: ReachabilityFlags)] = [
        ("transientConnection", .transientConnection),
        ("reachable", .reachable),
        ("connectionRequired", .connectionRequired),
        ("connectionOnTraffic", .connectionOnTraffic),
        ("interventionRequired", .interventionRequired),
        ("connectionOnDemand", .connectionOnDemand),
        ("isLocalAddress", .isLocalAddress),
        ("isDirect", .isDirect),
        ("isWWAN", .isWWAN),
    ]

    /// The names of the flags set, in bit order (for logs and JSON).
    public var names: [String] { Self.named.filter { contains($0.flag) }.map(\.name) }

    /// The names of the flags set, comma separated, or `[]` when none is set.
    public var description: String { "[" + names.joined(separator: ", ") + "]" }
}
