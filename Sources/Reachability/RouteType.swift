/// The type of a route (`rtm_type`, `RTN_*` in `<linux/rtnetlink.h>`).
///
/// A struct over the kernel's value rather than a closed enum: the kernel may add types.
public struct RouteType: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The kernel's `RTN_*` value.
    public let rawValue: UInt8
    /// Creates a route type from the kernel's `RTN_*` value.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// `RTN_UNICAST` (1): a gateway or direct route.
    public static let unicast = RouteType(rawValue: 1)
    /// `RTN_LOCAL` (2): the destination is one of this host's addresses.
    public static let local = RouteType(rawValue: 2)
    /// `RTN_BROADCAST` (3).
    public static let broadcast = RouteType(rawValue: 3)
    /// `RTN_ANYCAST` (4).
    public static let anycast = RouteType(rawValue: 4)
    /// `RTN_MULTICAST` (5).
    public static let multicast = RouteType(rawValue: 5)
    /// `RTN_BLACKHOLE` (6): packets are silently dropped; lookups fail with `EINVAL`.
    public static let blackhole = RouteType(rawValue: 6)
    /// `RTN_UNREACHABLE` (7): lookups fail with `EHOSTUNREACH`.
    public static let unreachable = RouteType(rawValue: 7)
    /// `RTN_PROHIBIT` (8): lookups fail with `EACCES`.
    public static let prohibit = RouteType(rawValue: 8)

    /// The name `ip route` uses for the type.
    public var description: String {
        let names = ["unspec", "unicast", "local", "broadcast", "anycast", "multicast", "blackhole", "unreachable", "prohibit", "throw", "nat", "xresolve"]
        return Int(rawValue) < names.count ? names[Int(rawValue)] : "type(\(rawValue))"
    }
}
