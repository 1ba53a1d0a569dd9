/// Compression of each message with DEFLATE, `permessage-deflate` (RFC 7692), as
/// libwebsockets 4.1 implements it with zlib.
///
/// Set in `WebSocketContext.Options.permessageDeflate`: a client of the context then offers
/// it (`permessage-deflate; client_max_window_bits`, what browsers offer) and a listener
/// accepts it when an upgrade offers it (each listener can refuse per request:
/// `WebSocketContext.listen(…, acceptsDeflate:)`). Control frames are never compressed
/// (RFC 7692 §6.1), and incoming messages are bounded by `Options.maxMessageSize` after
/// inflating: a compression bomb is closed with 1009 once its inflated bytes pass it.
///
/// What a connection costs with it, in zlib's own figures: inflating takes a 32 KiB window
/// (the peer may use 15 window bits) from the first compressed message received;
/// deflating takes `(1 << 17) + (1 << (memoryLevel + 9))` bytes (a 32 KiB window kept twice,
/// and the match state) from the first message sent, for the connection's life when
/// `contextTakeover` is on, for each message otherwise. BENCHMARKS.md measures both on
/// this machine.
public struct PerMessageDeflate: Hashable, Sendable {
    /// Whether this side keeps its compression context from one message to the next
    /// (context takeover, RFC 7692 §7.1.1). On, a stream of similar messages (a replay of
    /// JSON events) compresses far better, and the deflate state lives as long as the
    /// connection; off, it is made for each message sent and freed after (less memory,
    /// more CPU per message, and each message compressed alone). Either way the peer can
    /// read it: a sender may always forget its context.
    public var contextTakeover: Bool
    /// zlib's compression level, 1 (fastest, libwebsockets' default) to 9 (smallest).
    public var compressionLevel: Int
    /// zlib's `memLevel`, 1 to 9: the match state's size (`1 << (memoryLevel + 9)` bytes)
    /// against how well it compresses. 8 is zlib's default.
    public var memoryLevel: Int

    /// Creates settings.
    ///
    /// - Parameters:
    ///   - contextTakeover: keep the compression context between messages sent.
    ///   - compressionLevel: zlib level, clamped to 1…9.
    ///   - memoryLevel: zlib `memLevel`, clamped to 1…9.
    public init(contextTakeover: Bool = true, compressionLevel: Int = 1, memoryLevel: Int = 8) {
        self.contextTakeover = contextTakeover
        self.compressionLevel = min(max(compressionLevel, 1), 9)
        self.memoryLevel = min(max(memoryLevel, 1), 9)
    }

    /// The extension's name in `Sec-WebSocket-Extensions` (RFC 7692 §7).
    static let name = "permessage-deflate"
    /// What a client offers: the extension, and that it can honour a smaller window for what
    /// it sends if the server asks (RFC 7692 §7.1.2.2).
    static let clientOffer = "permessage-deflate; client_max_window_bits"
}
