import Dispatch
import Reachability
@testable import ReachabilityNetlink
import ReconnectTesting
import SystemSupport
import Testing
import NetworkLab

/// A private namespace with one veth link to a remote peer, and a `ReachabilityMonitor` whose
/// sockets live in that namespace:
///
///     local: veth0 192.0.2.2/24 2001:db8::2/64  <->  remote: peer0 192.0.2.1/24 2001:db8::1/64
final class LabFixture: Sendable {
    let lab: NetworkLab
    let monitor: ReachabilityMonitor
    let queue = DispatchQueue(label: "LabFixture.delivery")

    init(resolver: any HostResolver = SystemHostResolver(), options: NetlinkOptions = NetlinkOptions()) throws {
        lab = try NetworkLab()
        try lab.addVethLink("veth0", peer: "peer0")
        try lab.local.addAddress("192.0.2.2/24", to: "veth0")
        try lab.remote.addAddress("192.0.2.1/24", to: "peer0")
        try lab.local.addAddress("2001:db8::2/64", to: "veth0")
        try lab.remote.addAddress("2001:db8::1/64", to: "peer0")
        let queue = queue
        monitor = try lab.local.run { try ReachabilityMonitor(deliveryQueue: queue, resolver: resolver, options: options) }
    }

    /// Watches a host and records every value delivered.
    func watch(_ host: String) throws -> Recorder {
        Recorder(try monitor.reachability(for: host))
    }

    /// Runs `change`, then lets the monitor process what the kernel queued.
    func change(_ change: () throws -> Void) throws {
        try change()
        monitor.synchronize()
    }
}

/// Keeps a watched host and the values its observer received.
final class Recorder: Sendable {
    let reachability: NetworkReachability
    private let values = Locked<[HostReachability]>([])
    private let observation = Locked<ObservationToken?>(nil)
    private let delivered = DispatchSemaphore(value: 0)

    init(_ reachability: NetworkReachability) {
        self.reachability = reachability
        let token = reachability.observe { [weak self] value in
            self?.values.withLock { $0.append(value) }
            self?.delivered.signal()
        }
        observation.withLock { $0 = token }
    }

    /// Waits until `count` values were delivered in all, or `timeout` passed.
    ///
    /// For changes the kernel reports late on its own: carrier changes go through the
    /// kernel's linkwatch work, which may run up to a second after `ip` returned.
    /// - Returns: whether the count was reached.
    func waitForNotifications(_ count: Int, timeout: Duration = .seconds(5)) -> Bool {
        let deadline = DispatchTime.now() + .milliseconds(Int(timeout.components.seconds * 1000))
        while notifications.count < count {
            if delivered.wait(timeout: deadline) == .timedOut { return notifications.count >= count }
        }
        return true
    }

    /// Every value delivered so far.
    var notifications: [HostReachability] { values.withLock { $0 } }

    /// The value the observer heard last, or the current one if it heard nothing.
    var last: HostReachability { notifications.last ?? reachability.currentReachability() }
}

extension Trait where Self == ConditionTrait {
    /// Namespace tests: need root and `ip netns`; with CI=true they always run (and fail loudly).
    static var networkLab: Self {
        .enabled(if: NetworkLab.shouldRunTests, "needs root and ip netns: \(NetworkLab.unavailableReason ?? "")")
    }
}
