import Dispatch
import SystemSupport
import Reachability
import Reconnect

/// A TCP client of newline-delimited UTF-8 lines that a `Reconnector` can keep alive.
///
/// ```swift
/// let stream = TCPLineStream(host: "127.0.0.1", port: 7000)
/// let reconnector = Reconnector(reachability: { try NetworkReachability(host: $0) })
/// reconnector.activate(stream)
/// stream.connect()
/// ```
///
/// Events (`reconnectEvents`): `willConnect` when an attempt starts, `opened` when TCP
/// connects, `ready` right after `opened` (a line protocol has no handshake), then
/// `disconnected(error:)` with a `TCPLineStreamError` on end of file or failure. `disconnect()`
/// reports `toldToDisconnect` first and `disconnected(error: nil)`, so the disconnect is
/// intentional. `verifyConnection()` sends `PING` and expects a `PONG` line within
/// `pingTimeout`.
///
/// Thread-safe: methods may be called from any thread; the work, the events and the line
/// handlers run on the stream's private serial queue, in order.
public final class TCPLineStream: ReconnectableStream {
    private enum Phase {
        case disconnected
        case connecting(TCPConnection, id: UInt64)
        case connected(TCPConnection, id: UInt64)
    }

    private struct State {
        var phase = Phase.disconnected
        var framer: LineFramer
        var nextID: UInt64 = 0
        /// The connection the unanswered `PING` went out on, and its sequence number.
        var pendingPing: (connection: UInt64, sequence: UInt64)?
        var pingSequence: UInt64 = 0
        var pingTimeout = Duration.seconds(2)
    }

    /// The host connected to (a name or literal), watched for reachability by the reconnector.
    public let destinationHost: String
    /// The TCP port.
    public let port: UInt16
    /// Where the stream reports to its `Reconnector` (and to observers, such as `EventLog`).
    public let reconnectEvents = StreamEventRelay()
    /// The longest line accepted, in bytes; a longer one disconnects with `.lineTooLong`.
    public let maximumLineLength: Int
    private let openSocket: TCPConnection.OpenSocket
    private let queue = DispatchQueue(label: "TCPLineStream")
    private let state: Locked<State>
    private let lineListeners = ObserverList<String>()

    /// Creates a disconnected stream; `connect()` starts it.
    ///
    /// - Parameters:
    ///   - host: a name or an IPv4/IPv6 literal, resolved with `getaddrinfo(3)` on every attempt.
    ///   - port: the TCP port.
    ///   - maximumLineLength: the longest line accepted, in bytes (64 KiB by default).
    ///   - openSocket: creates the socket for an address family (`AF_INET` or `AF_INET6`);
    ///     `socket(2)` by default. A test passes one that creates it inside a network
    ///     namespace: `{ family in try lab.local.run { socket(family, SOCK_STREAM, 0) } }`.
    public init(
        host: String,
        port: UInt16,
        maximumLineLength: Int = 65_536,
        openSocket: @escaping TCPConnection.OpenSocket = TCPConnection.defaultOpenSocket
    ) {
        destinationHost = host
        self.port = port
        self.maximumLineLength = maximumLineLength
        self.openSocket = openSocket
        state = Locked(State(framer: LineFramer(limit: maximumLineLength)))
    }

    /// How long `verifyConnection()` waits for `PONG` (2 s by default).
    public var pingTimeout: Duration {
        get { state.withLock { $0.pingTimeout } }
        set { state.withLock { $0.pingTimeout = newValue } }
    }

    /// Whether the stream is connected (and so ready).
    public var isConnected: Bool {
        state.withLock { if case .connected = $0.phase { true } else { false } }
    }

    // MARK: - The app's API

    /// Connects, as the app's own connect call; does nothing unless disconnected.
    public func connect() {
        startConnectAttempt()
    }

    /// Disconnects on purpose: reports `toldToDisconnect`, closes the socket, then reports
    /// `disconnected(error: nil)`. Also when already disconnected, so that a reconnect process
    /// in progress stops (the reconnector treats the pair as intentional).
    public func disconnect() {
        queue.async { [self] in
            reconnectEvents.send(.toldToDisconnect)
            let connection = state.withLock { state -> TCPConnection? in
                defer { resetConnection(&state) }
                return Self.connection(of: state.phase)
            }
            connection?.close()
            reconnectEvents.send(.disconnected(error: nil))
        }
    }

    /// Sends `line` followed by `\n` (a newline inside `line` makes it several lines).
    ///
    /// - Parameter line: the text.
    /// - Returns: whether the stream was connected; a line given while disconnected is dropped.
    @discardableResult
    public func send(_ line: String) -> Bool {
        guard isConnected else { return false }
        let bytes = Array((line + "\n").utf8)
        queue.async { [self] in
            guard case .connected(let connection, _) = state.withLock({ $0.phase }) else { return }
            connection.send(bytes)
        }
        return true
    }

    /// Calls `handler` with each line received (without its `\n` or `\r\n`), on the stream's
    /// queue, in order. `PONG` answers to `verifyConnection()` are delivered too.
    ///
    /// - Parameter handler: receives the lines.
    /// - Returns: a token whose `cancel()` removes the handler.
    public func onLine(_ handler: @escaping @Sendable (String) -> Void) -> ObservationToken {
        lineListeners.add(handler)
    }

    /// Every line received from now on, as an `AsyncStream` (unbounded buffer); ends when the
    /// consuming task is cancelled.
    ///
    /// - Returns: the lines.
    public func lines() -> AsyncStream<String> {
        lineListeners.stream()
    }

    // MARK: - ReconnectableStream

    /// Starts a connection attempt: `willConnect`, then `opened` and `ready`, or
    /// `disconnected` with the error. Does nothing unless disconnected.
    public func startConnectAttempt() {
        queue.async { [self] in
            let connection = state.withLock { state -> TCPConnection? in
                guard case .disconnected = state.phase else { return nil }
                state.nextID += 1
                let id = state.nextID
                let connection = TCPConnection(host: destinationHost, port: port, queue: queue, openSocket: openSocket) { [weak self] event in
                    self?.connectionEvent(event, id: id)
                }
                state.phase = .connecting(connection, id: id)
                return connection
            }
            guard let connection else { return }
            reconnectEvents.send(.willConnect)
            connection.start()
        }
    }

    /// Gives up a connect in progress: closes the socket and reports `disconnected` with
    /// `.aborted`. Does nothing when not connecting.
    public func abortConnectAttempt() {
        queue.async { [self] in
            let connection = state.withLock { state -> TCPConnection? in
                guard case .connecting(let connection, _) = state.phase else { return nil }
                resetConnection(&state)
                return connection
            }
            guard let connection else { return }
            connection.close()
            reconnectEvents.send(.disconnected(error: TCPLineStreamError.aborted))
        }
    }

    /// Sends `PING`; if no `PONG` line arrives within `pingTimeout`, closes the socket and
    /// reports `disconnected` with `.noPong`. Does nothing when not connected or while a
    /// `PING` is already unanswered.
    public func verifyConnection() {
        queue.async { [self] in
            let probe = state.withLock { state -> (TCPConnection, UInt64, UInt64, Duration)? in
                guard case .connected(let connection, let id) = state.phase, state.pendingPing == nil else { return nil }
                state.pingSequence += 1
                state.pendingPing = (id, state.pingSequence)
                return (connection, id, state.pingSequence, state.pingTimeout)
            }
            guard let (connection, id, sequence, timeout) = probe else { return }
            connection.send(Array("PING\n".utf8))
            queue.asyncAfter(deadline: .now() + timeout.dispatchInterval) { [weak self] in
                self?.pingDeadline(connection: id, sequence: sequence, timeout: timeout)
            }
        }
    }

    // MARK: - Connection events (on the queue)

    private func connectionEvent(_ event: TCPConnection.Event, id: UInt64) {
        switch event {
        case .connected:
            let current = state.withLock { state -> Bool in
                guard case .connecting(let connection, id) = state.phase else { return false }
                state.phase = .connected(connection, id: id)
                return true
            }
            guard current else { return }
            reconnectEvents.send(.opened)
            reconnectEvents.send(.ready)
        case .received(let bytes):
            received(bytes, id: id)
        case .closed(let error):
            let current = state.withLock { state -> Bool in
                guard Self.id(of: state.phase) == id else { return false }
                resetConnection(&state)
                return true
            }
            if current { reconnectEvents.send(.disconnected(error: TCPLineStreamError.connection(error))) }
        }
    }

    private func received(_ bytes: [UInt8], id: UInt64) {
        let outcome = state.withLock { state -> Result<[String], TCPLineStreamError>? in
            guard case .connected(_, id) = state.phase else { return nil }
            do {
                let lines = try state.framer.append(bytes)
                if lines.contains("PONG"), state.pendingPing?.connection == id { state.pendingPing = nil }
                return .success(lines)
            } catch {
                return .failure(.lineTooLong(limit: maximumLineLength))
            }
        }
        switch outcome {
        case .success(let lines)?:
            for line in lines { lineListeners.send(line) }
        case .failure(let error)?:
            fail(error, id: id)
        case nil:
            break
        }
    }

    private func pingDeadline(connection id: UInt64, sequence: UInt64, timeout: Duration) {
        let unanswered = state.withLock { $0.pendingPing.map { $0 == (id, sequence) } ?? false }
        if unanswered { fail(.noPong(timeout: timeout), id: id) }
    }

    /// Closes connection `id` if it is still the current one and reports the error.
    private func fail(_ error: TCPLineStreamError, id: UInt64) {
        let connection = state.withLock { state -> TCPConnection? in
            guard Self.id(of: state.phase) == id else { return nil }
            defer { resetConnection(&state) }
            return Self.connection(of: state.phase)
        }
        guard let connection else { return }
        connection.close()
        reconnectEvents.send(.disconnected(error: error))
    }

    private func resetConnection(_ state: inout State) {
        state.phase = .disconnected
        state.pendingPing = nil
        state.framer.reset()
    }

    private static func connection(of phase: Phase) -> TCPConnection? {
        switch phase {
        case .disconnected: return nil
        case .connecting(let connection, _), .connected(let connection, _): return connection
        }
    }

    private static func id(of phase: Phase) -> UInt64? {
        switch phase {
        case .disconnected: return nil
        case .connecting(_, let id), .connected(_, let id): return id
        }
    }
}
