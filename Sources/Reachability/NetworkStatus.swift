/// The state of the whole host's network, in the spirit of `NWPathMonitor`'s `NWPath`: which
/// interfaces can carry traffic and which default routes exist, per family.
public struct NetworkStatus: Hashable, Sendable {
    /// A default route (destination prefix length 0 in the main table).
    public struct DefaultRoute: Hashable, Sendable {
        /// IPv4 (`0.0.0.0/0`) or IPv6 (`::/0`).
        public var family: AddressFamily
        /// The next hop, or `nil` for a device-only default route (PPP, tunnels).
        public var gateway: IPAddress?
        /// The output interface.
        public var interface: NetworkInterface
        /// The route's metric (`RTA_PRIORITY`); lower wins.
        public var metric: UInt32

        /// Creates a default route description.
        ///
        /// - Parameters:
        ///   - family: the route's family.
        ///   - gateway: `RTA_GATEWAY`.
        ///   - interface: the output interface.
        ///   - metric: `RTA_PRIORITY`.
        public init(family: AddressFamily, gateway: IPAddress?, interface: NetworkInterface, metric: UInt32) {
            self.family = family
            self.gateway = gateway
            self.interface = interface
            self.metric = metric
        }
    }

    /// Interfaces that can carry traffic: not loopback, `isUsable`, and holding at least one
    /// address that is not IPv6 link-local. Ordered by interface index.
    public var usableInterfaces: [NetworkInterface]
    /// Default routes through usable interfaces, best (lowest metric) first, per family.
    public var defaultRoutes: [DefaultRoute]

    /// Creates a status value.
    ///
    /// - Parameters:
    ///   - usableInterfaces: see the property.
    ///   - defaultRoutes: see the property.
    public init(usableInterfaces: [NetworkInterface], defaultRoutes: [DefaultRoute]) {
        self.usableInterfaces = usableInterfaces
        self.defaultRoutes = defaultRoutes
    }

    /// `satisfied` when at least one default route goes through a usable interface.
    public var status: NetworkPath.Status { defaultRoutes.isEmpty ? .unsatisfied : .satisfied }

    /// The best default route of a family, if any.
    ///
    /// - Parameter family: IPv4 or IPv6.
    /// - Returns: the lowest-metric default route of that family.
    public func defaultRoute(for family: AddressFamily) -> DefaultRoute? {
        defaultRoutes.first { $0.family == family }
    }
}
