import SystemSupport
import RealtimeProtocol

/// A `RealtimeTransport` with no network: each `open` makes an `InMemorySocket` that the test
/// drives by hand (accept it, send it frames, close or drop it) and inspects (the frames the
/// client sent, how the client closed it). With `ManualClock` it makes a realtime client fully
/// deterministic.
public final class InMemoryTransport: RealtimeTransport {
    private struct State {
        var sockets: [InMemorySocket] = []
        var openError: (any Error)?
    }

    private let state = Locked(State())

    /// Creates a transport with no sockets.
    public init() {}

    /// Every socket opened so far, oldest first.
    public var sockets: [InMemorySocket] { state.withLock { $0.sockets } }

    /// The most recently opened socket.
    public var latest: InMemorySocket? { state.withLock { $0.sockets.last } }

    /// When set, `open` throws it (a transport that cannot even start an attempt).
    public var openError: (any Error)? {
        get { state.withLock { $0.openError } }
        set { state.withLock { $0.openError = newValue } }
    }

    /// Records a new socket for `url`; it stays unopened until the test calls `accept()`.
    ///
    /// - Throws: `openError` when set.
    public func open(url: String, onEvent: @escaping @Sendable (RealtimeTransportEvent) -> Void) throws -> any RealtimeSocket {
        try state.withLock { state throws -> InMemorySocket in
            if let error = state.openError { throw error }
            let socket = InMemorySocket(url: url, index: state.sockets.count, onEvent: onEvent)
            state.sockets.append(socket)
            return socket
        }
    }
}

/// One socket of an `InMemoryTransport`: the test plays the server.
public final class InMemorySocket: RealtimeSocket {
    /// How the client ended the socket.
    public enum ClientEnd: Sendable, Hashable {
        /// `close(code:reason:)`.
        case closed(code: UInt16, reason: String)
        /// `abort()`.
        case aborted
    }

    private struct State {
        var sent: [String] = []
        var clientEnd: ClientEnd?
        var ended = false
    }

    /// The URL the client opened.
    public let url: String
    /// The socket's position among the transport's sockets (0 for the first).
    public let index: Int
    private let onEvent: @Sendable (RealtimeTransportEvent) -> Void
    private let state = Locked(State())

    init(url: String, index: Int, onEvent: @escaping @Sendable (RealtimeTransportEvent) -> Void) {
        self.url = url
        self.index = index
        self.onEvent = onEvent
    }

    // MARK: - What the client did

    /// Every text frame the client sent, in order.
    public var sent: [String] { state.withLock { $0.sent } }

    /// The frames the client sent, parsed (frames that do not parse are left out).
    public var sentMessages: [RealtimeMessage] { sent.compactMap { try? RealtimeMessage(parsing: $0) } }

    /// How the client ended this socket, if it did.
    public var clientEnd: ClientEnd? { state.withLock { $0.clientEnd } }

    /// Records a frame; `false` once the socket ended.
    public func send(text: String) -> Bool {
        state.withLock { state in
            guard !state.ended else { return false }
            state.sent.append(text)
            return true
        }
    }

    /// Records the client's close.
    public func close(code: UInt16, reason: String) {
        state.withLock { state in
            if state.clientEnd == nil { state.clientEnd = .closed(code: code, reason: reason) }
            state.ended = true
        }
    }

    /// Records the client's abort.
    public func abort() {
        state.withLock { state in
            if state.clientEnd == nil { state.clientEnd = .aborted }
            state.ended = true
        }
    }

    // MARK: - Playing the server

    /// The upgrade completed: the client gets `.open`.
    public func accept() { onEvent(.open) }

    /// The server sends one text frame.
    public func receive(_ text: String) { onEvent(.text(text)) }

    /// The server sends a protocol message.
    public func receive(_ message: RealtimeMessage) { onEvent(.text(message.text)) }

    /// The server sends `<ns>:connection_established`; `activityTimeout` in seconds, or
    /// `nil` to leave it out.
    public func sendHandshake(socketID: String, activityTimeout: Int? = 120, namespace: ProtocolNamespace = .bird) {
        let payload = ConnectionEstablished(socketID: socketID, activityTimeout: activityTimeout)
        let data = (try? RealtimeMessage.jsonText(payload)) ?? "{}"
        receive(RealtimeMessage(event: namespace.event(.connectionEstablished), data: data))
    }

    /// The server sends a binary frame of `size` bytes.
    public func receiveBinary(size: Int) { onEvent(.binary(size)) }

    /// The server closes with `code` and `reason`.
    public func serverClose(code: UInt16, reason: String = "") {
        state.withLock { $0.ended = true }
        onEvent(.closed(code: code, reason: reason))
    }

    /// The TCP connection ends without a close frame: the client sees 1006.
    public func drop() { serverClose(code: 1006) }

    /// The socket never opens (connection refused, DNS failure).
    public func fail(_ message: String = "connection refused") {
        state.withLock { $0.ended = true }
        onEvent(.failed(message))
    }
}
