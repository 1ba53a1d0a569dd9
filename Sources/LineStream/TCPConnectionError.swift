#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Why a `TCPConnection` could not connect or stopped: the socket layer's failures, with the
/// `errno` or `getaddrinfo(3)` code kept.
public enum TCPConnectionError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `getaddrinfo(3)` failed for the host, or gave no IPv4/IPv6 stream address.
    /// - Parameters: the host, the `EAI_*` code (0 when it resolved to nothing usable), and
    ///   `gai_strerror(3)`'s text.
    case resolutionFailed(host: String, code: Int32, message: String)
    /// A system call failed: which one (`socket`, `connect`, `read`, `send`, `bind`, …) and
    /// the `errno` it set, e.g. `ECONNREFUSED` from `connect` to a closed port.
    case system(operation: String, errno: Int32)
    /// The `openSocket` hook threw (for example, a network namespace could not be entered).
    /// - Parameter description: the thrown error, described.
    case openSocketFailed(String)
    /// The peer closed the connection (`read(2)` returned 0).
    case closedByPeer
    /// More than `limit` bytes waited to be sent: the peer stopped reading (or reads slower
    /// than it makes us write), and the connection was closed rather than buffer without end.
    case sendBufferFull(limit: Int)

    /// The `errno` behind the failure, when there is one (`.system` only).
    public var errno: Int32? {
        if case .system(_, let code) = self { return code }
        return nil
    }

    /// A human-readable explanation, with the errno's symbolic name.
    public var description: String {
        switch self {
        case .resolutionFailed(let host, _, let message):
            return "cannot resolve \"\(host)\": \(message)"
        case .system(let operation, let code):
            return "\(operation) failed: \(Self.describe(errno: code))"
        case .openSocketFailed(let description):
            return "cannot open a socket: \(description)"
        case .closedByPeer:
            return "connection closed by peer"
        case .sendBufferFull(let limit):
            return "more than \(limit) bytes unsent: the peer is not reading"
        }
    }

    /// `strerror(3)`'s text for `code`, followed by its symbolic name when it is a common one:
    /// "Connection refused (ECONNREFUSED)".
    ///
    /// - Parameter code: an `errno` value.
    /// - Returns: the text.
    public static func describe(errno code: Int32) -> String {
        let text = String(cString: strerror(code))
        guard let name = errnoNames[code] else { return "\(text) (errno \(code))" }
        return "\(text) (\(name))"
    }

    private static let errnoNames: [Int32: String] = [
        ECONNREFUSED: "ECONNREFUSED", ECONNRESET: "ECONNRESET", ECONNABORTED: "ECONNABORTED",
        ETIMEDOUT: "ETIMEDOUT", EHOSTUNREACH: "EHOSTUNREACH", ENETUNREACH: "ENETUNREACH",
        ENETDOWN: "ENETDOWN", EPIPE: "EPIPE", EADDRINUSE: "EADDRINUSE", EADDRNOTAVAIL: "EADDRNOTAVAIL",
        EACCES: "EACCES", EPERM: "EPERM", EAFNOSUPPORT: "EAFNOSUPPORT", EINVAL: "EINVAL",
        EMFILE: "EMFILE", ENFILE: "ENFILE", ENOBUFS: "ENOBUFS", EBADF: "EBADF",
    ]
}
