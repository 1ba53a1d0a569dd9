import Foundation
import Glibc
import SystemSupport

/// Loopback sockets for tests: free ports, a server that plays a byte script, a listener
/// whose connects hang.
enum TestSockets {
    /// A port nobody listens on now: bound to 127.0.0.1:0, read, closed.
    static func freePort() throws -> UInt16 {
        let fd = try listeningSocket(backlog: 1)
        defer { close(fd) }
        return try port(of: fd)
    }

    /// A blocking TCP socket listening on 127.0.0.1 on `port` (0: a kernel-chosen port).
    static func listeningSocket(backlog: Int32, port: UInt16 = 0) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw SocketFailure(operation: "socket", errno: errno) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
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

    static func port(of fd: Int32) throws -> UInt16 {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let status = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard status == 0 else { throw SocketFailure(operation: "getsockname", errno: errno) }
        return UInt16(bigEndian: address.sin_port)
    }

    /// Whether something accepts TCP connections on 127.0.0.1:`port` now.
    static func accepts(port: UInt16) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }

    /// Writes all of `bytes` to a blocking socket (ignoring a peer that went away).
    static func write(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let count = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return }
            offset += count
        }
    }
}

struct SocketFailure: Error, CustomStringConvertible {
    let operation: String
    let errno: Int32
    var description: String { "\(operation) failed: errno \(errno)" }
}

/// A loopback server that, for each connection, runs a script on the accepted (blocking)
/// socket on its own thread, then closes it: a peer that sends garbage or stops half-way.
final class ScriptedServer: Sendable {
    let port: UInt16
    private let listener: Int32
    private let closed = Locked(false)

    /// - Parameter script: what to do with each accepted socket; it is closed afterwards.
    init(script: @escaping @Sendable (Int32) -> Void) throws {
        listener = try TestSockets.listeningSocket(backlog: 8)
        port = try TestSockets.port(of: listener)
        let (listener, closed) = (listener, closed)
        Thread.detachNewThread {
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else {
                    if closed.withLock({ $0 }) { return }
                    continue
                }
                Thread.detachNewThread {
                    script(client)
                    close(client)
                }
            }
        }
    }

    /// A server that sends `bytes` (in pieces of `chunk` bytes, with `TCP_NODELAY`), ends its
    /// side if `closeAfterSending` (a truncated stream), then waits for the client to close.
    convenience init(sending bytes: [UInt8], chunk: Int = .max, closeAfterSending: Bool = false) throws {
        try self.init { fd in
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var offset = 0
            while offset < bytes.count {
                let end = min(bytes.count, offset + chunk)
                TestSockets.write(fd, Array(bytes[offset..<end]))
                offset = end
            }
            // Ending our side with a FIN (not close(), which resets when the client's bytes are
            // unread) lets the client read a clean end of file.
            if closeAfterSending { shutdown(fd, Int32(SHUT_WR)) }
            // Read until the client closes (end of file) so its view decides the outcome.
            var buffer = [UInt8](repeating: 0, count: 4096)
            while buffer.withUnsafeMutableBytes({ recv(fd, $0.baseAddress, $0.count, 0) }) > 0 {}
        }
    }

    deinit {
        closed.withLock { $0 = true }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }
}

/// A listener with a full accept queue (backlog 0, one connection never accepted): the kernel
/// drops further SYNs, so a connect to it hangs, as to a host that went away.
final class HungListener: Sendable {
    let port: UInt16
    private let listener: Int32
    private let filler: Int32

    /// - Parameter port: the port to take (0: a kernel-chosen one).
    init(port requested: UInt16 = 0) throws {
        listener = try TestSockets.listeningSocket(backlog: 0, port: requested)
        port = try TestSockets.port(of: listener)
        filler = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(filler, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard status == 0 else { throw SocketFailure(operation: "connect (filler)", errno: errno) }
    }

    deinit {
        close(filler)
        close(listener)
    }
}
