/// The kernel's answer to a route lookup for one destination (`RTM_GETROUTE` with `RTA_DST`,
/// what `ip route get ADDRESS` does): a route, or the errno the kernel answered with.
public enum RouteLookup: Hashable, Sendable {
    /// The kernel returned a route.
    case route(Route)
    /// The kernel refused the lookup with this errno: `ENETUNREACH` (no route), `EHOSTUNREACH`
    /// (`unreachable` route), `EACCES` (`prohibit`), `EINVAL` (`blackhole`), or another.
    case failed(errno: Int32)

    /// A route as returned by a lookup.
    public struct Route: Hashable, Sendable {
        /// `rtm_type`.
        public var type: RouteType
        /// The output interface index (`RTA_OIF`).
        public var interfaceIndex: Int32
        /// The next hop (`RTA_GATEWAY`), or `nil` for an on-link or local destination.
        public var gateway: IPAddress?
        /// The preferred source address (`RTA_PREFSRC`), if the kernel chose one.
        public var preferredSource: IPAddress?
        /// The next hop is marked `linkdown` (`RTNH_F_LINKDOWN`): its interface lost carrier.
        public var isLinkDown: Bool

        /// Creates a route.
        ///
        /// - Parameters:
        ///   - type: `rtm_type`.
        ///   - interfaceIndex: `RTA_OIF`.
        ///   - gateway: `RTA_GATEWAY`.
        ///   - preferredSource: `RTA_PREFSRC`.
        ///   - isLinkDown: `RTNH_F_LINKDOWN` in `rtm_flags`.
        public init(
            type: RouteType,
            interfaceIndex: Int32,
            gateway: IPAddress? = nil,
            preferredSource: IPAddress? = nil,
            isLinkDown: Bool = false
        ) {
            self.type = type
            self.interfaceIndex = interfaceIndex
            self.gateway = gateway
            self.preferredSource = preferredSource
            self.isLinkDown = isLinkDown
        }
    }
}
