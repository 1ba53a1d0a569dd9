import Reachability
import SystemSupport

/// A `ReachabilitySource` whose value the test sets: observers are called synchronously, on
/// the caller's thread, when `set(_:)` changes the value, so tests need no queues or sleeps.
public final class FakeReachabilitySource: ReachabilitySource {
    private struct State {
        var value: HostReachability
        var evaluations = 0
    }

    /// The host this source pretends to watch.
    public let host: ReachabilityHost
    private let state: Locked<State>
    private let observers = ObserverList<HostReachability>()

    /// Creates a fake source.
    ///
    /// - Parameters:
    ///   - host: the host it reports on.
    ///   - flags: the initial flags (reachable and direct by default).
    public init(host: ReachabilityHost = .name("fake.test"), flags: ReachabilityFlags = [.reachable, .isDirect]) {
        self.host = host
        state = Locked(State(value: Self.value(host: host, flags: flags)))
    }

    /// How many times `currentReachability()` was called.
    public var evaluations: Int { state.withLock { $0.evaluations } }

    /// How many observers are registered now.
    public var observerCount: Int { observers.count }

    /// The current value; counts as an evaluation.
    public func currentReachability() -> HostReachability {
        state.withLock { state in
            state.evaluations += 1
            return state.value
        }
    }

    /// Registers an observer, called synchronously by `set(_:)` on changes.
    ///
    /// - Parameter handler: receives each new value.
    /// - Returns: a token that removes the observer.
    public func observe(_ handler: @escaping @Sendable (HostReachability) -> Void) -> ObservationToken {
        observers.add(handler)
    }

    /// Sets the flags; observers hear of it only if the value changed.
    ///
    /// - Parameters:
    ///   - flags: the new flags.
    ///   - reason: the reason to report when not reachable (no route by default).
    public func set(_ flags: ReachabilityFlags, reason: UnreachableReason = .networkUnreachable) {
        set(Self.value(host: host, flags: flags, reason: reason))
    }

    /// Sets the whole value; observers hear of it only if it changed.
    ///
    /// - Parameter value: the new reachability.
    public func set(_ value: HostReachability) {
        let changed = state.withLock { state -> Bool in
            guard state.value != value else { return false }
            state.value = value
            return true
        }
        if changed { observers.send(value) }
    }

    private static func value(host: ReachabilityHost, flags: ReachabilityFlags, reason: UnreachableReason = .networkUnreachable) -> HostReachability {
        let destination: IPAddress
        if case .address(let address) = host { destination = address } else { destination = IPAddress("192.0.2.1")! }
        var path = NetworkPath(destination: destination, unsatisfied: reason)
        path.flags = flags
        if flags.contains(.reachable) {
            path.status = .satisfied
            path.reason = nil
        }
        return HostReachability(host: host, paths: [path])
    }
}
