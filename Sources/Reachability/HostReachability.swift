/// Reachability of one watched host: one `NetworkPath` per resolved address.
///
/// A host is reachable when any of its addresses is (as `SCNetworkReachability` does for a
/// name with several addresses).
public struct HostReachability: Hashable, Sendable {
    /// The host as watched.
    public var host: ReachabilityHost
    /// One path per address, in resolver order; empty when resolution failed.
    public var paths: [NetworkPath]
    /// Set when the name did not resolve.
    public var resolutionError: ReachabilityError?

    /// Creates a reachability value.
    ///
    /// - Parameters:
    ///   - host: the watched host.
    ///   - paths: one evaluated path per address.
    ///   - resolutionError: the resolver's failure, if any.
    public init(host: ReachabilityHost, paths: [NetworkPath], resolutionError: ReachabilityError? = nil) {
        self.host = host
        self.paths = paths
        self.resolutionError = resolutionError
    }

    /// The path that decides the flags: the first satisfied path in resolver order, else the
    /// first path; `nil` when nothing resolved.
    public var primaryPath: NetworkPath? {
        paths.first { $0.status == .satisfied } ?? paths.first
    }

    /// The flags of `primaryPath`, or none.
    public var flags: ReachabilityFlags { primaryPath?.flags ?? [] }

    /// Whether any address is reachable.
    public var isReachable: Bool { flags.contains(.reachable) }

    /// Why the host is not reachable: the resolver's failure, or the primary path's reason;
    /// `nil` when reachable.
    public var reason: UnreachableReason? {
        if isReachable { return nil }
        if case .resolutionFailed(_, _, let message)? = resolutionError { return .resolutionFailed(message) }
        return primaryPath?.reason
    }
}
