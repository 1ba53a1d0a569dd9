/// The parts of a `ws://` or `wss://` URL that libwebsockets' client connect needs
/// (RFC 6455 §3: `ws-URI = "ws:" "//" host [ ":" port ] path [ "?" query ]`).
struct WebSocketURL: Hashable, Sendable {
    /// The URL as given.
    var string: String
    /// `wss`: TLS.
    var isSecure: Bool
    /// The host to connect to: a name, an IPv4 literal, or an IPv6 literal without brackets.
    var host: String
    /// The TCP port: explicit, or 80 for ws and 443 for wss (RFC 6455 §3).
    var port: Int
    /// Path and query to request, `/` when the URL has none.
    var resource: String
    /// Numeric addresses `host` resolved to (`HostResolver`), tried in order; empty when
    /// `host` is itself an address.
    var addresses: [String] = []

    /// The `Host` header: the host (IPv6 in brackets), with the port unless it is the default.
    var hostHeader: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == (isSecure ? 443 : 80) ? name : "\(name):\(port)"
    }

    /// The `Origin` header: the scheme's HTTP counterpart and the host header.
    var origin: String { (isSecure ? "https://" : "http://") + hostHeader }

    /// Parses a WebSocket URL.
    ///
    /// - Parameter string: `ws://host[:port][/path][?query]` or `wss://…`; a fragment is
    ///   refused (RFC 6455 §3), as is userinfo.
    /// - Throws: `WebSocketError.invalidURL` saying what is wrong.
    init(_ string: String) throws(WebSocketError) {
        self.string = string
        let lowered = string.lowercased()
        let rest: Substring
        if lowered.hasPrefix("ws://") {
            isSecure = false
            rest = string.dropFirst(5)
        } else if lowered.hasPrefix("wss://") {
            isSecure = true
            rest = string.dropFirst(6)
        } else {
            throw .invalidURL(string, reason: "the scheme must be ws or wss")
        }
        if rest.contains("#") { throw .invalidURL(string, reason: "a fragment is not allowed (RFC 6455 §3)") }
        let authorityEnd = rest.firstIndex(where: { $0 == "/" || $0 == "?" }) ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var resource = String(rest[authorityEnd...])
        if resource.isEmpty {
            resource = "/"
        } else if resource.hasPrefix("?") {
            resource = "/" + resource
        }
        self.resource = resource
        if authority.contains("@") { throw .invalidURL(string, reason: "userinfo is not supported") }

        let hostPart: Substring
        var portPart: Substring?
        if authority.hasPrefix("[") {
            guard let close = authority.firstIndex(of: "]") else {
                throw .invalidURL(string, reason: "unterminated IPv6 literal")
            }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if !after.isEmpty {
                guard after.hasPrefix(":") else { throw .invalidURL(string, reason: "junk after the IPv6 literal") }
                portPart = after.dropFirst()
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        } else {
            hostPart = authority
        }
        guard !hostPart.isEmpty else { throw .invalidURL(string, reason: "the host is empty") }
        host = String(hostPart)
        if let portPart {
            guard let value = Int(portPart), (1...65535).contains(value) else {
                throw .invalidURL(string, reason: "the port must be 1–65535")
            }
            port = value
        } else {
            port = isSecure ? 443 : 80
        }
    }
}
