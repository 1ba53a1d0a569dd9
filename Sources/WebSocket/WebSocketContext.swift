import Glibc

/// A libwebsockets context with its one service thread: the place WebSocket clients and
/// servers live.
///
/// Creating one costs tens of milliseconds (TLS and CA store set-up), so make one and reuse
/// it for every connection and listener. Every lws call runs on the service thread; the
/// methods here and on connections may be called from any thread. `shutdown()` (or
/// releasing the context) closes everything; no handler runs after it returns.
///
/// Several contexts may live in one process: only the first initialises OpenSSL through
/// libwebsockets, because lws 4.1 re-allocates its process-wide OpenSSL indexes in every
/// context that does, which breaks TLS handshakes in progress in the others.
public final class WebSocketContext: Sendable {
    /// The options the context was created with.
    public let options: Options
    private let thread: ServiceThread

    /// Creates the context and starts its service thread.
    ///
    /// - Parameter options: limits, timeouts and the CA file for `wss://`.
    /// - Throws: `WebSocketError.fileUnreadable` for a CA file that cannot be read,
    ///   `.contextCreationFailed` when libwebsockets cannot create the context.
    public init(options: Options = Options()) throws(WebSocketError) {
        if let file = options.certificateAuthorityFile { try Self.checkReadable(file) }
        self.options = options
        thread = try ServiceThread(options: options)
    }

    deinit { thread.shutdown() }

    /// Bytes queued for writing on this context's connections, summed: what their
    /// `WebSocketConnection.bufferedAmount`s add up to, read without visiting them (a server
    /// bounds the memory its slow readers hold with it).
    public var bufferedAmount: Int { thread.bufferedBytes.load(ordering: .relaxed) }

    /// Opens a client connection.
    ///
    /// Returns at once; the connection reports `.open`, or `.failed` when the name lookup,
    /// connect, TLS or opening handshake fails. A host name is resolved first, off the service
    /// thread (`getaddrinfo`; a name that does not resolve fails with `.hostNotFound`), and its
    /// addresses are tried in order until one connects; the name stays the `Host` header, TLS's
    /// server name and what the certificate must match.
    ///
    /// - Parameters:
    ///   - url: `ws://host[:port]/path?query` or `wss://…` (RFC 6455 §3). wss verifies the
    ///     server against the system CA store plus `Options.certificateAuthorityFile`, and its
    ///     name or IP address against the certificate.
    ///   - headers: extra header fields for the opening handshake.
    ///   - onEvent: an event handler, set before the attempt starts; or nil to use `events`.
    /// - Returns: the connection, `connecting`.
    /// - Throws: `WebSocketError.invalidURL`, or `.contextShutDown` after `shutdown()`.
    public func connect(
        url: String,
        headers: [HTTPHeader] = [],
        onEvent: (@Sendable (WebSocketEvent) -> Void)? = nil
    ) throws(WebSocketError) -> WebSocketConnection {
        try connect(url: url, headers: headers, onEvent: onEvent, resolve: HostResolver.shared.resolve)
    }

    /// `connect(url:headers:onEvent:)` with the name lookup given (tests answer it themselves).
    func connect(
        url: String,
        headers: [HTTPHeader],
        onEvent: (@Sendable (WebSocketEvent) -> Void)?,
        resolve: (String, @escaping @Sendable (HostResolver.Outcome) -> Void) -> Void
    ) throws(WebSocketError) -> WebSocketConnection {
        let parsed = try WebSocketURL(url)
        let connection = WebSocketConnection(clientWithID: thread.makeID(), url: url, thread: thread)
        if let onEvent { connection.setEventHandler(onEvent) }
        guard !HostResolver.isLiteral(parsed.host) else {
            guard thread.enqueue(.connect(connection, parsed, headers: headers)) else { throw .contextShutDown }
            return connection
        }
        // Until the lookup ends, a shutdown answers the connection itself (contextShutDown) and
        // the lookup's result is dropped.
        guard thread.beginLookup(connection) else { throw .contextShutDown }
        resolve(parsed.host) { [thread] outcome in
            switch outcome {
            case .addresses(let addresses):
                var resolved = parsed
                resolved.addresses = addresses
                _ = thread.endLookup(connection.id, then: .connect(connection, resolved, headers: headers))
            case .failure(let reason):
                if thread.endLookup(connection.id, then: nil) { connection.fail(.hostNotFound(url: url, host: parsed.host, reason: reason)) }
            case .busy(let reason):
                if thread.endLookup(connection.id, then: nil) { connection.fail(.connectFailed(url: url, message: reason, errno: 0)) }
            }
        }
        return connection
    }

    /// Starts listening for WebSocket upgrades and plain HTTP requests on one port.
    ///
    /// An upgrade request without `Sec-WebSocket-Protocol` is accepted; one that lists
    /// subprotocols is refused by libwebsockets 4.1 (none is offered). Must not be called from
    /// a handler (it waits for the service thread).
    ///
    /// - Parameters:
    ///   - host: an IPv4 or IPv6 address of this host, or an interface name (lws `iface`);
    ///     `127.0.0.1` by default.
    ///   - port: the TCP port; 0 picks an ephemeral one (read it from `WebSocketServer.port`).
    ///   - tls: certificate and key to serve `wss://`; nil for `ws://`.
    ///   - customHeaderNames: header names outside lws' known list to capture into requests.
    ///   - others: other contexts whose service threads serve some of the connections: each
    ///     accepted TCP connection goes to the next of this context and these in turn, so a
    ///     server uses as many cores as it has contexts (libwebsockets 4.1 as Debian builds
    ///     it runs one service thread per context, `LWS_MAX_SMP` 1). A connection served
    ///     elsewhere is accepted here, its descriptor duplicated and adopted there
    ///     (`lws_adopt_socket_vhost`).
    ///   - onConnection: told of each accepted WebSocket connection, on the service thread
    ///     that serves it, before its `.open`; attach its handler or stream here. Must not block.
    ///   - acceptsDeflate: decides, for each upgrade request that offers `permessage-deflate`,
    ///     whether this listener accepts it (`Options.permessageDeflate` must be set; nil
    ///     accepts every offer). Called on the service thread before `onConnection`, with the
    ///     request's path and headers; it must not block.
    ///   - onRequest: answers plain HTTP requests (body complete, at most
    ///     `Options.maxHTTPBodySize` bytes); nil answers 404. Runs in a task that prefers a
    ///     Dispatch-backed executor of this module, so requests are answered even when the
    ///     cooperative pool is saturated.
    /// - Returns: the listener, with its bound port.
    /// - Throws: `WebSocketError.listenFailed` (the port is taken, the address is not on
    ///   this host, the certificate does not load), `.fileUnreadable` for a TLS file that
    ///   cannot be read, `.contextShutDown` after `shutdown()`.
    public func listen(
        host: String = "127.0.0.1",
        port: Int = 0,
        tls: WebSocketServer.TLSConfiguration? = nil,
        customHeaderNames: [String] = [],
        spreadingTo others: [WebSocketContext] = [],
        acceptsDeflate: (@Sendable (HTTPServerRequest) -> Bool)? = nil,
        onConnection: @escaping @Sendable (WebSocketConnection) -> Void,
        onRequest: (@Sendable (HTTPServerRequest) async -> HTTPServerResponse)? = nil
    ) throws(WebSocketError) -> WebSocketServer {
        if let tls {
            try Self.checkReadable(tls.certificateChainFile)
            try Self.checkReadable(tls.privateKeyFile)
        }
        guard (0...65535).contains(port) else { throw .listenFailed(host: host, port: port, errno: EINVAL) }
        var companions: [WebSocketServer] = []
        do throws(WebSocketError) {
            for other in others {
                companions.append(try other.createServer(
                    host: host, port: nil, tls: tls, customHeaderNames: customHeaderNames, acceptsDeflate: acceptsDeflate,
                    onConnection: onConnection, onRequest: onRequest, spread: []))
            }
            let spread = companions.map { SpreadTarget(thread: $0.thread, serverID: $0.id) }
            let server = try createServer(
                host: host, port: port, tls: tls, customHeaderNames: customHeaderNames, acceptsDeflate: acceptsDeflate,
                onConnection: onConnection, onRequest: onRequest, spread: spread)
            return WebSocketServer(id: server.id, host: host, port: server.port, isSecure: tls != nil, thread: thread, companions: companions)
        } catch {
            for companion in companions { companion.stop() }
            throw error
        }
    }

    /// Creates a vhost on this context's service thread: listening on `port`, or on nothing
    /// (`nil`: it serves connections another context's listener hands it).
    private func createServer(
        host: String, port: Int?, tls: WebSocketServer.TLSConfiguration?, customHeaderNames: [String],
        acceptsDeflate: (@Sendable (HTTPServerRequest) -> Bool)?,
        onConnection: @escaping @Sendable (WebSocketConnection) -> Void,
        onRequest: (@Sendable (HTTPServerRequest) async -> HTTPServerResponse)?, spread: [SpreadTarget]
    ) throws(WebSocketError) -> WebSocketServer {
        // The reply would need this very thread: refuse instead of deadlocking.
        precondition(!thread.isCurrent, "listen() cannot be called from a handler on the service thread")
        let id = thread.makeID()
        let reply = Reply<Int>()
        let request = ListenRequest(
            serverID: id, host: host, port: port, tls: tls, customHeaderNames: customHeaderNames, acceptsDeflate: acceptsDeflate,
            onConnection: onConnection, onRequest: onRequest, reply: reply, spread: spread
        )
        guard thread.enqueue(.listen(request)) else { throw .contextShutDown }
        let bound = try reply.wait().get()
        return WebSocketServer(id: id, host: host, port: bound, isSecure: tls != nil, thread: thread)
    }

    /// Closes every connection and listener, destroys the lws context and ends the service
    /// thread. Open connections report `.closed` with 1006 (no close frame is sent; close
    /// them first with a code for a graceful stop), attempts report
    /// `.failed(.contextShutDown)`. Waits until that is done, unless called from a handler
    /// on the service thread; no handler runs after it returns. Calling it again does nothing.
    public func shutdown() {
        thread.shutdown()
    }

    /// Runs `work` on the service thread once the current service pass ends: after every event
    /// of the bytes read in this pass (one `lws_service` call: a read of up to lws' receive
    /// buffer per ready socket) was handed to its handler. A handler that queues work for
    /// another thread can so hand over a pass's events in one go instead of one wake-up each.
    ///
    /// - Parameter work: what to run; it must not block (it holds up every connection of the
    ///   context).
    /// - Returns: true when called on this context's service thread (inside a handler) and
    ///   `work` was queued; false anywhere else, and `work` is not kept. Work queued while the
    ///   context shuts down still runs, before the service thread ends.
    public func afterServicePass(_ work: @escaping @Sendable () -> Void) -> Bool {
        thread.afterServicePass(work)
    }

    /// Measures the service thread's lag: how long a command waits before the thread runs it
    /// (the time a busy pass holds up every connection of the context).
    ///
    /// - Parameter completion: called on the service thread with the wait; it must not block.
    /// - Returns: false when the context is not running (then `completion` is never called).
    @discardableResult
    public func measureServiceLag(_ completion: @escaping @Sendable (Duration) -> Void) -> Bool {
        thread.enqueue(.probe(ContinuousClock.now, completion))
    }

    private static func checkReadable(_ path: String) throws(WebSocketError) {
        if access(path, R_OK) != 0 { throw .fileUnreadable(path: path, errno: errno) }
    }
}
