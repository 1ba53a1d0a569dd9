import Dispatch
import Reachability

/// The reachability of one host on Linux: the counterpart of Apple's
/// `SCNetworkReachability`, computed from the kernel's route lookup for the host's addresses
/// and kept current by netlink (see `ReachabilityMonitor`).
///
/// ```swift
/// let reachability = try NetworkReachability(host: "198.51.100.7", deliveryQueue: queue)
/// print(reachability.flags)                                  // synchronous
/// let observation = reachability.observe { print($0.flags) } // each change, on `queue`
/// for await value in reachability.changes() { … }            // or as an AsyncSequence
/// ```
///
/// A host name is resolved when first needed and again after every network change; the host
/// is reachable when any of its addresses is. The object stops watching when released.
public final class NetworkReachability: ReachabilitySource {
    /// The watched host.
    public let host: ReachabilityHost
    /// The monitor doing the work (shared when created through `ReachabilityMonitor`).
    public let monitor: ReachabilityMonitor
    private let id: UInt64

    /// Watches `host` with a monitor of its own, opened in the calling thread's network
    /// namespace. To watch many hosts, share one monitor: `monitor.reachability(for:)`.
    ///
    /// - Parameters:
    ///   - host: an IPv4/IPv6 literal (brackets allowed) or a host name.
    ///   - deliveryQueue: where observers are called (main by default).
    ///   - resolver: resolves host names (the system resolver by default).
    /// - Throws: `ReachabilityError.invalidHost` for a malformed host string;
    ///   `ReachabilityError.netlink` when the netlink sockets cannot be opened.
    public convenience init(
        host: String,
        deliveryQueue: DispatchQueue = .main,
        resolver: any HostResolver = SystemHostResolver()
    ) throws(ReachabilityError) {
        let parsed = try ReachabilityHost(host)
        let monitor = try ReachabilityMonitor(deliveryQueue: deliveryQueue, resolver: resolver)
        self.init(monitor: monitor, host: parsed)
    }

    init(monitor: ReachabilityMonitor, host: ReachabilityHost) {
        self.monitor = monitor
        self.host = host
        self.id = monitor.register(host)
    }

    deinit { monitor.unregister(id) }

    /// The reachability now: resolves the name if it never was (blocking), then looks up a
    /// route for each address. Cheap for literals (one netlink round trip per address).
    ///
    /// - Returns: the host's reachability; a resolution failure is inside the value.
    public func currentReachability() -> HostReachability {
        monitor.currentReachability(of: id) ?? monitor.evaluate(host)
    }

    /// Calls `handler` on the delivery queue each time the host's evaluated reachability
    /// changes (never for a netlink message that changes nothing for this host).
    ///
    /// - Parameter handler: receives the new value.
    /// - Returns: a token; `cancel()` it to stop. The token keeps this object (and so the
    ///   watch) alive until then.
    public func observe(_ handler: @escaping @Sendable (HostReachability) -> Void) -> ObservationToken {
        let registration = monitor.addObserver(to: id, handler)
        return ObservationToken { withExtendedLifetime(self) { registration.cancel() } }
    }
}
