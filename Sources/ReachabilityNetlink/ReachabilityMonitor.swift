import Dispatch
import Reachability
import SystemSupport

/// Watches the kernel's routing state through netlink and keeps the reachability of any
/// number of hosts current; `NetworkReachability` objects are its per-host views.
///
/// One non-blocking netlink socket in the link, address and route groups is read on a serial
/// queue. Every message means "re-evaluate": each watched destination gets a fresh kernel
/// route lookup (never a mirrored route table; the kernel does not announce every change), and
/// observers hear only of results that differ from the last one delivered. A burst is drained
/// before the evaluation, so the first change is evaluated at once and the rest coalesce. After
/// an overrun (`ENOBUFS`) everything is re-evaluated. Host names are re-resolved off the queue
/// after each change.
///
/// Sockets belong to the network namespace of the thread that creates the monitor.
public final class ReachabilityMonitor: Sendable {
    /// Counters for tests, benchmarks and diagnostics.
    public struct Statistics: Hashable, Sendable {
        /// Drains that read anything (each led to one re-evaluation of every watched host).
        public var batches = 0
        /// Netlink datagrams read.
        public var datagrams = 0
        /// Overruns (`ENOBUFS`) seen.
        public var overruns = 0
        /// Host evaluations made (each is one route lookup per address).
        public var evaluations = 0
        /// Values delivered to observers (one per changed host, whatever its observer count).
        public var notifications = 0
        /// Wall-clock time the last re-evaluation of every watched host took (route lookups,
        /// link queries and comparisons, not resolution).
        public var lastEvaluationDuration: Duration = .zero
        /// The last netlink failure met while monitoring, if any.
        public var lastError: ReachabilityError?
    }

    struct Watch {
        var host: ReachabilityHost
        var addresses: Result<[IPAddress], ReachabilityError>?
        var resolving = false
        var last: HostReachability?
        var observers: [UInt64: @Sendable (HostReachability) -> Void] = [:]
    }

    struct State {
        var watches: [UInt64: Watch] = [:]
        var nextID: UInt64 = 0
        var statistics = Statistics()
    }

    /// The serial queue that drains the socket and evaluates; internal so tests can hold it.
    let queue: DispatchQueue
    private let delivery: DispatchQueue
    private let resolverQueue = DispatchQueue(label: "ReachabilityMonitor.resolver", attributes: .concurrent)
    private let resolutions = DispatchGroup()
    private let resolver: any HostResolver
    private let client: Locked<NetlinkRouteClient>
    private let state = Locked(State())
    private let events = Locked<NetlinkEventSource?>(nil)

    /// Opens the monitor's netlink sockets in the calling thread's network namespace.
    ///
    /// - Parameters:
    ///   - deliveryQueue: where observers are called (main by default); a serial queue
    ///     targeting it keeps each host's values in order.
    ///   - resolver: resolves host names (the system resolver by default).
    ///   - options: socket settings.
    /// - Throws: `ReachabilityError.netlink` when a socket cannot be opened or joined.
    public init(
        deliveryQueue: DispatchQueue = .main,
        resolver: any HostResolver = SystemHostResolver(),
        options: NetlinkOptions = NetlinkOptions()
    ) throws(ReachabilityError) {
        queue = DispatchQueue(label: "ReachabilityMonitor")
        delivery = DispatchQueue(label: "ReachabilityMonitor.delivery", target: deliveryQueue)
        self.resolver = resolver
        client = Locked(try NetlinkRouteClient(netlinkProtocol: options.netlinkProtocol))
        let source = try NetlinkEventSource(queue: queue, options: options) { [weak self] batch in
            self?.handle(batch)
        }
        events.withLock { $0 = source }
    }

    /// Processes every netlink message the kernel has already queued for this monitor, waits
    /// for name resolutions in flight, and returns after the resulting observer calls ran.
    ///
    /// A test aid: after a change made with `ip` (or `NetworkLab`) returns, the kernel has
    /// queued its messages, so `synchronize()` makes the outcome observable without sleeping.
    /// Must not be called from the delivery queue.
    public func synchronize() {
        queue.sync { events.withLock { $0 }?.drainNow() }
        resolutions.wait()
        queue.sync {}
        delivery.sync {}
    }

    /// A snapshot of the counters.
    public var statistics: Statistics { state.withLock { $0.statistics } }

    /// Watches a host through this monitor.
    ///
    /// - Parameter host: an IP literal or host name (see `ReachabilityHost`).
    /// - Returns: the host's reachability object; it stops being watched when released.
    /// - Throws: `ReachabilityError.invalidHost` for a malformed host string.
    public func reachability(for host: String) throws(ReachabilityError) -> NetworkReachability {
        NetworkReachability(monitor: self, host: try ReachabilityHost(host))
    }

    /// Evaluates a host now, synchronously: resolves it if it is a name and looks up a route
    /// for each address.
    ///
    /// - Parameter host: the destination.
    /// - Returns: its reachability; resolution failures are inside the value, not thrown.
    public func evaluate(_ host: ReachabilityHost) -> HostReachability {
        var links: [Int32: NetworkInterface?] = [:]
        return evaluate(host, addresses: resolve(host), links: &links)
    }

    // MARK: - Watches (used by NetworkReachability)

    func register(_ host: ReachabilityHost) -> UInt64 {
        state.withLock { state in
            state.nextID += 1
            state.watches[state.nextID] = Watch(host: host)
            return state.nextID
        }
    }

    func unregister(_ id: UInt64) {
        _ = state.withLock { $0.watches.removeValue(forKey: id) }
    }

    func currentReachability(of id: UInt64) -> HostReachability? {
        guard let (host, cached) = state.withLock({ state in state.watches[id].map { ($0.host, $0.addresses) } }) else {
            return nil
        }
        let addresses = cached ?? resolve(host)
        state.withLock { state in
            if state.watches[id]?.addresses == nil { state.watches[id]?.addresses = addresses }
        }
        var links: [Int32: NetworkInterface?] = [:]
        return evaluate(host, addresses: addresses, links: &links)
    }

    func addObserver(to id: UInt64, _ handler: @escaping @Sendable (HostReachability) -> Void) -> ObservationToken {
        let token = state.withLock { state -> UInt64 in
            state.nextID += 1
            state.watches[id]?.observers[state.nextID] = handler
            return state.nextID
        }
        // The baseline is taken on the queue, between batches: every change after `observe`
        // returns is compared with it, and none before it is reported as a change.
        queue.sync { establishBaseline(of: id) }
        return ObservationToken { [weak self] in
            _ = self?.state.withLock { $0.watches[id]?.observers.removeValue(forKey: token) }
        }
    }

    // MARK: - Evaluation (on `queue`)

    private func establishBaseline(of id: UInt64) {
        guard let (host, cached, last) = state.withLock({ s in s.watches[id].map { ($0.host, $0.addresses, $0.last) } }),
              last == nil else { return }
        let addresses = cached ?? resolve(host)
        var links: [Int32: NetworkInterface?] = [:]
        let value = evaluate(host, addresses: addresses, links: &links)
        state.withLock { state in
            state.watches[id]?.addresses = addresses
            if state.watches[id]?.last == nil { state.watches[id]?.last = value }
        }
    }

    private func handle(_ batch: NetlinkEventSource.Batch) {
        state.withLock { state in
            state.statistics.batches += 1
            state.statistics.datagrams += batch.datagrams
            if batch.overrun { state.statistics.overruns += 1 }
            if let error = batch.error { state.statistics.lastError = error }
        }
        reevaluate(ids: nil)
        resolveNamesAgain()
    }

    /// Re-evaluates the watched hosts that have observers (all, or `ids`) and notifies changes.
    private func reevaluate(ids: Set<UInt64>?) {
        let targets = state.withLock { state in
            state.watches.compactMap { id, watch -> (UInt64, ReachabilityHost, Result<[IPAddress], ReachabilityError>?)? in
                guard !watch.observers.isEmpty, ids?.contains(id) ?? true else { return nil }
                return (id, watch.host, watch.addresses)
            }
        }
        let started = ContinuousClock.now
        var links: [Int32: NetworkInterface?] = [:]
        var results: [(UInt64, HostReachability)] = []
        results.reserveCapacity(targets.count)
        for (id, host, addresses) in targets {
            results.append((id, evaluate(host, addresses: addresses ?? resolve(host), links: &links)))
        }
        let duration = ContinuousClock.now - started
        let deliveries = state.withLock { state in
            state.statistics.evaluations += results.count
            if ids == nil { state.statistics.lastEvaluationDuration = duration }
            var deliveries: [(HostReachability, [@Sendable (HostReachability) -> Void])] = []
            for (id, value) in results {
                guard var watch = state.watches[id], watch.last != value else { continue }
                let isBaseline = watch.last == nil
                watch.last = value
                state.watches[id] = watch
                if isBaseline { continue }
                deliveries.append((value, Array(watch.observers.values)))
            }
            state.statistics.notifications += deliveries.count
            return deliveries
        }
        for (value, handlers) in deliveries {
            delivery.async { for handler in handlers { handler(value) } }
        }
    }

    /// Starts a new resolution of every watched name not already being resolved; a result
    /// that differs from the cached one triggers a re-evaluation of that host.
    private func resolveNamesAgain() {
        let names = state.withLock { state in
            state.watches.compactMap { id, watch -> (UInt64, ReachabilityHost)? in
                guard case .name = watch.host, !watch.resolving, !watch.observers.isEmpty else { return nil }
                state.watches[id]?.resolving = true
                return (id, watch.host)
            }
        }
        for (id, host) in names {
            resolutions.enter()
            resolverQueue.async { [weak self] in
                guard let self else { return }
                let addresses = self.resolve(host)
                self.queue.async {
                    defer { self.resolutions.leave() }
                    let changed = self.state.withLock { state -> Bool in
                        state.watches[id]?.resolving = false
                        guard state.watches[id] != nil, state.watches[id]?.addresses != addresses else { return false }
                        state.watches[id]?.addresses = addresses
                        return true
                    }
                    if changed { self.reevaluate(ids: [id]) }
                }
            }
        }
    }

    private func resolve(_ host: ReachabilityHost) -> Result<[IPAddress], ReachabilityError> {
        switch host {
        case .address(let address): return .success([address])
        case .name(let name): return Result { () throws(ReachabilityError) in try resolver.resolve(name) }
        }
    }

    private func evaluate(
        _ host: ReachabilityHost,
        addresses: Result<[IPAddress], ReachabilityError>,
        links: inout [Int32: NetworkInterface?]
    ) -> HostReachability {
        switch addresses {
        case .failure(let error):
            return HostReachability(host: host, paths: [], resolutionError: error)
        case .success(let addresses):
            let paths = client.withLock { client in
                addresses.map { address in Self.path(to: address, client: client, links: &links) }
            }
            return HostReachability(host: host, paths: paths)
        }
    }

    private static func path(
        to address: IPAddress,
        client: NetlinkRouteClient,
        links: inout [Int32: NetworkInterface?]
    ) -> NetworkPath {
        do {
            let lookup = try client.lookupRoute(to: address)
            var interface: NetworkInterface?
            if case .route(let route) = lookup {
                if let cached = links[route.interfaceIndex] {
                    interface = cached
                } else {
                    interface = try client.interface(index: route.interfaceIndex)
                    links[route.interfaceIndex] = .some(interface)
                }
            }
            return NetworkPath(destination: address, lookup: lookup, interface: interface)
        } catch {
            if case .netlink(_, _, let errno, _) = error, errno != 0 {
                return NetworkPath(destination: address, unsatisfied: .lookupFailed(errno: errno))
            }
            return NetworkPath(destination: address, unsatisfied: .lookupFailed(errno: 0))
        }
    }
}
