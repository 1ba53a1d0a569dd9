import Foundation
import Glibc
import SystemSupport

/// A TCP proxy on loopback that forwards each connection to a target port and limits the
/// bytes a second each way, counting them: a slow link (a phone on 1 Mbit/s) for a test or a
/// benchmark, where the kernel has no netem and no namespace is needed.
///
/// Each accepted connection gets its own connection to the target and two threads, one per
/// direction, that read at most `chunkSize` bytes, hold them for the time they take on the
/// link (`bytesPerSecond`), then write them: what the peer sends beyond that waits in the
/// kernel's socket buffers, so the proxy holds at most one chunk per direction. No latency is
/// added beyond the pacing. A direction ends when its source closes (the other side is told
/// with a half-close); a connection's descriptors close when both have ended, or at `stop()`.
/// The threads hold the proxy: call `stop()` when done.
public final class ShapingProxy: Sendable {
    /// The loopback port clients connect to.
    public let port: Int
    /// The rate each direction of each connection is held to, in bytes a second.
    public let bytesPerSecond: Int
    private let listener: Int32
    private let counters = Locked(Counters())
    private let targetPort: Int

    private struct Counters {
        var down = 0
        var up = 0
        var descriptors: [Int32] = []
        var stopped = false
    }

    /// At most this many bytes are read and written at once: 10 ms at 1 Mbit/s.
    public static let chunkSize = 1250

    /// Listens on an ephemeral loopback port and forwards to `127.0.0.1:targetPort`.
    ///
    /// - Parameters:
    ///   - targetPort: where connections go.
    ///   - bytesPerSecond: the rate each way (125,000 for 1 Mbit/s), more than 0.
    /// - Throws: `ShapingProxyError` when the listening socket cannot be made.
    public init(targetPort: Int, bytesPerSecond: Int) throws(ShapingProxyError) {
        precondition(bytesPerSecond > 0, "a rate of at least one byte a second")
        self.targetPort = targetPort
        self.bytesPerSecond = bytesPerSecond
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard listener >= 0 else { throw .socket(errno: errno) }
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard bound == 0, Glibc.listen(listener, 64) == 0 else {
            let code = errno
            close(listener)
            throw .socket(errno: code)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        self.listener = listener
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    /// Bytes forwarded from the target to clients so far (the server's side of a link).
    public var bytesDown: Int { counters.withLock { $0.down } }
    /// Bytes forwarded from clients to the target so far.
    public var bytesUp: Int { counters.withLock { $0.up } }

    /// Stops accepting and closes every forwarded connection. Calling it again does nothing.
    public func stop() {
        // shutdown wakes the threads blocked in accept, read or write; they close their own.
        // Under the lock, so no descriptor is closed (and its number reused) meanwhile.
        counters.withLock { counters in
            guard !counters.stopped else { return }
            counters.stopped = true
            for descriptor in counters.descriptors + [listener] { shutdown(descriptor, Int32(SHUT_RDWR)) }
        }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR || errno == ECONNABORTED { continue }
                // Out of descriptors or buffers for now: try again shortly rather than stop.
                if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM {
                    usleep(10_000)
                    continue
                }
                break
            }
            let target = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            var address = Self.loopback(port: targetPort)
            let connected = target >= 0 && withUnsafePointer(to: &address) { pointer in
                pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(target, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            } == 0
            let kept = connected && counters.withLock { counters -> Bool in
                guard !counters.stopped else { return false }
                counters.descriptors += [client, target]
                return true
            }
            guard kept else {
                close(client)
                if target >= 0 { close(target) }
                continue
            }
            let pair = Pair()
            Thread { [self] in pump(from: target, to: client, down: true, pair: pair) }.start()
            Thread { [self] in pump(from: client, to: target, down: false, pair: pair) }.start()
        }
        close(listener)
    }

    /// Closes both descriptors of a connection once both directions ended.
    private final class Pair: Sendable {
        let ended = Locked(0)
    }

    private func pump(from source: Int32, to destination: Int32, down: Bool, pair: Pair) {
        var buffer = [UInt8](repeating: 0, count: Self.chunkSize)
        // When the link is free again: a chunk leaves once the one before it had its time on
        // the link, and time the link stood idle gives no credit (no burst after a pause).
        var free = ContinuousClock.now
        reading: while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { break }
            free = max(free, ContinuousClock.now) + .nanoseconds(Int64(count) * 1_000_000_000 / Int64(bytesPerSecond))
            let wait = free - ContinuousClock.now
            if wait > .zero { Thread.sleep(forTimeInterval: Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18) }
            var offset = 0
            while offset < count {
                // MSG_NOSIGNAL: a peer gone is an error here, not a SIGPIPE for the process.
                let written = buffer.withUnsafeBytes { send(destination, $0.baseAddress! + offset, count - offset, Int32(MSG_NOSIGNAL)) }
                if written < 0, errno == EINTR { continue }
                guard written > 0 else { break reading }
                offset += written
            }
            counters.withLock { counters in
                if down { counters.down += count } else { counters.up += count }
            }
        }
        // Half-close the other way so the peer sees the end; the last direction closes both.
        shutdown(destination, Int32(SHUT_WR))
        let last = pair.ended.withLock { ended -> Bool in
            ended += 1
            return ended == 2
        }
        guard last else { return }
        counters.withLock { counters in
            counters.descriptors.removeAll { $0 == source || $0 == destination }
            close(source)
            close(destination)
        }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return address
    }
}

/// Why a `ShapingProxy` could not start.
public enum ShapingProxyError: Error, Equatable, Sendable {
    /// `socket`, `bind` or `listen` failed with this errno.
    case socket(errno: Int32)
}
