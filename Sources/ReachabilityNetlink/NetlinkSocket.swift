import CNetlink
import Glibc
import Reachability

/// Owns one libnl `nl_sock` connected to `NETLINK_ROUTE` and frees it on every path.
///
/// A netlink socket belongs to the network namespace of the thread that creates it (kernel
/// behaviour): create it inside `NetworkNamespace.run` to watch a namespace.
final class NetlinkSocket {
    let handle: OpaquePointer

    /// Opens and connects a route netlink socket.
    ///
    /// - Parameters:
    ///   - groups: multicast groups (`RTNLGRP_*`) to join; empty for a request socket.
    ///   - nonBlocking: sets `O_NONBLOCK` (the event socket is drained until `EAGAIN`).
    ///   - receiveBufferSize: `SO_RCVBUF` in bytes, or `nil` for the kernel default.
    ///   - netlinkProtocol: the netlink family; only tests pass another (to make connect fail).
    /// - Throws: `ReachabilityError.netlink` with the libnl code when allocation, connect or a
    ///   membership fails.
    init(
        groups: [Int32] = [],
        nonBlocking: Bool = false,
        receiveBufferSize: Int32? = nil,
        netlinkProtocol: Int32 = NETLINK_ROUTE
    ) throws(ReachabilityError) {
        guard let handle = nl_socket_alloc() else {
            throw .netlink(operation: "nl_socket_alloc", code: Int32(NLE_NOMEM), errno: ENOMEM, message: "out of memory")
        }
        self.handle = handle
        try Self.check(nl_connect(handle, netlinkProtocol), "nl_connect")
        if let receiveBufferSize {
            try Self.check(nl_socket_set_buffer_size(handle, receiveBufferSize, 0), "nl_socket_set_buffer_size")
        }
        if !groups.isEmpty {
            nl_socket_disable_seq_check(handle)
            // nl_socket_add_memberships is variadic and cannot be called from Swift.
            for group in groups {
                try Self.check(nl_socket_add_membership(handle, group), "nl_socket_add_membership(\(group))")
            }
        }
        if nonBlocking {
            try Self.check(nl_socket_set_nonblocking(handle), "nl_socket_set_nonblocking")
        }
        // On a throw above, `self` is fully initialised, so `deinit` frees the socket.
    }

    deinit { nl_socket_free(handle) }

    /// The socket's file descriptor, owned by this object.
    var fileDescriptor: Int32 { nl_socket_get_fd(handle) }

    /// Turns a negative libnl return code into `ReachabilityError.netlink`.
    ///
    /// - Parameters:
    ///   - result: a libnl return value; negative values are `-NLE_*` codes.
    ///   - operation: what was attempted, for the message.
    /// - Throws: `ReachabilityError.netlink` when `result < 0`, with the errno captured now.
    static func check(_ result: Int32, _ operation: String) throws(ReachabilityError) {
        guard result < 0 else { return }
        let savedErrno = errno
        throw .netlink(operation: operation, code: -result, errno: savedErrno, message: String(cString: nl_geterror(result)))
    }
}
