import CNetlink
import Dispatch
import Glibc
import Reachability

/// The multicast side of the monitor: one non-blocking netlink socket in the link, IPv4/IPv6
/// address and IPv4/IPv6 route groups, read by a `DispatchSource` on a serial queue.
///
/// Messages are never parsed: the kernel does not announce every route change (an admin-down
/// link loses its IPv4 routes with no `RTM_DELROUTE`, a removed address silently flushes
/// gateway routes), so any message only means "something changed; look again". Each read
/// event drains the socket until `EAGAIN` and then reports one batch, so a burst costs one
/// re-evaluation per drain while the first change is reported without delay.
final class NetlinkEventSource: Sendable {
    /// What one drain saw.
    struct Batch {
        /// Netlink datagrams read (each may hold several messages).
        var datagrams = 0
        /// `ENOBUFS` was seen: the kernel dropped messages; everything must be re-evaluated.
        var overrun = false
        /// An unexpected `recv` error, if any (the source stays armed).
        var error: ReachabilityError?
    }

    /// The groups that can change a route lookup's answer or an interface's state.
    static let routeGroups: [Int32] = [
        Int32(RTNLGRP_LINK.rawValue), Int32(RTNLGRP_IPV4_IFADDR.rawValue), Int32(RTNLGRP_IPV6_IFADDR.rawValue),
        Int32(RTNLGRP_IPV4_ROUTE.rawValue), Int32(RTNLGRP_IPV6_ROUTE.rawValue),
    ]

    // Dispatch sources are thread-safe; this one is only resumed once and cancelled once.
    nonisolated(unsafe) private let source: any DispatchSourceRead
    private let reader: Reader

    /// Opens the socket in the calling thread's network namespace and starts reading.
    ///
    /// - Parameters:
    ///   - queue: the serial queue `onBatch` runs on.
    ///   - options: socket settings.
    ///   - onBatch: called once per drain that read anything or saw an error.
    /// - Throws: `ReachabilityError.netlink` when the socket cannot be opened or joined.
    init(
        queue: DispatchQueue,
        options: NetlinkOptions,
        onBatch: @escaping @Sendable (Batch) -> Void
    ) throws(ReachabilityError) {
        let socket = try NetlinkSocket(
            groups: Self.routeGroups,
            nonBlocking: true,
            receiveBufferSize: options.receiveBufferSize,
            netlinkProtocol: options.netlinkProtocol
        )
        let reader = Reader(socket: socket, onBatch: onBatch)
        let source = DispatchSource.makeReadSource(fileDescriptor: socket.fileDescriptor, queue: queue)
        // The handlers keep the reader (socket and buffer) alive until the source is cancelled
        // and its handlers released, so a handler running during `deinit` never sees it freed.
        source.setEventHandler { reader.drain() }
        source.setCancelHandler { withExtendedLifetime(reader) {} }
        self.reader = reader
        self.source = source
        source.resume()
    }

    deinit { source.cancel() }

    /// Drains the socket now and reports the batch; call it on the source's queue only.
    func drainNow() { reader.drain() }

    /// The socket, its receive buffer and the batch callback.
    private final class Reader: Sendable {
        // Only touched on the source's serial queue.
        nonisolated(unsafe) let socket: NetlinkSocket
        nonisolated(unsafe) let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 1024, alignment: 16)
        let onBatch: @Sendable (Batch) -> Void

        init(socket: NetlinkSocket, onBatch: @escaping @Sendable (Batch) -> Void) {
            self.socket = socket
            self.onBatch = onBatch
        }

        deinit { buffer.deallocate() }

        func drain() {
            let batch = NetlinkEventSource.drain(fd: socket.fileDescriptor, buffer: buffer)
            if batch.datagrams > 0 || batch.overrun || batch.error != nil { onBatch(batch) }
        }
    }

    /// Reads every pending datagram.
    fileprivate static func drain(fd: Int32, buffer: UnsafeMutableRawBufferPointer) -> Batch {
        var batch = Batch()
        while true {
            let count = recv(fd, buffer.baseAddress, buffer.count, Int32(MSG_DONTWAIT))
            if count > 0 {
                batch.datagrams += 1
                continue
            }
            if count == 0 { return batch }
            switch errno {
            case EINTR:
                continue
            case EAGAIN, EWOULDBLOCK:
                return batch
            case ENOBUFS:
                // Overrun: the socket's queue filled and the kernel dropped messages.
                batch.overrun = true
            default:
                let code = errno
                batch.error = .netlink(operation: "recv", code: Int32(NLE_FAILURE), errno: code, message: String(cString: strerror(code)))
                return batch
            }
        }
    }
}
