import CNetlink

/// Settings of the netlink sockets behind a monitor.
public struct NetlinkOptions: Sendable {
    /// The event socket's `SO_RCVBUF` in bytes, or `nil` for the kernel default
    /// (`net.core.rmem_default`). A larger buffer makes overruns rarer; an overrun is handled
    /// either way, by re-evaluating every watched destination.
    public var receiveBufferSize: Int32?

    /// The netlink family; always `NETLINK_ROUTE` except in tests that make opening fail.
    var netlinkProtocol: Int32 = NETLINK_ROUTE

    /// Creates options.
    ///
    /// - Parameter receiveBufferSize: `SO_RCVBUF` in bytes, or `nil` for the default.
    public init(receiveBufferSize: Int32? = nil) {
        self.receiveBufferSize = receiveBufferSize
    }
}
