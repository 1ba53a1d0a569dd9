/// A listening socket of a `WebSocketContext` that accepts WebSocket connections and plain
/// HTTP requests on the same port (one libwebsockets vhost).
public final class WebSocketServer: Sendable {
    /// The certificate and key a `wss://` listener serves.
    public struct TLSConfiguration: Hashable, Sendable {
        /// PEM file with the server certificate, then any intermediates.
        public var certificateChainFile: String
        /// PEM file with the certificate's private key.
        public var privateKeyFile: String

        /// Creates a TLS configuration.
        ///
        /// - Parameters:
        ///   - certificateChainFile: path of the PEM certificate chain.
        ///   - privateKeyFile: path of the PEM private key.
        public init(certificateChainFile: String, privateKeyFile: String) {
            self.certificateChainFile = certificateChainFile
            self.privateKeyFile = privateKeyFile
        }
    }

    /// The address listened on, as given to `listen`.
    public let host: String
    /// The bound TCP port (the ephemeral port chosen when `listen` was given 0).
    public let port: Int
    /// Whether it serves TLS (`wss://`, `https://`).
    public let isSecure: Bool

    let id: UInt
    let thread: ServiceThread
    /// The listeners of other contexts this one spreads its connections to
    /// (`WebSocketContext.listen(…, spreadingTo:)`): stopped with it.
    let companions: [WebSocketServer]

    init(id: UInt, host: String, port: Int, isSecure: Bool, thread: ServiceThread, companions: [WebSocketServer] = []) {
        self.id = id
        self.host = host
        self.port = port
        self.isSecure = isSecure
        self.thread = thread
        self.companions = companions
    }

    /// The URL a client connects to for `path`, e.g. `ws://127.0.0.1:41234/app/KEY`.
    ///
    /// - Parameter path: the path and query, starting with `/`.
    /// - Returns: the `ws://` or `wss://` URL.
    public func url(path: String = "/") -> String {
        let name = host.contains(":") ? "[\(host)]" : host
        return "\(isSecure ? "wss" : "ws")://\(name):\(port)\(path)"
    }

    /// Stops accepting and keeps what is open: from its return on, every new TCP connection is
    /// closed at once (the client sees its connect fail, not a handshake), while open
    /// connections and exchanges go on. The first step of a graceful shutdown: close the
    /// open ones next, then `stop()`. Waits for the service thread unless called from a
    /// handler on it; does nothing after the context shut down.
    public func stopAccepting() {
        let reply = Reply<Void>()
        if thread.enqueue(.stopAccepting(id, reply)), !thread.isCurrent { _ = reply.wait() }
        for companion in companions { companion.stopAccepting() }
    }

    /// Stops accepting: from its return on, every new TCP connection is closed at once and
    /// every plain HTTP request refused; open connections close without a close frame (each
    /// reports 1006). Close them first with a code for a graceful stop.
    ///
    /// The port stays bound until the context shuts down: libwebsockets 4.1.6 cannot close a
    /// listening socket on its own (`lws_vhost_destroy` never completes while the vhost has
    /// sockets). Waits for the service thread unless called from a handler on it; does
    /// nothing after the context shut down.
    public func stop() {
        let reply = Reply<Void>()
        if thread.enqueue(.stopServer(id, reply)), !thread.isCurrent { _ = reply.wait() }
        for companion in companions { companion.stop() }
    }
}
