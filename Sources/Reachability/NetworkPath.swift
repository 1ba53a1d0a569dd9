/// The path the kernel would use to one destination address, and whether it is usable: the
/// Linux counterpart of what `SCNetworkReachability` knows about an address.
///
/// Built from a route lookup and the route's interface by
/// `NetworkPath(destination:lookup:interface:)`, which holds the flag rules.
public struct NetworkPath: Hashable, Sendable {
    /// Whether the path can carry traffic now.
    public enum Status: String, Hashable, Sendable, Codable {
        /// A usable unicast or local route exists.
        case satisfied
        /// No usable route; `reason` says why.
        case unsatisfied
    }

    /// The destination address looked up.
    public var destination: IPAddress
    /// `satisfied` when `flags` contains `.reachable`.
    public var status: Status
    /// The route's output interface, when a route was found and the interface still exists.
    public var interface: NetworkInterface?
    /// The next hop, or `nil` for a direct (on-link or local) destination.
    public var gateway: IPAddress?
    /// The source address the kernel prefers for this destination (`RTA_PREFSRC`).
    public var sourceAddress: IPAddress?
    /// The route type, when a route was found.
    public var routeType: RouteType?
    /// Why the destination is not reachable; `nil` when `status` is `.satisfied`.
    public var reason: UnreachableReason?
    /// The reachability flags, by the rules documented on each `ReachabilityFlags` member.
    public var flags: ReachabilityFlags

    /// The destination's address family.
    public var family: AddressFamily { destination.family }

    /// Applies the Linux reachability rules to a route lookup (see `ReachabilityFlags`).
    ///
    /// - Parameters:
    ///   - destination: the address looked up.
    ///   - lookup: the kernel's answer for it.
    ///   - interface: the route's output interface (`RTA_OIF`) as the kernel describes it now,
    ///     or `nil` if the lookup failed or the interface is gone.
    public init(destination: IPAddress, lookup: RouteLookup, interface: NetworkInterface?) {
        self.destination = destination
        self.interface = interface
        switch lookup {
        case .failed(let errno):
            status = .unsatisfied
            reason = .lookupError(errno)
            flags = []
        case .route(let route):
            gateway = route.gateway
            sourceAddress = route.preferredSource
            routeType = route.type
            var flags: ReachabilityFlags = []
            if let interface {
                if interface.isPointToPoint || interface.kind == .tunnel { flags.insert(.transientConnection) }
                if interface.kind == .wwan { flags.insert(.isWWAN) }
            }
            if route.type != .unicast && route.type != .local {
                reason = .unsupportedRouteType(route.type)
            } else if let interface {
                if !interface.isAdminUp {
                    reason = .interfaceDown(interface.name)
                } else if !interface.isUsable || route.isLinkDown {
                    reason = .noCarrier(interface.name)
                    flags.insert(.connectionRequired)
                    if interface.operState == .dormant { flags.insert(.interventionRequired) }
                }
            } else {
                reason = .interfaceMissing(index: route.interfaceIndex)
            }
            if reason == nil {
                flags.insert(.reachable)
                if route.type == .local { flags.insert(.isLocalAddress) }
                if route.gateway == nil { flags.insert(.isDirect) }
            }
            status = reason == nil ? .satisfied : .unsatisfied
            self.flags = flags
        }
    }

    /// Creates an unsatisfied path with no route, for a destination that was never looked up
    /// or whose lookup could not be made.
    ///
    /// - Parameters:
    ///   - destination: the address.
    ///   - reason: why it is not reachable.
    public init(destination: IPAddress, unsatisfied reason: UnreachableReason) {
        self.destination = destination
        self.status = .unsatisfied
        self.reason = reason
        self.flags = []
    }
}
