import Dispatch
import SystemSupport

/// Work another thread hands to the service thread, the only thread that calls lws.
enum ServiceCommand: Sendable {
    /// Start a client connection (`lws_client_connect_via_info`).
    case connect(WebSocketConnection, WebSocketURL, headers: [HTTPHeader])
    /// The connection has frames queued: `lws_callback_on_writable` once it is established.
    case writable(UInt)
    /// Close the connection's socket now, without a close frame.
    case kill(UInt)
    /// Resume (true) or pause (false) reading the connection's socket (`lws_rx_flow_control`).
    case receiving(UInt, Bool)
    /// Create a listening vhost and answer with its bound port.
    case listen(ListenRequest)
    /// Serve a TCP connection another context's listener accepted, on this listener's vhost
    /// (`lws_adopt_socket_vhost`); the descriptor is this command's to close if it cannot.
    case adopt(serverID: UInt, descriptor: Int32)
    /// Stop a listener (refuse new connections, kill open ones), then answer.
    case stopServer(UInt, Reply<Void>)
    /// Refuse a listener's new connections, keep its open ones, then answer.
    case stopAccepting(UInt, Reply<Void>)
    /// An HTTP response is ready for this exchange: ask for HTTP_WRITEABLE.
    case respond(UInt, HTTPExchange)
    /// Measure how long commands wait: call back with the time since the instant given.
    case probe(ContinuousClock.Instant, @Sendable (Duration) -> Void)
}

/// What `listen` asks the service thread to create.
struct ListenRequest: Sendable {
    var serverID: UInt
    var host: String
    /// The port to bind, or `nil` for a vhost that listens on nothing and serves the
    /// connections another context's listener hands it (`ServiceCommand.adopt`).
    var port: Int?
    var tls: WebSocketServer.TLSConfiguration?
    var customHeaderNames: [String]
    /// Whether an upgrade's `permessage-deflate` offer is accepted (nil: every one).
    var acceptsDeflate: (@Sendable (HTTPServerRequest) -> Bool)?
    var onConnection: @Sendable (WebSocketConnection) -> Void
    var onRequest: (@Sendable (HTTPServerRequest) async -> HTTPServerResponse)?
    var reply: Reply<Int>
    /// Other contexts' listeners (created with no port) this one hands accepted connections
    /// to, in turn with itself.
    var spread: [SpreadTarget] = []
}

/// A listener of another context that serves some of a listener's connections.
struct SpreadTarget: Sendable {
    var thread: ServiceThread
    var serverID: UInt
}

/// A one-shot answer from the service thread to a caller blocked on it.
final class Reply<Value: Sendable>: Sendable {
    private let result = Locked<Result<Value, WebSocketError>?>(nil)
    private let answered = DispatchSemaphore(value: 0)

    /// Answers once; later answers are ignored.
    func resolve(_ value: Result<Value, WebSocketError>) {
        let first = result.withLock { stored in
            guard stored == nil else { return false }
            stored = value
            return true
        }
        if first { answered.signal() }
    }

    /// Blocks until answered. Every command is answered: by the service thread, or by the
    /// shutdown path when the context stops first.
    func wait() -> Result<Value, WebSocketError> {
        answered.wait()
        return result.withLock { $0! }
    }
}
