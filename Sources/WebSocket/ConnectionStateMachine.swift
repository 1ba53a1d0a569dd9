/// The life of one WebSocket connection as a value: what may be sent, what to write next,
/// how received fragments become messages, and which close code to report.
///
/// Every event is a `mutating func` returning what the owner must do; the owner (the
/// connection, under its lock, and the service thread) performs the lws calls. Nothing here
/// touches libwebsockets, so the rules are tested on plain values.
struct ConnectionStateMachine {
    enum Phase: Hashable, Sendable {
        /// Client only: the TCP connect, TLS and opening handshake are under way.
        case connecting
        case open
        /// A close frame was sent or received; the close handshake is finishing.
        case closing
        case closed
    }

    /// A frame waiting to be written.
    enum Outgoing: Hashable, Sendable {
        case message(MessageBytes)
        case ping([UInt8])
        case close(WebSocketCloseCode, reason: [UInt8])
    }

    /// What the service thread must ask libwebsockets after a call from any thread.
    enum Wake: Hashable, Sendable {
        case none
        /// `lws_callback_on_writable`, once the connection is established.
        case requestWritable
        /// Close the TCP connection now, without a close frame.
        case kill
    }

    /// The one `lws_write` (or close) to perform in a WRITEABLE callback.
    enum Write: Hashable, Sendable {
        case none
        /// A data frame: a whole message or one fragment of it (RFC 6455 §5.4).
        case frame(FrameChunk, binary: Bool, first: Bool, last: Bool, more: Bool)
        case ping([UInt8], more: Bool)
        /// `lws_close_reason` with this code and reason, then return -1 (lws sends the frame).
        case close(WebSocketCloseCode, reason: [UInt8])
        /// A close is next, asked for outside a WRITEABLE callback: it stays queued for one.
        case closeNext
    }

    /// What to do with received payload bytes.
    enum Receive: Hashable, Sendable {
        case none
        case deliver(WebSocketEvent)
        /// `lws_close_reason` with this code, then return -1 from the RECEIVE callback.
        case close(WebSocketCloseCode, reason: [UInt8])
    }

    /// What to do when the opening handshake completed.
    enum Established: Hashable, Sendable {
        /// Report `.open`; ask for WRITEABLE when frames are already queued.
        case open(requestWritable: Bool)
        /// The attempt was cancelled meanwhile: kill the connection, report nothing yet.
        case kill
    }

    private(set) var phase: Phase
    /// Bytes of queued data frames not yet handed to `lws_write`.
    private(set) var bufferedAmount = 0
    let maxMessageSize: Int
    let maxFrameSize: Int
    let maxBufferedAmount: Int

    private var queue: [Outgoing] = []
    private var head = 0
    private var offset = 0
    private var writeRequested = false
    private var sendingClosed = false
    private var cancelRequested = false
    private var abortRequested = false
    private var localClose: (code: WebSocketCloseCode, reason: String)?
    /// Why this side dropped the connection, reported with 1006 (`sendBufferFull`).
    private var abortReason = ""
    private var peerClose: (code: WebSocketCloseCode, reason: String)?
    private var incoming: [UInt8] = []
    private var incomingIsBinary = false
    private var discardingIncoming = false

    /// Creates the machine of a client (starts `connecting`) or server (starts `open`) side.
    ///
    /// - Parameters:
    ///   - phase: `.connecting` for a client, `.open` for a connection a server accepted.
    ///   - maxMessageSize: largest reassembled message accepted, in bytes; a larger one is
    ///     answered with close 1009 (RFC 6455 §7.4.1).
    ///   - maxFrameSize: largest data frame written, in bytes; longer messages are sent
    ///     fragmented (RFC 6455 §5.4).
    ///   - maxBufferedAmount: most bytes of messages queued; a send past it drops the
    ///     connection.
    init(phase: Phase, maxMessageSize: Int, maxFrameSize: Int, maxBufferedAmount: Int = .max) {
        precondition(phase == .connecting || phase == .open, "a connection starts connecting or open")
        precondition(maxFrameSize > 0 && maxMessageSize >= 0)
        self.phase = phase
        self.maxMessageSize = maxMessageSize
        self.maxFrameSize = maxFrameSize
        self.maxBufferedAmount = maxBufferedAmount
    }

    private var hasQueuedFrames: Bool { head < queue.count }

    /// Whether `close` or `abort` cancelled a client's attempt before the handshake.
    var isCancelled: Bool { cancelRequested }

    // MARK: calls from any thread

    /// Queues a data frame or ping.
    ///
    /// - Throws: `WebSocketError.connectionClosed` once a close was queued, sent or received;
    ///   `.sendBufferFull` when a message would take `bufferedAmount` past
    ///   `maxBufferedAmount` while earlier messages still wait (one message on an empty
    ///   queue is accepted whatever its size: the bound is on a backlog, for a peer that does
    ///   not read): the connection is then being dropped, and the owner must perform the kill
    ///   (`abortForFullBuffer`).
    mutating func send(_ frame: Outgoing) throws(WebSocketError) -> Wake {
        guard !sendingClosed, phase == .connecting || phase == .open else { throw .connectionClosed }
        if case .message(let bytes) = frame, bufferedAmount > 0, bufferedAmount + bytes.count > maxBufferedAmount {
            throw .sendBufferFull(limit: maxBufferedAmount)
        }
        enqueue(frame)
        return requestWriteIfIdle()
    }

    /// Starts the closing handshake (RFC 6455 §7.1.2) after the frames already queued; while
    /// connecting, cancels the attempt instead.
    ///
    /// - Throws: `WebSocketError.invalidCloseCode` for a code that may not be sent,
    ///   `.controlPayloadTooLong` for a reason over 123 bytes of UTF-8 (RFC 6455 §5.5).
    mutating func close(code: WebSocketCloseCode, reason: String) throws(WebSocketError) -> Wake {
        guard code.isSendable else { throw .invalidCloseCode(code) }
        let reasonBytes = Array(reason.utf8)
        guard reasonBytes.count <= 123 else { throw .controlPayloadTooLong(reasonBytes.count + 2) }
        switch phase {
        case .connecting:
            return cancel()
        case .open:
            guard !sendingClosed else { return .none }
            sendingClosed = true
            enqueue(.close(code, reason: reasonBytes))
            return requestWriteIfIdle()
        case .closing, .closed:
            return .none
        }
    }

    /// Drops the TCP connection without a close frame; while connecting, cancels the attempt.
    mutating func abort() -> Wake {
        switch phase {
        case .connecting:
            return cancel()
        case .open, .closing:
            guard !abortRequested else { return .none }
            abortRequested = true
            sendingClosed = true
            return .kill
        case .closed:
            return .none
        }
    }

    /// A send found the buffer full: drop the connection, and report the reason with 1006.
    mutating func abortForFullBuffer() -> Wake {
        abortReason = WebSocketError.sendBufferFull(limit: maxBufferedAmount).description
        return abort()
    }

    private mutating func cancel() -> Wake {
        guard !cancelRequested else { return .none }
        cancelRequested = true
        sendingClosed = true
        return .kill
    }

    private mutating func enqueue(_ frame: Outgoing) {
        if case .message(let bytes) = frame { bufferedAmount += bytes.count }
        queue.append(frame)
    }

    private mutating func requestWriteIfIdle() -> Wake {
        guard !writeRequested else { return .none }
        writeRequested = true
        return .requestWritable
    }

    // MARK: events on the service thread

    /// The opening handshake completed (a client's), or a server is about to report its new
    /// connection open.
    mutating func established() -> Established {
        guard phase == .connecting else { return .open(requestWritable: hasQueuedFrames) }
        if cancelRequested { return .kill }
        phase = .open
        return .open(requestWritable: hasQueuedFrames)
    }

    /// Takes the next frame to write, in a WRITEABLE callback or (`inCallback` false) when the
    /// service thread writes at once because the socket had nothing pending.
    ///
    /// - Parameter inCallback: false outside a WRITEABLE callback: a queued close is then left
    ///   in the queue and `.closeNext` returned, since only the callback can close.
    mutating func nextWrite(inCallback: Bool = true) -> Write {
        guard phase == .open, hasQueuedFrames else {
            writeRequested = false
            return .none
        }
        switch queue[head] {
        case .message(let bytes):
            let end = min(offset + maxFrameSize, bytes.count)
            let chunk = FrameChunk(bytes, range: offset..<end)
            let binary = bytes.isBinary
            let first = offset == 0
            let last = end == bytes.count
            bufferedAmount -= chunk.count
            if last {
                pop()
            } else {
                offset = end
            }
            return .frame(chunk, binary: binary, first: first, last: last, more: wantsMoreWrites())
        case .ping(let payload):
            pop()
            return .ping(payload, more: wantsMoreWrites())
        case .close(let code, let reason):
            // Only a WRITEABLE callback can close (by returning -1); the request stays.
            guard inCallback else { return .closeNext }
            localClose = (code, String(decoding: reason, as: UTF8.self))
            phase = .closing
            dropQueue()
            return .close(code, reason: reason)
        }
    }

    private mutating func wantsMoreWrites() -> Bool {
        writeRequested = hasQueuedFrames
        return writeRequested
    }

    private mutating func pop() {
        head += 1
        offset = 0
        if head == queue.count {
            queue.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 64 && head * 2 >= queue.count {
            queue.removeFirst(head)
            head = 0
        }
    }

    private mutating func dropQueue() {
        queue.removeAll()
        head = 0
        offset = 0
        bufferedAmount = 0
        writeRequested = false
        sendingClosed = true
    }

    /// Payload bytes of a data message arrived (one RECEIVE callback; a frame may take several).
    ///
    /// - Parameters:
    ///   - bytes: the payload bytes of this callback.
    ///   - binary: the message's opcode is binary (`lws_frame_is_binary`).
    ///   - first: the first bytes of a message (`lws_is_first_fragment`).
    ///   - final: the last bytes of the message (`lws_is_final_fragment` with
    ///     `lws_remaining_packet_payload` 0).
    mutating func received<Bytes: Collection<UInt8>>(_ bytes: Bytes, binary: Bool, first: Bool, final: Bool) -> Receive {
        guard !discardingIncoming, phase == .open || phase == .closing else { return .none }
        if first {
            incoming.removeAll(keepingCapacity: true)
            incomingIsBinary = binary
        }
        guard incoming.count + bytes.count <= maxMessageSize else {
            return closeForIncoming(.messageTooBig, reason: "message too big")
        }
        incoming.append(contentsOf: bytes)
        guard final else { return .none }
        let message = incoming
        incoming = []
        if incomingIsBinary { return .deliver(.binary(message)) }
        guard let text = String(validating: message, as: UTF8.self) else {
            return closeForIncoming(.invalidFramePayloadData, reason: "invalid UTF-8")
        }
        return .deliver(.text(text))
    }

    /// Closes for what came in (a broken limit, a message the connection cannot take): the rest
    /// of the message is discarded, the queue dropped, and `code` is what `.closed` reports.
    mutating func closeForIncoming(_ code: WebSocketCloseCode, reason: String) -> Receive {
        incoming = []
        discardingIncoming = true
        if localClose == nil && peerClose == nil { localClose = (code, reason) }
        phase = .closing
        dropQueue()
        return .close(code, reason: Array(reason.utf8))
    }

    /// The peer's close frame arrived (`LWS_CALLBACK_WS_PEER_INITIATED_CLOSE`): 2 bytes of
    /// big-endian code and a UTF-8 reason, or nothing (RFC 6455 §5.5.1).
    ///
    /// - Returns: the code to answer with instead of echoing the peer's, or `nil` to echo it.
    ///   A reason that is not UTF-8 fails the connection with 1007 (`invalidFramePayloadData`,
    ///   RFC 6455 §8.1); a payload of one byte, or a code a peer may not send (RFC 6455 §7.4:
    ///   `WebSocketCloseCode.isSendable`), is a protocol error: 1002. The connection then ends
    ///   with that code.
    @discardableResult
    mutating func peerClosed<Bytes: Collection<UInt8>>(payload: Bytes) -> WebSocketCloseCode? {
        let bytes = Array(payload)
        var answer: WebSocketCloseCode?
        if bytes.count >= 2 {
            let code = WebSocketCloseCode(UInt16(bytes[0]) << 8 | UInt16(bytes[1]))
            if String(validating: bytes[2...], as: UTF8.self) == nil {
                peerClose = (.invalidFramePayloadData, Self.invalidCloseReason)
                answer = .invalidFramePayloadData
            } else if !code.isSendable {
                peerClose = (.protocolError, "the peer sent close code \(code.rawValue), which no endpoint may send")
                answer = .protocolError
            } else {
                peerClose = (code, String(decoding: bytes[2...], as: UTF8.self))
            }
        } else if bytes.count == 1 {
            peerClose = (.protocolError, "the peer's close frame had a payload of one byte")
            answer = .protocolError
        } else {
            peerClose = (.noStatusReceived, "")
        }
        if phase == .open { phase = .closing }
        dropQueue()
        return answer
    }

    /// The reason reported for a peer's close frame whose reason is not UTF-8.
    static let invalidCloseReason = "the peer's close reason is not UTF-8"

    /// The connection attempt failed before the handshake completed.
    ///
    /// - Returns: the terminal event, or nil when one was already reported.
    mutating func connectFailed(_ error: WebSocketError) -> WebSocketEvent? {
        guard phase == .connecting else { return nil }
        phase = .closed
        dropQueue()
        return .failed(cancelRequested ? .cancelled : error)
    }

    /// The connection is gone (CLOSED, CLIENT_CLOSED, WSI_DESTROY or context shutdown).
    ///
    /// - Parameter neverOpened: what to report when it closed before the handshake completed.
    /// - Returns: the terminal event (RFC 6455 §7.1.5 rules), or nil when one was already reported.
    mutating func closed(neverOpened: WebSocketError) -> WebSocketEvent? {
        switch phase {
        case .closed:
            return nil
        case .connecting:
            return connectFailed(neverOpened)
        case .open, .closing:
            phase = .closed
            dropQueue()
            discardingIncoming = true
            if let peerClose { return .closed(code: peerClose.code, reason: peerClose.reason) }
            if abortRequested { return .closed(code: .abnormalClosure, reason: abortReason) }
            if let localClose { return .closed(code: localClose.code, reason: localClose.reason) }
            return .closed(code: .abnormalClosure, reason: "")
        }
    }
}
