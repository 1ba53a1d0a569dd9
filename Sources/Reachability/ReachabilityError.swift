/// Errors of the reachability layer.
public enum ReachabilityError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The host string is neither an IP literal nor a valid host name.
    /// - Parameters: the string given, and what is wrong with it.
    case invalidHost(String, String)
    /// The host name did not resolve (`getaddrinfo(3)` error code and `gai_strerror` text),
    /// or resolved to no IPv4/IPv6 address.
    case resolutionFailed(host: String, code: Int32, message: String)
    /// A netlink operation failed: which one, the libnl error code (`NLE_*`, positive) and the
    /// errno behind it when known (0 otherwise).
    case netlink(operation: String, code: Int32, errno: Int32, message: String)

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .invalidHost(let host, let problem): return "invalid host \"\(host)\": \(problem)"
        case .resolutionFailed(let host, _, let message): return "cannot resolve \"\(host)\": \(message)"
        case .netlink(let operation, let code, let errno, let message):
            return "netlink \(operation) failed: \(message) (libnl \(code), errno \(errno))"
        }
    }
}
