#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Turns a host name into addresses. A seam so tests can give a name several addresses in a
/// network namespace without touching `/etc/hosts`.
public protocol HostResolver: Sendable {
    /// Resolves `name` to its IPv4 and IPv6 addresses.
    ///
    /// - Parameter name: a validated host name (see `ReachabilityHost`).
    /// - Returns: the addresses, without duplicates, in the resolver's order (non-empty).
    /// - Throws: `ReachabilityError.resolutionFailed` when nothing resolves.
    func resolve(_ name: String) throws(ReachabilityError) -> [IPAddress]
}

/// The system resolver: `getaddrinfo(3)` with `AF_UNSPEC` and without `AI_ADDRCONFIG`, so an
/// address is reported even when no interface of its family is configured (reachability is
/// the route lookup's job, not the resolver's). Blocks for as long as the resolver does.
public struct SystemHostResolver: HostResolver {
    /// Creates the system resolver.
    public init() {}

    /// Resolves `name` with `getaddrinfo(3)`.
    ///
    /// - Parameter name: a host name.
    /// - Returns: the distinct IPv4 and IPv6 addresses in `getaddrinfo` order.
    /// - Throws: `ReachabilityError.resolutionFailed` with the `EAI_*` code and its text.
    public func resolve(_ name: String) throws(ReachabilityError) -> [IPAddress] {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(name, nil, &hints, &list)
        guard status == 0 else {
            throw .resolutionFailed(host: name, code: status, message: String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var addresses: [IPAddress] = []
        var entry = list
        while let info = entry?.pointee {
            entry = info.ai_next
            guard let sockaddr = info.ai_addr else { continue }
            let address: IPAddress?
            switch info.ai_family {
            case AF_INET:
                address = sockaddr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin_addr) { IPAddress(bytes: Array($0)) }
                }
            case AF_INET6:
                address = sockaddr.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                    withUnsafeBytes(of: $0.pointee.sin6_addr) { IPAddress(bytes: Array($0)) }
                }
            default:
                address = nil
            }
            if let address, !addresses.contains(address) { addresses.append(address) }
        }
        guard !addresses.isEmpty else {
            throw .resolutionFailed(host: name, code: EAI_NONAME, message: "no IPv4 or IPv6 address")
        }
        return addresses
    }
}
