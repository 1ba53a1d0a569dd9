
/// Something that knows the reachability of one host and says when it changes: the seam
/// between the Reconnector (and anything above it) and the platform.
///
/// `NetworkReachability` (netlink) is the Linux implementation; `FakeReachabilitySource` in
/// `ReconnectTesting` is the test double. Implementations are thread-safe.
public protocol ReachabilitySource: AnyObject, Sendable {
    /// The watched host.
    var host: ReachabilityHost { get }

    /// The reachability now, computed synchronously (may resolve the name and look up routes).
    func currentReachability() -> HostReachability

    /// Registers a handler called with each changed reachability value, after the change and
    /// only when the evaluated result differs from the last one delivered.
    ///
    /// - Parameter handler: called on the source's delivery queue, never concurrently with
    ///   itself.
    /// - Returns: a token; the handler stays registered until `cancel()` is called on it.
    func observe(_ handler: @escaping @Sendable (HostReachability) -> Void) -> ObservationToken
}

extension ReachabilitySource {
    /// The current flags (`currentReachability().flags`), like `SCNetworkReachabilityGetFlags`.
    public var flags: ReachabilityFlags { currentReachability().flags }

    /// Changes as an `AsyncStream`; the observation ends when the consuming task is cancelled
    /// or the stream is dropped. Buffers the newest value only, since each value supersedes the
    /// previous one.
    public func changes() -> AsyncStream<HostReachability> {
        AsyncStream(bufferingPolicy: .bufferingNewest(1)) { continuation in
            let observation = observe { continuation.yield($0) }
            continuation.onTermination = { _ in observation.cancel() }
        }
    }
}
