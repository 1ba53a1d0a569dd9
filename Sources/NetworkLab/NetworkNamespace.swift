import SystemSupport

/// A named Linux network namespace owned by a ``NetworkLab``: its own links, addresses and
/// routes, changed from a test with iproute2 and entered with ``run(_:)``.
///
/// Every method runs `ip -n NAME …`, which applies the change inside the namespace only, and
/// throws ``NetworkLabError/closed`` once the lab is closed.
public final class NetworkNamespace: Sendable {
    /// The namespace's name, as `ip netns list` shows it and `ip -n` takes it.
    public let name: String
    private let thread: NamespaceThread
    private let isClosed = Locked(false)

    private init(name: String) {
        self.name = name
        // iproute2 bind-mounts each named namespace here (`ip netns add`).
        self.thread = NamespaceThread(path: "/var/run/netns/\(name)")
    }

    /// Creates the namespace with `ip netns add` and sets its loopback link up.
    static func create(named name: String) throws -> NetworkNamespace {
        try IPCommand.run(["netns", "add", name])
        let namespace = NetworkNamespace(name: name)
        do {
            try namespace.setLink("lo", up: true)
        } catch {
            namespace.close()
            throw error
        }
        return namespace
    }

    deinit {
        close()
    }

    /// Ends the namespace's thread and deletes the namespace; later calls do nothing.
    ///
    /// Sockets created in the namespace keep it alive, unnamed, until they are closed (kernel
    /// behaviour); its links disappear with it.
    func close() {
        let wasClosed = isClosed.withLock { isClosed in
            defer { isClosed = true }
            return isClosed
        }
        guard !wasClosed else { return }
        thread.end()
        // Best effort: a namespace left behind is removed by the next lab once this process
        // has exited.
        _ = try? IPCommand.run(["netns", "delete", name])
    }

    // MARK: Running code in the namespace

    /// Runs `body` synchronously on a dedicated thread that has joined this namespace.
    ///
    /// The thread joins with `setns(2)` and `CLONE_NEWNET` on `/var/run/netns/NAME`. A socket
    /// belongs to the namespace of the thread that creates it (kernel behaviour), so sockets
    /// created in `body`, netlink sockets included, belong to this namespace and keep belonging
    /// to it after `body` returns. The thread is created by the first call, reused by every later
    /// one (one `body` at a time, in call order), and ended when the lab closes. Calling `run`
    /// from within `body` on the same namespace runs the inner body inline.
    ///
    /// Only what `body` creates joins the namespace: a client that later opens new sockets on
    /// its own threads or Dispatch queues (to reconnect, say) opens them in the process's
    /// namespace. Threads started from `body` inherit the namespace (kernel behaviour), but
    /// Dispatch's pool threads do not, so create such sockets through `run` as well.
    ///
    /// - Parameter body: The work to do in the namespace; it must not block forever, or every
    ///   later call for this namespace waits behind it.
    /// - Returns: What `body` returns.
    /// - Throws: What `body` throws; ``NetworkLabError/setnsFailed(errno:)`` when the thread
    ///   cannot join the namespace; ``NetworkLabError/closed`` after the lab closed.
    public func run<T: Sendable>(_ body: @Sendable () throws -> T) throws -> T {
        try thread.run(body)
    }

    // MARK: Addresses

    /// Adds an address to a link, as `ip addr add CIDR dev LINK`.
    ///
    /// IPv6 addresses are added with `nodad`, so they are usable at once instead of staying
    /// tentative during duplicate address detection (RFC 4862 §5.4).
    ///
    /// - Parameters:
    ///   - cidr: The address and prefix length, such as `"192.0.2.2/24"` or `"2001:db8::2/64"`.
    ///   - link: The link's name, such as `"veth0"`.
    /// - Throws: ``NetworkLabError``: `commandFailed` when `ip` refuses (no such link, address
    ///   exists), `closed` after the lab closed.
    public func addAddress(_ cidr: String, to link: String) throws {
        let options = Self.isIPv6(cidr) ? ["nodad"] : []
        try ip(arguments: ["address", "add", cidr, "dev", link] + options)
    }

    /// Removes an address from a link, as `ip addr del CIDR dev LINK`.
    ///
    /// - Parameters:
    ///   - cidr: The address and prefix length exactly as it was added.
    ///   - link: The link's name.
    /// - Throws: ``NetworkLabError``: `commandFailed` when `ip` refuses (no such address),
    ///   `closed` after the lab closed.
    public func removeAddress(_ cidr: String, from link: String) throws {
        try ip(arguments: ["address", "del", cidr, "dev", link])
    }

    // MARK: Links

    /// Sets a link administratively up or down, as `ip link set LINK up|down`.
    ///
    /// Setting a link down also removes the routes through it (kernel behaviour).
    ///
    /// - Parameters:
    ///   - link: The link's name.
    ///   - up: `true` for up, `false` for down.
    /// - Throws: ``NetworkLabError``: `commandFailed` when `ip` refuses (no such link),
    ///   `closed` after the lab closed.
    public func setLink(_ link: String, up: Bool) throws {
        try ip(arguments: ["link", "set", link, up ? "up" : "down"])
    }

    /// Deletes a link, as `ip link del LINK`; deleting one end of a veth pair deletes both.
    ///
    /// - Parameter link: The link's name.
    /// - Throws: ``NetworkLabError``: `commandFailed` when `ip` refuses (no such link),
    ///   `closed` after the lab closed.
    public func removeLink(_ link: String) throws {
        try ip(arguments: ["link", "del", link])
    }

    // MARK: Routes

    /// Adds a unicast route, as `ip route add PREFIX [via GATEWAY] [dev DEVICE] [metric METRIC]`.
    ///
    /// The route is IPv6 when `prefix` or `gateway` contains a colon. For an IPv6 default route
    /// through a device alone, spell the prefix `"::/0"`.
    ///
    /// - Parameters:
    ///   - prefix: The destination, such as `"198.51.100.0/24"`, `"2001:db8:1::/48"` or `"default"`.
    ///   - gateway: The next hop, which must be on-link; `nil` for a route straight out of `device`.
    ///   - device: The outgoing link; `nil` to let the kernel pick it from `gateway`.
    ///   - metric: The route's priority, lower preferred; `nil` for the kernel's default
    ///     (0 for IPv4, 1024 for IPv6).
    /// - Throws: ``NetworkLabError``: `commandFailed` when `ip` refuses (unreachable gateway,
    ///   route exists), `closed` after the lab closed.
    public func addRoute(_ prefix: String, via gateway: String? = nil, device: String? = nil, metric: Int? = nil) throws {
        let options = metric.map { ["metric", String($0)] } ?? []
        try ip(arguments: Self.routeArguments("add", prefix, via: gateway, device: device) + options)
    }

    /// Removes a unicast route, as `ip route del PREFIX [via GATEWAY] [dev DEVICE]`.
    ///
    /// - Parameters:
    ///   - prefix: The destination as it was added.
    ///   - gateway: The next hop, to pick one of several routes to `prefix`; `nil` for any.
    ///   - device: The outgoing link, to pick one of several routes to `prefix`; `nil` for any.
    /// - Throws: ``NetworkLabError``: `commandFailed` when `ip` refuses (no such route),
    ///   `closed` after the lab closed.
    public func removeRoute(_ prefix: String, via gateway: String? = nil, device: String? = nil) throws {
        try ip(arguments: Self.routeArguments("del", prefix, via: gateway, device: device))
    }

    /// Adds a route that makes lookups for `prefix` fail, as `ip route add KIND PREFIX`.
    ///
    /// - Parameters:
    ///   - kind: How lookups fail; see ``RouteKind``.
    ///   - prefix: The destination, such as `"203.0.113.0/24"` or `"2001:db8:2::/48"`.
    /// - Throws: ``NetworkLabError``: `commandFailed` when `ip` refuses (route exists),
    ///   `closed` after the lab closed.
    public func addRoute(_ kind: RouteKind, _ prefix: String) throws {
        try ip(arguments: Self.familyOption(prefix) + ["route", "add", kind.rawValue, prefix])
    }

    /// Removes a route added with ``addRoute(_:_:)``, as `ip route del KIND PREFIX`.
    ///
    /// - Parameters:
    ///   - kind: The kind it was added with.
    ///   - prefix: The destination as it was added.
    /// - Throws: ``NetworkLabError``: `commandFailed` when `ip` refuses (no such route),
    ///   `closed` after the lab closed.
    public func removeRoute(_ kind: RouteKind, _ prefix: String) throws {
        try ip(arguments: Self.familyOption(prefix) + ["route", "del", kind.rawValue, prefix])
    }

    // MARK: Escape hatch

    /// Runs `ip -n NAME ARGUMENTS…` for anything the helpers above do not cover.
    ///
    /// - Parameter arguments: The arguments after `ip -n NAME`, one per word, such as
    ///   `"-6", "route", "show"`.
    /// - Returns: What `ip` wrote to standard output.
    /// - Throws: ``NetworkLabError``: `commandFailed` with `ip`'s standard error when it exits
    ///   non-zero, `closed` after the lab closed.
    @discardableResult
    public func ip(_ arguments: String...) throws -> String {
        try ip(arguments: arguments)
    }

    /// Runs `ip -n NAME ARGUMENTS…`, the arguments given as an array.
    ///
    /// - Parameter arguments: The arguments after `ip -n NAME`, one per word.
    /// - Returns: What `ip` wrote to standard output.
    /// - Throws: ``NetworkLabError``: `commandFailed` with `ip`'s standard error when it exits
    ///   non-zero, `closed` after the lab closed.
    @discardableResult
    public func ip(arguments: [String]) throws -> String {
        guard !isClosed.withLock({ $0 }) else { throw NetworkLabError.closed }
        return try IPCommand.run(["-n", name] + arguments)
    }

    // MARK: Helpers

    private static func isIPv6(_ address: String) -> Bool {
        address.contains(":")
    }

    private static func familyOption(_ addresses: String?...) -> [String] {
        addresses.contains { $0.map(isIPv6) ?? false } ? ["-6"] : []
    }

    private static func routeArguments(_ command: String, _ prefix: String, via gateway: String?, device: String?) -> [String] {
        var arguments = familyOption(prefix, gateway) + ["route", command, prefix]
        if let gateway { arguments += ["via", gateway] }
        if let device { arguments += ["dev", device] }
        return arguments
    }
}
