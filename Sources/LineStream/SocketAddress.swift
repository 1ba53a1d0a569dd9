#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// One IPv4 or IPv6 socket address from `getaddrinfo(3)`, copied out of the list it came in.
package struct SocketAddress: Sendable, CustomStringConvertible {
    package let family: Int32
    private let storage: sockaddr_storage
    package let length: socklen_t

    package init?(_ address: UnsafePointer<sockaddr>, length: socklen_t) {
        family = Int32(address.pointee.sa_family)
        guard family == AF_INET || family == AF_INET6, length <= socklen_t(MemoryLayout<sockaddr_storage>.size) else {
            return nil
        }
        var storage = sockaddr_storage()
        withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(length))) }
        self.storage = storage
        self.length = length
    }

    /// Calls `body` with the address as the `sockaddr` pointer the socket calls take.
    package func withSockaddr<Result>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> Result) -> Result {
        withUnsafeBytes(of: storage) { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }

    /// "127.0.0.1:5222" or "[::1]:5222".
    package var description: String {
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let status = withSockaddr { address, length in
            getnameinfo(address, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV)
        }
        guard status == 0 else { return "?" }
        let name = String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let port = String(decoding: service.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        return family == AF_INET6 ? "[\(name)]:\(port)" : "\(name):\(port)"
    }

    /// Resolves `host` and `port` to stream socket addresses, in `getaddrinfo` order.
    ///
    /// - Parameters:
    ///   - host: a name or an IPv4/IPv6 literal (brackets around IPv6 allowed).
    ///   - port: the TCP port.
    ///   - passive: for `bind(2)` rather than `connect(2)` (`AI_PASSIVE`).
    /// - Returns: at least one address.
    /// - Throws: `TCPConnectionError.resolutionFailed` with the `EAI_*` code.
    package static func resolve(host: String, port: UInt16, passive: Bool = false) throws(TCPConnectionError) -> [SocketAddress] {
        var name = host
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        guard !name.isEmpty, !name.utf8.contains(0) else {
            throw .resolutionFailed(host: host, code: EAI_NONAME, message: String(cString: gai_strerror(EAI_NONAME)))
        }
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(name, String(port), &hints, &list)
        guard status == 0 else {
            let message = status == EAI_SYSTEM ? TCPConnectionError.describe(errno: errno) : String(cString: gai_strerror(status))
            throw .resolutionFailed(host: host, code: status, message: message)
        }
        defer { freeaddrinfo(list) }
        var addresses: [SocketAddress] = []
        var entry = list
        while let info = entry?.pointee {
            entry = info.ai_next
            if let pointer = info.ai_addr, let address = SocketAddress(pointer, length: info.ai_addrlen) {
                addresses.append(address)
            }
        }
        guard !addresses.isEmpty else {
            throw .resolutionFailed(host: host, code: 0, message: "no IPv4 or IPv6 address")
        }
        return addresses
    }

    /// The local address of a bound socket (`getsockname(2)`).
    package static func local(of fd: Int32) -> SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard status == 0 else { return nil }
        return withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0, length: length) }
        }
    }

    /// The port, in host byte order.
    package var port: UInt16 {
        withSockaddr { address, _ in
            if family == AF_INET6 {
                return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
    }
}
