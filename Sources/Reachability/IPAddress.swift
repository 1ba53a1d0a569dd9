#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An IPv4 or IPv6 address in network byte order.
///
/// Parsing and formatting follow `inet_pton(3)` / `inet_ntop(3)` (RFC 4291 §2.2 text forms for
/// IPv6, dotted quad for IPv4); no name resolution ever happens here.
public struct IPAddress: Hashable, Sendable, CustomStringConvertible {
    /// The address family: `.ipv4` (4 bytes) or `.ipv6` (16 bytes).
    public let family: AddressFamily
    /// The address bytes in network byte order: 4 for IPv4, 16 for IPv6.
    public let bytes: [UInt8]

    /// Creates an address from raw bytes.
    ///
    /// - Parameter bytes: 4 bytes (IPv4) or 16 bytes (IPv6), network byte order.
    /// - Returns: `nil` for any other length.
    public init?(bytes: [UInt8]) {
        switch bytes.count {
        case 4: family = .ipv4
        case 16: family = .ipv6
        default: return nil
        }
        self.bytes = bytes
    }

    /// Parses a literal address: a dotted-quad IPv4 address or an IPv6 address, optionally in
    /// brackets (`[2001:db8::1]`, the URL form of RFC 3986 §3.2.2).
    ///
    /// - Parameter string: the literal; no surrounding spaces, no zone index, no prefix length.
    /// - Returns: `nil` when `string` is not a literal address.
    public init?(_ string: String) {
        var text = Substring(string)
        if text.hasPrefix("["), text.hasSuffix("]") {
            text = text.dropFirst().dropLast()
            guard text.contains(":") else { return nil }
        }
        var v4 = [UInt8](repeating: 0, count: 4)
        var v6 = [UInt8](repeating: 0, count: 16)
        let literal = String(text)
        if inet_pton(AF_INET, literal, &v4) == 1 {
            family = .ipv4
            bytes = v4
        } else if inet_pton(AF_INET6, literal, &v6) == 1 {
            family = .ipv6
            bytes = v6
        } else {
            return nil
        }
    }

    /// The canonical text form (`inet_ntop(3)`; RFC 5952 for IPv6).
    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        let af = family == .ipv4 ? AF_INET : AF_INET6
        _ = inet_ntop(af, bytes, &buffer, socklen_t(buffer.count))
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether this is a loopback address: 127.0.0.0/8 (RFC 1122 §3.2.1.3) or ::1 (RFC 4291 §2.5.3).
    public var isLoopback: Bool {
        switch family {
        case .ipv4: return bytes[0] == 127
        case .ipv6: return bytes == [UInt8](repeating: 0, count: 15) + [1]
        }
    }

    /// Whether this is an IPv6 link-local address, fe80::/10 (RFC 4291 §2.5.6).
    public var isLinkLocal: Bool {
        family == .ipv6 && bytes[0] == 0xfe && (bytes[1] & 0xc0) == 0x80
    }
}

/// An IP address family.
public enum AddressFamily: String, Hashable, Sendable, CaseIterable, Codable {
    /// IPv4 (`AF_INET`).
    case ipv4
    /// IPv6 (`AF_INET6`).
    case ipv6
}
