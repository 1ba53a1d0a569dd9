import Foundation
import Glibc

/// Loopback sockets for tests: free ports, a server that plays a byte script, a listener
/// whose connects hang.
public enum TestSockets {
    /// A port nobody listens on now: bound to 127.0.0.1:0, read, closed.
    public static func freePort() throws -> UInt16 {
        let fd = try listeningSocket(backlog: 1)
        defer { close(fd) }
        return try port(of: fd)
    }

    /// A blocking TCP socket listening on 127.0.0.1 on `port` (0: a kernel-chosen port).
    public static func listeningSocket(backlog: Int32, port: UInt16 = 0) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SocketFailure(operation: "socket", errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = loopback(port: port)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, listen(fd, backlog) == 0 else {
            let code = errno
            close(fd)
            throw SocketFailure(operation: "bind/listen", errno: code)
        }
        return fd
    }

    public static func port(of fd: Int32) throws -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let status = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard status == 0 else { throw SocketFailure(operation: "getsockname", errno: errno) }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port` now.
    public static func accepts(port: UInt16) -> Bool {
        guard let fd = try? connectedSocket(port: port) else { return false }
        close(fd)
        return true
    }

    /// A blocking TCP socket connected to 127.0.0.1:`port`; the caller closes it.
    ///
    /// - Parameters:
    ///   - port: the port.
    ///   - configure: runs on the socket before `connect(2)` (options such as `SO_RCVBUF`).
    /// - Throws: `SocketFailure` when the socket cannot be made or the connect fails.
    public static func connectedSocket(port: UInt16, configure: (Int32) -> Void = { _ in }) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SocketFailure(operation: "socket", errno: errno) }
        configure(fd)
        var address = loopback(port: port)
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard status == 0 else {
            let code = errno
            close(fd)
            throw SocketFailure(operation: "connect", errno: code)
        }
        return fd
    }

    /// 127.0.0.1:`port`.
    private static func loopback(port: UInt16) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }

    /// Writes all of `bytes` to a blocking socket (ignoring a peer that went away).
    public static func write(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            offset += count
        }
    }
}

/// A socket call of the test helpers failed: which one, and its errno.
public struct SocketFailure: Error, CustomStringConvertible {
    /// The system call that failed.
    public let operation: String
    /// Its errno.
    public let errno: Int32
    /// Creates a failure.
    public init(operation: String, errno: Int32) {
        self.operation = operation
        self.errno = errno
    }
    /// The call and the errno.
    public var description: String { "\(operation) failed: errno \(errno)" }
}

