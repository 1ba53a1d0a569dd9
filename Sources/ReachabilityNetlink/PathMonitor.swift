import Dispatch
import Reachability
import SystemSupport

/// Watches the host's network as a whole, in the spirit of `NWPathMonitor`: usable
/// interfaces and the default route per family, reported when they change.
///
/// Driven by the same netlink groups as `ReachabilityMonitor`; after each drained burst (or an
/// overrun) the links, addresses and routes are dumped afresh and summarised, and observers
/// hear only of a summary that differs from the last one.
public final class PathMonitor: Sendable {
    private let queue = DispatchQueue(label: "PathMonitor")
    private let delivery: DispatchQueue
    private let client: Locked<NetlinkRouteClient>
    private let state = Locked(State())
    private let events = Locked<NetlinkEventSource?>(nil)
    private let observers = ObserverList<NetworkStatus>()

    private struct State {
        var last: NetworkStatus?
        var lastError: ReachabilityError?
    }

    /// Opens the monitor's netlink sockets in the calling thread's network namespace.
    ///
    /// - Parameters:
    ///   - deliveryQueue: where observers are called (main by default).
    ///   - options: socket settings.
    /// - Throws: `ReachabilityError.netlink` when a socket cannot be opened or joined.
    public init(deliveryQueue: DispatchQueue = .main, options: NetlinkOptions = NetlinkOptions()) throws(ReachabilityError) {
        delivery = DispatchQueue(label: "PathMonitor.delivery", target: deliveryQueue)
        client = Locked(try NetlinkRouteClient(netlinkProtocol: options.netlinkProtocol))
        let source = try NetlinkEventSource(queue: queue, options: options) { [weak self] batch in
            self?.refresh(error: batch.error)
        }
        events.withLock { $0 = source }
    }

    /// The network's state now (three netlink dumps).
    ///
    /// - Throws: `ReachabilityError.netlink` when a dump fails.
    public func currentStatus() throws(ReachabilityError) -> NetworkStatus {
        try client.withLock { client throws(ReachabilityError) in try client.networkStatus() }
    }

    /// Processes every netlink message already queued and returns after the resulting observer
    /// calls ran: a test aid, as `ReachabilityMonitor.synchronize()`. Not from the delivery
    /// queue.
    public func synchronize() {
        queue.sync { events.withLock { $0 }?.drainNow() }
        delivery.sync {}
    }

    /// The last netlink failure met while monitoring, if any.
    public var lastError: ReachabilityError? { state.withLock { $0.lastError } }

    /// Calls `handler` on the delivery queue each time the status changes.
    ///
    /// - Parameter handler: receives the new status.
    /// - Returns: a token; `cancel()` it to stop.
    public func observe(_ handler: @escaping @Sendable (NetworkStatus) -> Void) -> ObservationToken {
        let token = observers.add(handler)
        queue.sync { if state.withLock({ $0.last == nil }) { refresh(error: nil, deliver: false) } }
        return token
    }

    /// Status changes as an `AsyncStream` (newest value buffered); ends with its task.
    public func updates() -> AsyncStream<NetworkStatus> {
        AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let observation = observe { continuation.yield($0) }
            continuation.onTermination = { _ in observation.cancel() }
        }
    }

    private func refresh(error: ReachabilityError?, deliver: Bool = true) {
        let status: NetworkStatus
        do {
            status = try currentStatus()
        } catch {
            state.withLock { $0.lastError = error }
            return
        }
        let changed = state.withLock { state -> Bool in
            if let error { state.lastError = error }
            guard state.last != status else { return false }
            state.last = status
            return true
        }
        guard changed, deliver else { return }
        delivery.async { [observers] in observers.send(status) }
    }
}
