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
    var port: Int
    var tls: WebSocketServer.TLSConfiguration?
    var customHeaderNames: [String]
    var onConnection: @Sendable (WebSocketConnection) -> Void
    var onRequest: (@Sendable (HTTPServerRequest) async -> HTTPServerResponse)?
    var reply: Reply<Int>
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
