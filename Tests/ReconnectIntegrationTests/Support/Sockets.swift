import Foundation
import Glibc
import SystemSupport
import TestSupport

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
        filler = try TestSockets.connectedSocket(port: port)
    }

    deinit {
        close(filler)
        close(listener)
    }
}
