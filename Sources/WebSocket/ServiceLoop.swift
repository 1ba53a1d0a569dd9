import CLibEV
import CWebSockets
import Glibc
import SystemSupport

/// What the service thread owns: the lws context, its protocol table, and one record per lws
/// connection (`struct lws *`, "wsi") with this module's objects for it.
///
/// Confined to the service thread: created, used and freed there, so it needs no lock. lws
/// callbacks find it through the context's user pointer. Each wsi carries a small integer id
/// in its opaque user data (set in the client connect info, or on first sight for a wsi a
/// listener accepted): ids never dangle, unlike object pointers, when lws outlives an object
/// or the reverse.
final class ServiceLoop {
    let thread: ServiceThread
    let options: WebSocketContext.Options
    /// `LWS_PRE`: headroom lws needs before a payload passed to `lws_write`.
    let pre: Int
    /// One write buffer: `pre` bytes of headroom, then room for a frame or a header block.
    let scratch: UnsafeMutableRawBufferPointer
    private(set) var context: OpaquePointer?
    private(set) var clientVhost: OpaquePointer?
    /// Strings lws keeps pointers to for the context's lifetime (protocol and vhost names,
    /// interfaces, certificate paths); freed after `lws_context_destroy`.
    let arena = CStringArena()
    let protocols: UnsafeMutablePointer<lws_protocols>
    /// lws' `permessage-deflate` for every listener's vhost, or nil when
    /// `Options.permessageDeflate` is not set (`makeExtensions`).
    let extensions: UnsafeMutablePointer<lws_extension>?
    private var stopRequested = false
    /// The libev loop handed to lws (`.epoll`), and the watcher that ends each of its passes.
    private var eventLoop: OpaquePointer?
    private var passEnd: UnsafeMutablePointer<cev_pass_end>?
    private var foreignLoops: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
    /// Set before `lws_context_destroy`: connections it closes get `contextShutDown`.
    private(set) var isShuttingDown = false

    /// What the loop keeps about each wsi id (a connection, an HTTP exchange, an upgrade on its
    /// way); a record goes when nothing is left in it (`forgetIfEmpty`).
    var records: [UInt: WSIRecord] = [:]
    var servers: [UInt: ServerRecord] = [:]
    var serverIDsByVhost: [UInt: UInt] = [:]

    /// lws logs errors and warnings to stderr; notices (one per vhost created, per failed DNS
    /// lookup) would drown test output. Process-wide in lws, so set once. At most
    /// `LogLimiter.linesPerSecond` lines a second reach stderr, then how many were left out:
    /// a failing `accept` logs on every pass (a million lines in seconds at the fd limit).
    static let configureLogging: Void = {
        lws_set_log_level(LLL_ERR | LLL_WARN) { _, line in
            guard let line else { return }
            LogLimiter.emit(String(cString: line))
        }
    }()

    init(thread: ServiceThread) {
        self.thread = thread
        options = thread.options
        pre = Int(cws_lws_pre())
        scratch = .allocate(byteCount: pre + max(options.maxFrameSize, 4096) + 128, alignment: 16)
        _ = scratch.bindMemory(to: UInt8.self)
        protocols = .allocate(capacity: 2)
        protocols.initialize(repeating: lws_protocols(), count: 2)
        protocols[0].name = UnsafePointer(arena.copy("websocket"))
        protocols[0].callback = { wsi, reason, user, input, length in
            ServiceLoop.callback(wsi, reason, user, input, length)
        }
        // Each connection's frame buffer, and the SO_SNDBUF lws sets on its socket; lws 4.1.6
        // also reads at most this much at a time (`Options.readBufferSize`).
        protocols[0].rx_buffer_size = options.clampedReadBufferSize
        extensions = options.permessageDeflate == nil ? nil : Self.makeExtensions(arena)
    }

    deinit {
        precondition(context == nil, "the lws context must be destroyed before its loop")
        protocols.deinitialize(count: 2)
        protocols.deallocate()
        extensions?.deinitialize(count: 2)
        extensions?.deallocate()
        scratch.deallocate()
    }

    /// Creates the lws context and the client vhost.
    ///
    /// - Returns: the context, for `lws_cancel_service` from other threads.
    /// - Throws: `WebSocketError.contextCreationFailed` with the errno seen after
    ///   `lws_create_context` or `lws_create_vhost` returned NULL.
    func start() throws(WebSocketError) -> OpaquePointer {
        var info = lws_context_creation_info()
        info.port = CONTEXT_PORT_NO_LISTEN
        info.protocols = UnsafePointer(protocols)
        info.user = Unmanaged.passUnretained(self).toOpaque()
        info.timeout_secs = options.timeoutSeconds
        // No VALIDATE_UTF8 (the ws parser reads it from the context's options): text messages
        // are checked by each connection's state machine (`received`, 1007), which then
        // reports the code it sent. lws' own check closed with 1007 as well, but a client masks
        // its close payload in place, so the code could not be read back: the app was told 1006.
        // JUST_USE_RAW_ORIGIN: the Origin header is sent as given (`WebSocketURL.origin`, scheme
        // included); without it lws 4.1.6 prefixes "http://" and sent "http://http://host".
        info.options = UInt64(LWS_SERVER_OPTION_EXPLICIT_VHOSTS) | UInt64(LWS_SERVER_OPTION_JUST_USE_RAW_ORIGIN)
        // The service thread's read buffer (one per thread): reads take up to this much.
        info.pt_serv_buf_size = UInt32(options.clampedReadBufferSize)
        if options.eventLoop == .epoll {
            // A foreign loop: lws installs no signal watcher on it, and this thread runs it.
            guard let loop = cev_loop_new_epoll() else { throw .contextCreationFailed(errno: errno) }
            eventLoop = loop
            let loops = UnsafeMutablePointer<UnsafeMutableRawPointer?>.allocate(capacity: 1)
            loops.initialize(to: UnsafeMutableRawPointer(loop))
            foreignLoops = loops
            info.foreign_loops = loops
            info.options |= UInt64(LWS_SERVER_OPTION_LIBEV)
        }
        let context = try Self.tlsLibrary.withLock { initialised throws(WebSocketError) in
            // lws 4.1 keeps its OpenSSL ex-data indexes in process-wide variables that every
            // context created with DO_SSL_GLOBAL_INIT allocates anew (lws_context_init_ssl_library):
            // a client TLS handshake in flight in another context then fails ("can't get wsi
            // from ssl privdata"), and an older context's client SSL_CTX is not found, so not
            // freed, when it is destroyed. Only the first context of the process initialises
            // the library; every vhost still gets TLS through its own options, and lws frees
            // vhost SSL_CTXs without looking at the context's options (lws_ssl_SSL_CTX_destroy).
            if !initialised { info.options |= UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT) }
            errno = 0
            guard let context = lws_create_context(&info) else {
                let savedErrno = errno
                releaseEventLoop()
                throw .contextCreationFailed(errno: savedErrno)
            }
            initialised = true
            return context
        }
        self.context = context

        var client = lws_context_creation_info()
        client.port = CONTEXT_PORT_NO_LISTEN
        client.protocols = UnsafePointer(protocols)
        client.vhost_name = UnsafePointer(arena.copy("client"))
        client.options = Self.vhostOptions
        client.client_ssl_ca_filepath = UnsafePointer(arena.copy(options.certificateAuthorityFile))
        client.connect_timeout_secs = options.timeoutSeconds
        // lws 4.1 routes every client connection through $http_proxy when it is set (it has no
        // no_proxy), loopback included. A configured proxy with port 0 means "none".
        client.http_proxy_address = UnsafePointer(arena.copy("0.0.0.0:0"))
        // No extensions on the client vhost: see `PerMessageDeflate` (lws 4.1.6's client loops).
        errno = 0
        guard let vhost = lws_create_vhost(context, &client) else {
            let savedErrno = errno
            lws_context_destroy(context)
            self.context = nil
            releaseEventLoop()
            throw .contextCreationFailed(errno: savedErrno)
        }
        clientVhost = vhost
        return context
    }

    /// Whether a context of this process initialised OpenSSL through lws (see `start`).
    private static let tlsLibrary = Locked(false)

    /// Options every vhost gets: TLS (lws sets up a vhost's SSL_CTX only with
    /// DO_SSL_GLOBAL_INIT in its options). UTF-8 is checked by the connections' state machines
    /// (RFC 6455 §8.1: 1007), not by lws (see `start`).
    static var vhostOptions: UInt64 {
        UInt64(LWS_SERVER_OPTION_DO_SSL_GLOBAL_INIT)
    }

    /// Services the context until a stop is requested.
    func run() {
        guard let context else { return }
        if let eventLoop {
            // lws' watchers dispatch from inside ev_run; a prepare watcher ends each pass.
            passEnd = cev_pass_end_start(eventLoop, { pointer in
                Unmanaged<ServiceLoop>.fromOpaque(pointer!).takeUnretainedValue().thread.runPassEnd()
            }, Unmanaged.passUnretained(self).toOpaque())
            while !stopRequested, cev_run(eventLoop) != 0 {}
            return
        }
        while !stopRequested {
            if lws_service(context, 0) < 0 { break }
            thread.runPassEnd()
        }
    }

    /// Stops and frees the libev loop, after the lws context that used it is gone.
    private func releaseEventLoop() {
        if let eventLoop {
            if let passEnd { cev_pass_end_stop(eventLoop, passEnd) }
            cev_loop_destroy(eventLoop)
        }
        passEnd = nil
        eventLoop = nil
        foreignLoops?.deallocate()
        foreignLoops = nil
    }

    /// Destroys the context and gives every connection and waiting caller its last answer.
    func finish() {
        isShuttingDown = true
        let (leftovers, lookups) = thread.takeLeftovers()
        if let context {
            // Fires CLOSED / CLIENT_CONNECTION_ERROR / WSI_DESTROY for every live wsi.
            lws_context_destroy(context)
            self.context = nil
            clientVhost = nil
        }
        releaseEventLoop()
        for command in leftovers { refuse(command) }
        for connection in lookups { connection.fail(.contextShutDown) }
        for (_, record) in records.sorted(by: { $0.key < $1.key }) {
            record.connection?.terminate(neverOpened: .contextShutDown)
        }
        records.removeAll()
        servers.removeAll()
        serverIDsByVhost.removeAll()
    }

    // MARK: commands

    /// Runs what other threads queued (`LWS_CALLBACK_EVENT_WAIT_CANCELLED`). lws delivers
    /// that callback once per vhost; the first takes the commands, the others find none.
    func runCommands() {
        let (commands, stop) = thread.takeCommands()
        for command in commands { run(command) }
        if stop {
            stopRequested = true
            if let eventLoop { cev_break(eventLoop) }
        }
    }

    // MARK: wsi ids

    /// The id stored in the wsi's opaque user data, if any.
    func id(of wsi: OpaquePointer) -> UInt? {
        guard let raw = lws_get_opaque_user_data(wsi) else { return nil }
        return UInt(bitPattern: raw)
    }

    /// The wsi's id, giving it one on first sight (a wsi a listener accepted).
    func assignID(_ wsi: OpaquePointer) -> UInt {
        if let id = id(of: wsi) { return id }
        let id = thread.makeID()
        lws_set_opaque_user_data(wsi, UnsafeMutableRawPointer(bitPattern: id))
        record(id).wsi = wsi
        return id
    }

    /// The record of `id`, made when there is none.
    func record(_ id: UInt) -> WSIRecord {
        if let record = records[id] { return record }
        let record = WSIRecord()
        records[id] = record
        return record
    }

    /// Drops the record of `id` once nothing is left in it.
    func forgetIfEmpty(_ id: UInt) {
        if records[id]?.isEmpty == true { records[id] = nil }
    }

    /// Forgets a WebSocket connection (its terminal event was delivered).
    func forgetConnection(_ id: UInt) {
        guard let record = records[id] else { return }
        record.connection = nil
        record.closeOnWritable = false
        record.readingPaused = false
        record.wsi = nil
        record.established = false
        record.deflate = false
        record.clientHeaders = nil
        record.clientURL = nil
        forgetIfEmpty(id)
    }

    // MARK: writing

    /// Copies `bytes` after the LWS_PRE headroom and makes the one `lws_write` of this
    /// WRITEABLE callback.
    ///
    /// - Returns: what `lws_write` returned (-1 on a failed socket).
    func write<Bytes: Collection<UInt8>>(_ wsi: OpaquePointer, _ bytes: Bytes, as kind: lws_write_protocol) -> Int32 {
        precondition(bytes.count <= scratch.count - pre, "frame larger than the write buffer")
        let payload = UnsafeMutableRawBufferPointer(rebasing: scratch[pre...])
        _ = payload.initializeMemory(as: UInt8.self, from: bytes)
        return lws_write(wsi, payload.baseAddress!.assumingMemoryBound(to: UInt8.self), bytes.count, kind)
    }

    /// `write` for a data frame's chunk, copied from the queued message in one `memcpy`.
    func write(_ wsi: OpaquePointer, _ chunk: FrameChunk, as kind: lws_write_protocol) -> Int32 {
        precondition(chunk.count <= scratch.count - pre, "frame larger than the write buffer")
        let payload = UnsafeMutableRawBufferPointer(rebasing: scratch[pre...])
        chunk.withBytes { bytes in
            if let source = bytes.baseAddress { payload.baseAddress!.copyMemory(from: source, byteCount: bytes.count) }
        }
        return lws_write(wsi, payload.baseAddress!.assumingMemoryBound(to: UInt8.self), chunk.count, kind)
    }

    // MARK: the lws callback

    /// The protocol callback lws calls for every wsi of the context, on the service thread.
    static func callback(
        _ wsi: OpaquePointer?,
        _ reason: lws_callback_reasons,
        _ user: UnsafeMutableRawPointer?,
        _ input: UnsafeMutableRawPointer?,
        _ length: Int
    ) -> Int32 {
        guard let wsi, let context = lws_get_context(wsi), let raw = lws_context_user(context) else { return 0 }
        let loop = Unmanaged<ServiceLoop>.fromOpaque(raw).takeUnretainedValue()
        return loop.handle(wsi, reason, user, input, length)
    }

    private func handle(
        _ wsi: OpaquePointer,
        _ reason: lws_callback_reasons,
        _ user: UnsafeMutableRawPointer?,
        _ input: UnsafeMutableRawPointer?,
        _ length: Int
    ) -> Int32 {
        let bytes = UnsafeRawBufferPointer(start: input, count: input == nil ? 0 : length)
        switch reason {
        case LWS_CALLBACK_EVENT_WAIT_CANCELLED:
            runCommands()
            return 0
        case LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER:
            return appendHandshakeHeaders(wsi, input, length)
        case LWS_CALLBACK_CLIENT_ESTABLISHED:
            return clientEstablished(wsi)
        case LWS_CALLBACK_CLIENT_CONNECTION_ERROR:
            return clientConnectionError(wsi, bytes)
        case LWS_CALLBACK_FILTER_NETWORK_CONNECTION:
            // lws passes the accepted descriptor as `in` (ops-listen.c).
            return filterNetworkConnection(wsi, descriptor: Int32(truncatingIfNeeded: Int(bitPattern: input)))
        case LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION:
            return filterUpgrade(wsi)
        case LWS_CALLBACK_CONFIRM_EXTENSION_OKAY:
            return confirmExtension(wsi, name: UnsafeRawPointer(input))
        case LWS_CALLBACK_ESTABLISHED:
            return serverEstablished(wsi)
        case LWS_CALLBACK_CLIENT_RECEIVE, LWS_CALLBACK_RECEIVE:
            return receive(wsi, bytes)
        case LWS_CALLBACK_CLIENT_RECEIVE_PONG, LWS_CALLBACK_RECEIVE_PONG:
            return pong(wsi, bytes)
        case LWS_CALLBACK_CLIENT_WRITEABLE, LWS_CALLBACK_SERVER_WRITEABLE:
            return writeable(wsi)
        case LWS_CALLBACK_WS_PEER_INITIATED_CLOSE:
            return peerInitiatedClose(wsi, bytes)
        case LWS_CALLBACK_CLIENT_CLOSED, LWS_CALLBACK_CLOSED:
            return closed(wsi)
        case LWS_CALLBACK_HTTP:
            return httpRequest(wsi)
        case LWS_CALLBACK_HTTP_BODY:
            return httpBody(wsi, bytes)
        case LWS_CALLBACK_HTTP_BODY_COMPLETION:
            return httpBodyCompletion(wsi)
        case LWS_CALLBACK_HTTP_WRITEABLE:
            return httpWriteable(wsi)
        case LWS_CALLBACK_CLOSED_HTTP:
            return httpClosed(wsi)
        case LWS_CALLBACK_WSI_DESTROY:
            return wsiDestroyed(wsi)
        default:
            return lws_callback_http_dummy(wsi, reason, user, input, length)
        }
    }
}

/// What the service loop keeps about one wsi id, on the service thread only: the lws handle
/// while it lives, and what the wsi's kind needs (a WebSocket connection and its flags, a
/// connecting client's headers and URL, a listener's upgrade request, an HTTP exchange).
/// A reference, so the hot paths (RECEIVE, WRITEABLE) take one lookup and change it in place.
final class WSIRecord {
    /// The live wsi; `nil` once CLOSED / WSI_DESTROY came, after which lws frees it.
    var wsi: OpaquePointer?
    var connection: WebSocketConnection?
    /// The handshake completed (WRITEABLE may be requested).
    var established = false
    /// Close at the next WRITEABLE: an incoming message broke a limit while more of its frame
    /// was still buffered (see `receive`).
    var closeOnWritable = false
    /// `permessage-deflate` was negotiated: lws may be draining a compressed message, so
    /// writes wait for WRITEABLE (`ServiceLoop.writeNow`) and a close for a broken limit is
    /// made at once (`ServiceLoop.closeCompressed`).
    var deflate = false
    /// A compressed connection's last data frame, LWS_PRE bytes of headroom first: lws'
    /// deflater reads it on later POLLOUTs until the message is out (`writeCompressed`).
    var deflateInput: UnsafeMutableRawBufferPointer?
    /// A compressed connection's close frame was written and its kill asked
    /// (`ServiceLoop.closeCompressed`): nothing more it receives is used.
    var deflateClosed = false
    /// Reading is paused (`WebSocketConnection.setReceiving(false)`), applied again when it was
    /// asked before the handshake completed.
    var readingPaused = false
    /// A connecting client's extra handshake headers.
    var clientHeaders: [HTTPHeader]?
    /// A connecting client's URL, with the addresses not tried yet after the current one.
    var clientURL: WebSocketURL?
    /// A listener's upgrade request, kept from FILTER_PROTOCOL_CONNECTION to ESTABLISHED.
    var upgradeRequest: HTTPServerRequest?
    var exchange: HTTPExchange?

    deinit { deflateInput?.deallocate() }

    /// Nothing is kept: the record can go.
    var isEmpty: Bool {
        wsi == nil && connection == nil && !established && !closeOnWritable && !readingPaused && clientHeaders == nil
            && clientURL == nil && upgradeRequest == nil && exchange == nil
    }
}
