extension WebSocketContext {
    /// Limits, timeouts and trust settings of a context.
    public struct Options: Hashable, Sendable {
        /// A PEM file of CA certificates trusted for `wss://`, in addition to the system store
        /// (OpenSSL's default paths; libwebsockets 4.1 always loads those too). nil: the system
        /// store only. Tests point it at a CA they made.
        public var certificateAuthorityFile: String?
        /// The largest message accepted, in bytes, after reassembly; a larger one is answered
        /// with close 1009 `messageTooBig` (RFC 6455 §7.4.1). 1 MiB by default.
        public var maxMessageSize: Int
        /// The largest data frame sent, in bytes; longer messages go out fragmented
        /// (RFC 6455 §5.4). 64 KiB by default.
        public var maxFrameSize: Int
        /// The largest plain HTTP request body accepted, in bytes; larger ones get 413.
        /// 1 MiB by default.
        public var maxHTTPBodySize: Int
        /// How long libwebsockets waits for each step of a connection (TCP connect, TLS, the
        /// opening handshake; lws `timeout_secs` and `connect_timeout_secs`), in whole seconds,
        /// rounded up. 20 s by default, lws' own default.
        public var timeout: Duration
        /// How the service thread waits for sockets: `.epoll` (the default) or `.poll`.
        public var eventLoop: EventLoop
        /// The most bytes of messages queued for one peer and not yet handed to the socket
        /// (`WebSocketConnection.bufferedAmount`). A send past it while earlier messages still
        /// wait drops the connection (the peer is not reading): `send` throws
        /// `sendBufferFull`, and `.closed` reports 1006 with that reason. One message on an
        /// empty queue is accepted whatever its size. 16 MiB by default.
        public var maxBufferedAmount: Int
        /// The most bytes one read from a socket takes, and the size of each connection's
        /// frame buffer and of the `SO_SNDBUF` libwebsockets gives its socket (lws
        /// `pt_serv_buf_size` and `rx_buffer_size`); a longer frame arrives in pieces that are
        /// joined. 4 KiB by default, lws' own, for a server's many connections; a client with
        /// one busy connection reads a stream of small frames faster with 64 KiB (one service
        /// pass, and one hand-off to the app, per read: BENCHMARKS.md, room events/s).
        /// Clamped to 4 KiB…1 MiB.
        public var readBufferSize: Int
        /// `permessage-deflate` (RFC 7692): accepted by this context's listeners with these
        /// settings; nil (the default) accepts none. Its clients never offer it (see
        /// `PerMessageDeflate`: libwebsockets 4.1.6's client loops on some frames).
        public var permessageDeflate: PerMessageDeflate?

        /// The service thread's wait for socket events.
        public enum EventLoop: Sendable, Hashable {
            /// libev on epoll (Debian `libev-dev`), handed to libwebsockets as its foreign
            /// loop (`LWS_SERVER_OPTION_LIBEV`): a pass costs what is active, not what is open.
            case epoll
            /// libwebsockets' own `poll()` loop: every pass walks every open descriptor
            /// (BENCHMARKS.md measured 5,197 → 346 events/s from 1,000 to 10,000 connections).
            case poll
        }

        /// Creates options.
        ///
        /// - Parameters:
        ///   - certificateAuthorityFile: extra trusted CAs (PEM) for wss; nil for the system store.
        ///   - maxMessageSize: bytes; larger messages are closed with 1009.
        ///   - maxFrameSize: bytes per outgoing data frame (more than 0).
        ///   - maxHTTPBodySize: bytes; larger HTTP request bodies get 413.
        ///   - timeout: per-step connect timeout, whole seconds (at least 1).
        ///   - eventLoop: `.epoll` (default) or `.poll`.
        ///   - maxBufferedAmount: bytes queued for a peer before it is dropped as not reading.
        ///   - readBufferSize: bytes per read and per connection's frame buffer (4 KiB…1 MiB).
        ///   - permessageDeflate: compression its listeners accept, or nil for none.
        public init(
            certificateAuthorityFile: String? = nil,
            maxMessageSize: Int = 1 << 20,
            maxFrameSize: Int = 64 << 10,
            maxHTTPBodySize: Int = 1 << 20,
            timeout: Duration = .seconds(20),
            eventLoop: EventLoop = .epoll,
            maxBufferedAmount: Int = 16 << 20,
            readBufferSize: Int = 4 << 10,
            permessageDeflate: PerMessageDeflate? = nil
        ) {
            precondition(maxFrameSize > 0, "maxFrameSize must be positive")
            precondition(maxMessageSize >= 0 && maxHTTPBodySize >= 0, "limits must not be negative")
            self.certificateAuthorityFile = certificateAuthorityFile
            self.maxMessageSize = maxMessageSize
            self.maxFrameSize = maxFrameSize
            self.maxHTTPBodySize = maxHTTPBodySize
            self.timeout = timeout
            self.eventLoop = eventLoop
            self.maxBufferedAmount = max(0, maxBufferedAmount)
            self.readBufferSize = readBufferSize
            self.permessageDeflate = permessageDeflate
        }

        /// `readBufferSize` clamped to 4 KiB…1 MiB, for lws.
        var clampedReadBufferSize: Int { min(max(readBufferSize, 4 << 10), 1 << 20) }

        /// `timeout` in whole seconds for lws, rounded up, at least 1.
        var timeoutSeconds: UInt32 {
            let (seconds, attoseconds) = timeout.components
            let rounded = seconds + (attoseconds > 0 ? 1 : 0)
            return UInt32(clamping: max(rounded, 1))
        }
    }
}
