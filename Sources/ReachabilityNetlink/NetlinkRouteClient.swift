import SystemSupport
import CNetlink
import Glibc
import Reachability

/// The request side: kernel route lookups (`RTM_GETROUTE` with `RTA_DST`, what `ip route get`
/// does), link queries and table dumps on one blocking netlink socket.
///
/// Not thread-safe: callers serialise access (the monitor keeps it behind a `Locked`).
final class NetlinkRouteClient {
    private let socket: NetlinkSocket

    /// Opens a request socket in the calling thread's network namespace.
    ///
    /// - Parameter netlinkProtocol: the netlink family; tests pass another to make it fail.
    /// - Throws: `ReachabilityError.netlink` when the socket cannot be opened.
    init(netlinkProtocol: Int32 = NETLINK_ROUTE) throws(ReachabilityError) {
        socket = try NetlinkSocket(netlinkProtocol: netlinkProtocol)
        // Requests are matched to answers by sequence number here (`receive`), and libnl's
        // own expectation would drift with the hand-built lookups; no ACKs are needed since
        // every request gets an answer or an NLMSG_ERROR.
        nl_socket_disable_seq_check(socket.handle)
        nl_socket_disable_auto_ack(socket.handle)
    }

    /// Asks the kernel which route it would use for `destination`.
    ///
    /// The request is built by hand rather than with `rtnl_route_lookup`, which hides the
    /// kernel's errno; the errno is what tells no route (`ENETUNREACH`) from an `unreachable`
    /// (`EHOSTUNREACH`), `prohibit` (`EACCES`) or `blackhole` (`EINVAL`) route.
    ///
    /// - Parameter destination: the address to look up.
    /// - Returns: the route, or the errno the kernel answered with.
    /// - Throws: `ReachabilityError.netlink` when the request cannot be sent or answered.
    func lookupRoute(to destination: IPAddress) throws(ReachabilityError) -> RouteLookup {
        guard let message = nlmsg_alloc_simple(Int32(RTM_GETROUTE), NLM_F_REQUEST) else {
            throw .netlink(operation: "nlmsg_alloc_simple", code: Int32(NLE_NOMEM), errno: ENOMEM, message: "out of memory")
        }
        defer { nlmsg_free(message) }
        var header = rtmsg()
        header.rtm_family = UInt8(destination.family == .ipv4 ? AF_INET : AF_INET6)
        header.rtm_dst_len = UInt8(destination.bytes.count * 8)
        try NetlinkSocket.check(nlmsg_append(message, &header, MemoryLayout<rtmsg>.size, Int32(NLMSG_ALIGNTO)), "nlmsg_append")
        try NetlinkSocket.check(
            destination.bytes.withUnsafeBytes { nla_put(message, Int32(RTA_DST.rawValue), Int32($0.count), $0.baseAddress) },
            "nla_put(RTA_DST)")
        try NetlinkSocket.check(nl_send_auto(socket.handle, message), "nl_send_auto(RTM_GETROUTE)")
        let sequence = nlmsg_hdr(message).pointee.nlmsg_seq
        // The answer is one RTM_NEWROUTE, or an NLMSG_ERROR carrying -errno.
        return try receive(sequence: sequence, operation: "RTM_GETROUTE") { header throws(ReachabilityError) -> RouteLookup? in
            switch Int32(header.pointee.nlmsg_type) {
            case NLMSG_ERROR:
                let error = UnsafeRawPointer(nlmsg_data(header)).load(as: nlmsgerr.self).error
                guard error != 0 else {
                    throw .netlink(operation: "RTM_GETROUTE", code: Int32(NLE_MSG_TRUNC), errno: 0, message: "acknowledged without a route")
                }
                return .failed(errno: -error)
            case Int32(RTM_NEWROUTE):
                return Self.parseRoute(header)
            default:
                return nil
            }
        }
    }

    /// Describes the interface with this index, or `nil` if it no longer exists.
    ///
    /// - Parameter index: `ifi_index`.
    /// - Throws: `ReachabilityError.netlink` for failures other than "no such device".
    func interface(index: Int32) throws(ReachabilityError) -> NetworkInterface? {
        var link: OpaquePointer?
        let result = rtnl_link_get_kernel(socket.handle, index, nil, &link)
        if result == -NLE_OBJ_NOTFOUND || result == -NLE_NODEV { return nil }
        try NetlinkSocket.check(result, "rtnl_link_get_kernel(\(index))")
        guard let link else { return nil }
        defer { rtnl_link_put(link) }
        return Self.describe(link)
    }

    /// Dumps links, addresses and routes, and summarises them as a `NetworkStatus`.
    ///
    /// - Throws: `ReachabilityError.netlink` when a dump fails.
    func networkStatus() throws(ReachabilityError) -> NetworkStatus {
        var links: OpaquePointer?
        try NetlinkSocket.check(rtnl_link_alloc_cache(socket.handle, AF_UNSPEC, &links), "rtnl_link_alloc_cache")
        defer { nl_cache_free(links) }
        var addresses: OpaquePointer?
        try NetlinkSocket.check(rtnl_addr_alloc_cache(socket.handle, &addresses), "rtnl_addr_alloc_cache")
        defer { nl_cache_free(addresses) }
        var routes: OpaquePointer?
        try NetlinkSocket.check(rtnl_route_alloc_cache(socket.handle, AF_UNSPEC, 0, &routes), "rtnl_route_alloc_cache")
        defer { nl_cache_free(routes) }

        var interfaces: [Int32: NetworkInterface] = [:]
        Self.forEach(in: links) { interfaces[rtnl_link_get_ifindex($0)] = Self.describe($0) }
        var addressed = Set<Int32>()
        Self.forEach(in: addresses) { address in
            guard let local = rtnl_addr_get_local(address), let ip = Self.ipAddress(local), !ip.isLinkLocal else { return }
            addressed.insert(rtnl_addr_get_ifindex(address))
        }
        let usable = interfaces.values
            .filter { $0.kind != .loopback && $0.isUsable && addressed.contains($0.index) }
            .sorted { $0.index < $1.index }
        let usableIndexes = Set(usable.map(\.index))

        var defaults: [NetworkStatus.DefaultRoute] = []
        Self.forEach(in: routes) { route in
            guard rtnl_route_get_table(route) == UInt32(RT_TABLE_MAIN.rawValue),
                  rtnl_route_get_type(route) == UInt8(RTN_UNICAST),
                  let dst = rtnl_route_get_dst(route), nl_addr_get_prefixlen(dst) == 0,
                  rtnl_route_get_nnexthops(route) > 0, let hop = rtnl_route_nexthop_n(route, 0) else { return }
            let index = rtnl_route_nh_get_ifindex(hop)
            guard usableIndexes.contains(index), let interface = interfaces[index],
                  rtnl_route_nh_get_flags(hop) & UInt32(RTNH_F_LINKDOWN) == 0 else { return }
            let family: AddressFamily = rtnl_route_get_family(route) == AF_INET ? .ipv4 : .ipv6
            let gateway = rtnl_route_nh_get_gateway(hop).flatMap(Self.ipAddress)
            defaults.append(.init(family: family, gateway: gateway, interface: interface, metric: rtnl_route_get_priority(route)))
        }
        defaults.sort { ($0.family == .ipv4 ? 0 : 1, $0.metric, $0.interface.index) < ($1.family == .ipv4 ? 0 : 1, $1.metric, $1.interface.index) }
        return NetworkStatus(usableInterfaces: usable, defaultRoutes: defaults)
    }

    // MARK: - Parsing

    /// Reads answers until `parse` returns a value for a message of this request.
    private func receive<T>(
        sequence: UInt32,
        operation: String,
        _ parse: (UnsafeMutablePointer<nlmsghdr>) throws(ReachabilityError) -> T?
    ) throws(ReachabilityError) -> T {
        while true {
            var peer = sockaddr_nl()
            var buffer: UnsafeMutablePointer<UInt8>?
            let count = nl_recv(socket.handle, &peer, &buffer, nil)
            defer { free(buffer) }
            if count == -NLE_INTR { continue }
            try NetlinkSocket.check(count, "nl_recv(\(operation))")
            guard count > 0, let buffer else {
                throw .netlink(operation: "nl_recv(\(operation))", code: Int32(NLE_FAILURE), errno: 0, message: "connection closed")
            }
            var remaining = count
            var header: UnsafeMutablePointer<nlmsghdr>? = UnsafeMutableRawPointer(buffer).assumingMemoryBound(to: nlmsghdr.self)
            while let current = header, nlmsg_ok(current, remaining) != 0 {
                // Answers to an earlier request that was abandoned are skipped.
                if current.pointee.nlmsg_seq == sequence, let value = try parse(current) { return value }
                header = nlmsg_next(current, &remaining)
            }
        }
    }

    private static func parseRoute(_ header: UnsafeMutablePointer<nlmsghdr>) -> RouteLookup {
        let route = UnsafeRawPointer(nlmsg_data(header)).load(as: rtmsg.self)
        let headerLength = Int32(MemoryLayout<rtmsg>.size)
        func attribute(_ type: rtattr_type_t) -> UnsafeMutablePointer<nlattr>? {
            nlmsg_find_attr(header, headerLength, Int32(type.rawValue))
        }
        func address(_ type: rtattr_type_t) -> IPAddress? {
            guard let attr = attribute(type), let data = nla_data(attr) else { return nil }
            return IPAddress(bytes: Array(UnsafeRawBufferPointer(start: data, count: Int(nla_len(attr)))))
        }
        let index = attribute(RTA_OIF).map { Int32(bitPattern: nla_get_u32($0)) } ?? 0
        return .route(.init(
            type: RouteType(rawValue: route.rtm_type),
            interfaceIndex: index,
            gateway: address(RTA_GATEWAY),
            preferredSource: address(RTA_PREFSRC),
            isLinkDown: route.rtm_flags & UInt32(RTNH_F_LINKDOWN) != 0
        ))
    }

    private static func describe(_ link: OpaquePointer) -> NetworkInterface {
        let name = rtnl_link_get_name(link).map { String(cString: $0) } ?? ""
        let index = rtnl_link_get_ifindex(link)
        let flags = rtnl_link_get_flags(link)
        let kind = InterfaceKind.classify(
            hardwareType: rtnl_link_get_arptype(link),
            linkKind: rtnl_link_get_type(link).map { String(cString: $0) },
            deviceType: deviceType(name: name, index: index)
        )
        return NetworkInterface(
            name: name,
            index: index,
            kind: kind,
            isAdminUp: flags & UInt32(IFF_UP) != 0,
            hasCarrier: flags & cnl_iff_lower_up() != 0,
            operState: OperState(rawValue: rtnl_link_get_operstate(link)),
            isPointToPoint: flags & UInt32(IFF_POINTOPOINT) != 0
        )
    }

    /// `DEVTYPE` from `/sys/class/net/NAME/uevent`, only if sysfs shows the same interface
    /// (sysfs belongs to the mount's namespace, which may not be the socket's).
    private static func deviceType(name: String, index: Int32) -> String? {
        guard !name.isEmpty, !name.contains("/"),
              let ifindex = readSmallFile("/sys/class/net/\(name)/ifindex"),
              Int32(ifindex.filter { !$0.isWhitespace }) == index,
              let uevent = readSmallFile("/sys/class/net/\(name)/uevent") else { return nil }
        for line in uevent.split(separator: "\n") where line.hasPrefix("DEVTYPE=") {
            return String(line.dropFirst("DEVTYPE=".count))
        }
        return nil
    }

    private static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8](repeating: 0, count: 4096)
        let count = read(fd, &bytes, bytes.count)
        guard count > 0 else { return nil }
        return String(decoding: bytes.prefix(count), as: UTF8.self)
    }

    private static func ipAddress(_ address: OpaquePointer) -> IPAddress? {
        guard let data = nl_addr_get_binary_addr(address) else { return nil }
        return IPAddress(bytes: Array(UnsafeRawBufferPointer(start: data, count: Int(nl_addr_get_len(address)))))
    }

    private static func forEach(in cache: OpaquePointer?, _ body: (OpaquePointer) -> Void) {
        var object = nl_cache_get_first(cache)
        while let current = object {
            body(current)
            object = nl_cache_get_next(current)
        }
    }
}
