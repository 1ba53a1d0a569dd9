#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a destination is not reachable: the kernel's answer to the route lookup, or the state of
/// the route's interface.
public enum UnreachableReason: Hashable, Sendable, CustomStringConvertible {
    /// No route matches (`ENETUNREACH`), for example after the link went admin-down and the
    /// kernel flushed its IPv4 routes.
    case networkUnreachable
    /// An `unreachable` route matches (`EHOSTUNREACH`).
    case hostUnreachable
    /// A `prohibit` route matches (`EACCES`).
    case prohibited
    /// A `blackhole` route matches (`EINVAL`).
    case blackhole
    /// The lookup failed with another errno.
    case lookupFailed(errno: Int32)
    /// A route exists but its interface is administratively down.
    case interfaceDown(String)
    /// A route exists but its interface has no carrier or is not operationally up
    /// (for example a veth whose peer went down: operstate `lowerlayerdown`).
    case noCarrier(String)
    /// A route exists but its interface is gone (the lookup raced a link deletion).
    case interfaceMissing(index: Int32)
    /// The route type is neither unicast nor local (broadcast, multicast, anycast …).
    case unsupportedRouteType(RouteType)
    /// The host name did not resolve; the message is `gai_strerror(3)`'s.
    case resolutionFailed(String)

    /// Maps the errno of a failed route lookup to a reason (kernel behaviour checked with
    /// `ip route get`: no route → ENETUNREACH, unreachable → EHOSTUNREACH, prohibit → EACCES,
    /// blackhole → EINVAL, for IPv4 and IPv6).
    ///
    /// - Parameter errno: the positive errno from the kernel's `NLMSG_ERROR` answer.
    /// - Returns: the matching reason, or `.lookupFailed(errno:)`.
    public static func lookupError(_ errno: Int32) -> UnreachableReason {
        switch errno {
        case ENETUNREACH: return .networkUnreachable
        case EHOSTUNREACH: return .hostUnreachable
        case EACCES: return .prohibited
        case EINVAL: return .blackhole
        default: return .lookupFailed(errno: errno)
        }
    }

    /// A short machine-friendly code: `networkUnreachable`, `hostUnreachable`, `prohibited`,
    /// `blackhole`, `lookupFailed`, `interfaceDown`, `noCarrier`, `interfaceMissing`,
    /// `unsupportedRouteType`, `resolutionFailed`.
    public var code: String {
        switch self {
        case .networkUnreachable: return "networkUnreachable"
        case .hostUnreachable: return "hostUnreachable"
        case .prohibited: return "prohibited"
        case .blackhole: return "blackhole"
        case .lookupFailed: return "lookupFailed"
        case .interfaceDown: return "interfaceDown"
        case .noCarrier: return "noCarrier"
        case .interfaceMissing: return "interfaceMissing"
        case .unsupportedRouteType: return "unsupportedRouteType"
        case .resolutionFailed: return "resolutionFailed"
        }
    }

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .networkUnreachable: return "network unreachable (no route)"
        case .hostUnreachable: return "host unreachable (unreachable route)"
        case .prohibited: return "prohibited (prohibit route)"
        case .blackhole: return "blackhole route"
        case .lookupFailed(let errno): return "route lookup failed: " + String(cString: strerror(errno))
        case .interfaceDown(let name): return "interface \(name) is down"
        case .noCarrier(let name): return "interface \(name) has no carrier"
        case .interfaceMissing(let index): return "interface #\(index) is gone"
        case .unsupportedRouteType(let type): return "\(type) route"
        case .resolutionFailed(let message): return "name resolution failed: \(message)"
        }
    }
}
