import Reachability

/// The parts of a host's reachability that identify the path to it: when they change while
/// connected, the socket may be dead (a new interface or source address cannot carry it).
struct ReconnectPath: Hashable, Sendable {
    var flags: ReachabilityFlags
    var interfaceIndex: Int32?
    var sourceAddress: IPAddress?
    var gateway: IPAddress?

    init(flags: ReachabilityFlags, interfaceIndex: Int32? = nil, sourceAddress: IPAddress? = nil, gateway: IPAddress? = nil) {
        self.flags = flags
        self.interfaceIndex = interfaceIndex
        self.sourceAddress = sourceAddress
        self.gateway = gateway
    }

    init(_ value: HostReachability) {
        let path = value.primaryPath
        self.init(flags: value.flags, interfaceIndex: path?.interface?.index, sourceAddress: path?.sourceAddress, gateway: path?.gateway)
    }

    var isReachable: Bool { flags.contains(.reachable) }
}
