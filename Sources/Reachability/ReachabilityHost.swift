/// A destination to watch: a literal IP address or a DNS host name, validated up front so
/// that bad input fails with a typed error instead of a resolver surprise.
public enum ReachabilityHost: Hashable, Sendable, CustomStringConvertible {
    /// A literal IPv4 or IPv6 address: no resolution needed.
    case address(IPAddress)
    /// A host name to resolve (RFC 1123 §2.1 syntax), stored in lower case.
    case name(String)

    /// Parses and validates a host string.
    ///
    /// Accepted: a dotted-quad IPv4 literal, an IPv6 literal with or without brackets, or a
    /// host name of at most 253 characters in dot-separated labels of 1–63 letters, digits,
    /// hyphens or underscores, not starting or ending with a hyphen, with a trailing dot
    /// allowed (RFC 1123 §2.1, RFC 2181 §11). A name whose last label is all digits
    /// (`256.1.1.1`) is refused: it is neither an address nor a valid name (RFC 3696 §2).
    ///
    /// - Parameter string: the host as the user gave it.
    /// - Throws: `ReachabilityError.invalidHost` naming the problem.
    public init(_ string: String) throws(ReachabilityError) {
        // A C parser would stop at a NUL and take "1.2.3.4\0junk" for 1.2.3.4.
        guard !string.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw .invalidHost(string, "control character")
        }
        if let address = IPAddress(string) {
            self = .address(address)
            return
        }
        var name = string
        if name.hasSuffix(".") { name.removeLast() }
        guard !name.isEmpty else { throw .invalidHost(string, "empty host") }
        guard name.utf8.count <= 253 else { throw .invalidHost(string, "longer than 253 characters") }
        let labels = name.split(separator: ".", omittingEmptySubsequences: false)
        for label in labels {
            guard !label.isEmpty else { throw .invalidHost(string, "empty label") }
            guard label.utf8.count <= 63 else { throw .invalidHost(string, "label longer than 63 characters") }
            let allowed = label.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A)
                    || (byte >= 0x61 && byte <= 0x7A) || byte == 0x2D || byte == 0x5F
            }
            guard allowed else { throw .invalidHost(string, "invalid character in \"\(label)\"") }
            guard label.first != "-", label.last != "-" else {
                throw .invalidHost(string, "label \"\(label)\" starts or ends with a hyphen")
            }
        }
        if let last = labels.last, last.allSatisfy(\.isNumber) {
            throw .invalidHost(string, "not a valid IP address and not a host name")
        }
        self = .name(name.lowercased())
    }

    /// The address or name as text.
    public var description: String {
        switch self {
        case .address(let address): return address.description
        case .name(let name): return name
        }
    }
}
