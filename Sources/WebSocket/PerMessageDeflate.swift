/// Compression of each message with DEFLATE, `permessage-deflate` (RFC 7692), as
/// libwebsockets 4.1 implements it with zlib, for a context's listeners.
///
/// Set in `WebSocketContext.Options.permessageDeflate`: a listener of the context then accepts
/// it when an upgrade offers it (every browser does; each listener can refuse it per request:
/// `WebSocketContext.listen(…, acceptsDeflate:)`). Control frames are never compressed
/// (RFC 7692 §6.1), and incoming messages are bounded by `Options.maxMessageSize` after
/// inflating: a compression bomb is closed with 1009 once its inflated bytes pass it.
///
/// A client's compressed message is taken only while each read of it inflates to less than
/// 4 KiB (`inflateStep`), since libwebsockets 4.1.6 inflates the rest of a read on later
/// passes from the service thread's shared read buffer, which other connections' reads
/// overwrite meanwhile (reproduced: messages of two clients mixed, or inflate errors); past
/// that the message is closed with 1009. Client messages of a realtime protocol (subscriptions,
/// small events) stay well under it; larger ones need the extension off.
///
/// Clients do not offer it. libwebsockets 4.1.6 (Debian 12's) loops forever in its client
/// parser once the extension is active and a frame it need not inflate carries a payload: an
/// uncompressed message (RFC 7692 §6 lets a sender choose not to compress one) or a pong
/// with a payload; its server parser does not. Measured here: the service thread spins at
/// 100 % of a core, delivering the same bytes again and again.
///
/// What a connection costs with it, in zlib's own figures: inflating takes a 32 KiB window
/// (the peer may use 15 window bits) from the first compressed message received;
/// deflating takes `(1 << 17) + (1 << (memoryLevel + 9))` bytes (a 64 KiB window, its 64 KiB
/// hash chain, and the match state) from the first message sent, for the connection's life when
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

    /// The most bytes one read of a compressed connection may inflate to: lws' inflate step,
    /// set to 4 KiB (its cap is the connections' 4 KiB frame buffer, `Options.readBufferSize`).
    /// A message whose bytes of one read inflate further is closed with 1009: lws 4.1.6 would
    /// inflate the rest from a buffer other connections' reads reuse (see `PerMessageDeflate`).
    static let inflateStep = 1 << inflateStepPower
    /// `inflateStep` as lws' `rx_buf_size` option takes it: a power of two.
    static let inflateStepPower = 12

    /// The extension's name in `Sec-WebSocket-Extensions` (RFC 7692 §7).
    static let name = "permessage-deflate"
    /// What a client would offer (lws needs one in its table; the client vhost has none).
    static let clientOffer = "permessage-deflate; client_max_window_bits"
}
