import Synchronization
import SystemSupport

/// One WebSocket connection, client or server side (RFC 6455).
///
/// Send from any thread: frames are queued under a lock and written by the context's service
/// thread in the order queued: at once when the socket has nothing pending (plain TCP), else
/// one `lws_write` per WRITEABLE callback. Messages longer than
/// `WebSocketContext.Options.maxFrameSize` go out fragmented (RFC 6455 §5.4).
///
/// Events arrive in order through `events` and/or the handler set with `setEventHandler`;
/// events that arrive before either is attached are kept for the first one attached. The
/// last event is `.closed` or `.failed`; after it the handler is released.
///
/// The context keeps a connection alive until it closes: dropping the last reference does
/// not close it; call `close` or `abort`.
public final class WebSocketConnection: Sendable {
    /// Which side of the connection this is.
    public enum Role: Hashable, Sendable {
        /// Opened by `WebSocketContext.connect`.
        case client
        /// Accepted by a `WebSocketServer`.
        case server
    }

    /// Which side this is.
    public let role: Role
    /// The URL a client connected to; nil on the server side.
    public let url: String?
    /// The upgrade request a server accepted (method GET, path such as `/app/KEY`, query,
    /// headers, the peer's address); nil on the client side.
    public let request: HTTPServerRequest?

    let id: UInt
    let thread: ServiceThread
    private let machine: Locked<ConnectionStateMachine>
    private let delivery = EventDelivery()
    private let compressed = Atomic<Bool>(false)

    init(clientWithID id: UInt, url: String, thread: ServiceThread) {
        role = .client
        self.url = url
        request = nil
        self.id = id
        self.thread = thread
        machine = Locked(ConnectionStateMachine(
            phase: .connecting, maxMessageSize: thread.options.maxMessageSize, maxFrameSize: thread.options.maxFrameSize,
            maxBufferedAmount: thread.options.maxBufferedAmount
        ))
    }

    init(serverSideWithID id: UInt, request: HTTPServerRequest, thread: ServiceThread) {
        role = .server
        url = nil
        self.request = request
        self.id = id
        self.thread = thread
        machine = Locked(ConnectionStateMachine(
            phase: .open, maxMessageSize: thread.options.maxMessageSize, maxFrameSize: thread.options.maxFrameSize,
            maxBufferedAmount: thread.options.maxBufferedAmount
        ))
    }

    // MARK: public API

    /// The connection's events, in order; single consumer.
    ///
    /// The first access creates the stream and hands it the events kept so far. The stream
    /// finishes after `.closed` or `.failed`.
    public var events: AsyncStream<WebSocketEvent> { delivery.stream }

    /// Sets the function told about every event, in order, one at a time.
    ///
    /// It runs on the context's service thread (or, for events kept before it was set, on
    /// the calling thread), so it must not block: hand slow work elsewhere. It may call any
    /// method of this module, including `send` and `close`.
    ///
    /// - Parameter handler: called with each event; released after the last one.
    public func setEventHandler(_ handler: @escaping @Sendable (WebSocketEvent) -> Void) {
        delivery.setHandler(handler)
    }

    /// Queues a text message.
    ///
    /// - Parameter text: the message; sent as UTF-8 (RFC 6455 §5.6).
    /// - Throws: `WebSocketError.connectionClosed` when the connection is closing or closed;
    ///   `.sendBufferFull` when more than `Options.maxBufferedAmount` would be queued for a
    ///   peer that is not reading: the connection is dropped (`.closed` with 1006 and that
    ///   reason). While a client is still connecting, the message is kept and sent after `.open`.
    public func send(text: String) throws(WebSocketError) {
        try queue(.message(.text(text)))
    }

    /// Queues a binary message.
    ///
    /// - Parameter binary: the message bytes.
    /// - Throws: `WebSocketError.connectionClosed` when the connection is closing or closed;
    ///   `.sendBufferFull` as for `send(text:)`.
    public func send(binary: [UInt8]) throws(WebSocketError) {
        try queue(.message(.binary(binary)))
    }

    /// Queues a ping; the peer answers with a pong carrying the same payload (RFC 6455 §5.5.2),
    /// reported as `.pong`.
    ///
    /// - Parameter payload: 0–125 bytes (RFC 6455 §5.5).
    /// - Throws: `WebSocketError.controlPayloadTooLong` over 125 bytes,
    ///   `WebSocketError.connectionClosed` when the connection is closing or closed.
    public func ping(_ payload: [UInt8] = []) throws(WebSocketError) {
        guard payload.count <= 125 else { throw .controlPayloadTooLong(payload.count) }
        try queue(.ping(payload))
    }

    /// Starts the closing handshake after the frames already queued (RFC 6455 §7.1.2).
    ///
    /// The connection then reports `.closed(code:reason:)` with this code once lws has sent
    /// the close frame and the peer answered or the 5 s close timeout of lws passed. Called
    /// while a client is connecting, it cancels the attempt: `.failed(.cancelled)`. Calling it
    /// again, or after the peer closed, does nothing.
    ///
    /// - Parameters:
    ///   - code: a code that may be sent (`WebSocketCloseCode.isSendable`).
    ///   - reason: at most 123 bytes of UTF-8 (RFC 6455 §5.5).
    /// - Throws: `WebSocketError.invalidCloseCode` or `.controlPayloadTooLong`.
    public func close(code: WebSocketCloseCode = .normalClosure, reason: String = "") throws(WebSocketError) {
        let wake = try withMachine { machine throws(WebSocketError) in try machine.close(code: code, reason: reason) }
        perform(wake)
    }

    /// Drops the TCP connection without a close frame; the peer sees 1006 (RFC 6455 §7.1.5),
    /// and so does this side's `.closed`. The connection is reset (SO_LINGER 0): bytes not yet
    /// sent are dropped, not kept by the kernel for a peer that stopped reading. While a
    /// client is connecting, cancels the attempt.
    public func abort() {
        perform(withMachine { $0.abort() })
    }

    /// Pauses (`false`) or resumes (`true`) reading from the socket (`lws_rx_flow_control`).
    ///
    /// While paused no event arrives: the peer's frames wait in the kernel's buffers, and once
    /// those are full TCP's flow control holds the peer back, so a peer that sends faster than
    /// the app handles events costs bounded memory instead of a growing queue. Control frames
    /// wait too (a pong is not seen until reading resumes). Asked before the handshake
    /// completes, it applies from the open. Safe from any thread; the last call wins.
    public func setReceiving(_ enabled: Bool) {
        thread.enqueue(.receiving(id, enabled))
    }

    /// Bytes of queued messages not yet handed to libwebsockets (`lws_write`), for
    /// back-pressure: it grows when the peer reads slower than this side sends.
    public var bufferedAmount: Int { machine.withLock { $0.bufferedAmount } }

    /// Whether `permessage-deflate` (RFC 7692) was negotiated in the opening handshake
    /// (a listener's, with `WebSocketContext.Options.permessageDeflate`): messages both ways
    /// are then compressed. Known when the listener's `onConnection` sees the connection;
    /// false on client connections (they never offer it).
    public var isCompressed: Bool { compressed.load(ordering: .acquiring) }

    // MARK: used by the service loop

    var isFinished: Bool { delivery.isFinished }
    var isCancelled: Bool { machine.withLock { $0.isCancelled } }

    func established() -> ConnectionStateMachine.Established { withMachine { $0.established() } }
    func nextWrite(inCallback: Bool = true) -> ConnectionStateMachine.Write {
        withMachine { $0.nextWrite(inCallback: inCallback) }
    }

    func received(_ bytes: UnsafeRawBufferPointer, binary: Bool, first: Bool, final: Bool) -> ConnectionStateMachine.Receive {
        withMachine { $0.received(bytes, binary: binary, first: first, final: final) }
    }

    func peerClosed(payload: UnsafeRawBufferPointer) -> WebSocketCloseCode? { withMachine { $0.peerClosed(payload: payload) } }

    func deliver(_ event: WebSocketEvent) { delivery.deliver(event, terminal: false) }

    /// The handshake negotiated `permessage-deflate` (service thread, before `.open`).
    func markCompressed() { compressed.store(true, ordering: .releasing) }

    /// The service loop closes the connection for a message it cannot take: `.closed` reports
    /// `code`.
    func closeForIncoming(_ code: WebSocketCloseCode, reason: String) {
        _ = withMachine { $0.closeForIncoming(code, reason: reason) }
    }

    /// The attempt failed before the handshake: reports `.failed` once.
    func fail(_ error: WebSocketError) {
        if let event = withMachine({ $0.connectFailed(error) }) {
            delivery.deliver(event, terminal: true)
        }
    }

    /// The connection is gone: reports its terminal event once.
    func terminate(neverOpened: WebSocketError) {
        if let event = withMachine({ $0.closed(neverOpened: neverOpened) }) {
            delivery.deliver(event, terminal: true)
        }
    }

    /// Runs `body` on the state machine under its lock, and adds what it changed of the bytes
    /// queued to the service thread's sum (`ServiceThread.bufferedBytes`).
    private func withMachine<Result, Failure: Error>(
        _ body: (inout ConnectionStateMachine) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        let (result, change) = try machine.withLock { machine throws(Failure) in
            let before = machine.bufferedAmount
            let result = try body(&machine)
            return (result, machine.bufferedAmount - before)
        }
        if change != 0 { thread.bufferedBytes.add(change, ordering: .relaxed) }
        return result
    }

    private func queue(_ frame: ConnectionStateMachine.Outgoing) throws(WebSocketError) {
        let (wake, error) = withMachine { machine -> (ConnectionStateMachine.Wake, WebSocketError?) in
            do throws(WebSocketError) {
                return (try machine.send(frame), nil)
            } catch .sendBufferFull(let limit) {
                // The peer is not reading: drop the connection rather than buffer without end.
                return (machine.abortForFullBuffer(), .sendBufferFull(limit: limit))
            } catch {
                return (.none, error)
            }
        }
        perform(wake)
        if let error { throw error }
    }

    private func perform(_ wake: ConnectionStateMachine.Wake) {
        switch wake {
        case .none: break
        case .requestWritable: thread.enqueue(.writable(id))
        case .kill: thread.enqueue(.kill(id))
        }
    }
}
