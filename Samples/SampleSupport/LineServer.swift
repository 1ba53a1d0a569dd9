#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import SystemSupport
import LineStream

/// The peer of `TCPLineStream`: a TCP server of newline-delimited lines that answers `PING`
/// with `PONG` and echoes every other line. What the `line-server` sample runs, and what the
/// integration tests start, stop ("kill") and restart in-process.
///
/// Thread-safe. `start()` and `stop()` return once the sockets are open or closed; the work
/// and the `log` handler run on the server's private serial queue.
public final class LineServer: Sendable {
    private struct State {
        var listener: SocketHandle?
        var port: UInt16
        var clients: [UInt64: (connection: TCPConnection, framer: LineFramer)] = [:]
        var nextID: UInt64 = 0
        var accepted = 0
        var answersPing = true
    }

    /// The address listened on (a literal, or a name resolved with `getaddrinfo(3)`).
    public let host: String
    private let log: (@Sendable (String) -> Void)?
    private let openSocket: TCPConnection.OpenSocket
    private let queue = DispatchQueue(label: "LineServer")
    private let state: Locked<State>
    private static let maximumLineLength = 65_536

    /// Creates a stopped server.
    ///
    /// - Parameters:
    ///   - host: the address to listen on (loopback by default).
    ///   - port: the TCP port; 0 lets the kernel pick a free one (read it from `port`).
    ///   - openSocket: creates the listening socket for an address family (`socket(2)` by
    ///     default); a test passes one that creates it inside a network namespace.
    ///   - log: called with one line per connection opened or closed (none by default).
    public init(
        host: String = "127.0.0.1",
        port: UInt16 = 0,
        openSocket: @escaping TCPConnection.OpenSocket = TCPConnection.defaultOpenSocket,
        log: (@Sendable (String) -> Void)? = nil
    ) {
        self.host = host
        self.openSocket = openSocket
        self.log = log
        state = Locked(State(port: port))
    }

    deinit {
        // The client connections close themselves when released with the state.
        state.withLock { $0.listener }?.close()
    }

    /// The port listened on once started (the kernel's choice when 0 was asked for), or the
    /// port asked for before.
    public var port: UInt16 { state.withLock { $0.port } }

    /// Whether `PING` lines get `PONG` (default true). When false they get no answer at all,
    /// like a server that hangs: what `verifyConnection()` must detect.
    public var answersPing: Bool {
        get { state.withLock { $0.answersPing } }
        set { state.withLock { $0.answersPing = newValue } }
    }

    /// Clients connected now.
    public var connectionCount: Int { state.withLock { $0.clients.count } }

    /// Clients accepted since creation, across restarts.
    public var acceptedCount: Int { state.withLock { $0.accepted } }

    /// Binds (with `SO_REUSEADDR`, so a restart reuses the port at once) and listens.
    ///
    /// - Throws: `TCPConnectionError.resolutionFailed` for a bad host; `.openSocketFailed` when
    ///   the hook throws; `TCPConnectionError.system` with the errno of `socket`, `bind` (`EADDRINUSE`) or `listen`.
    public func start() throws(TCPConnectionError) {
        let result: Result<Void, TCPConnectionError> = queue.sync {
            do throws(TCPConnectionError) {
                try listen()
                return .success(())
            } catch {
                return .failure(error)
            }
        }
        try result.get()
    }

    /// Closes the listening socket and every client connection at once, as a killed server
    /// would (the clients read end of file), and returns once the port is free: `start()` may
    /// be called again. Do not call it from the `log` handler.
    public func stop() {
        let listener = queue.sync {
            let (listener, clients) = state.withLock { state in
                defer {
                    state.listener = nil
                    state.clients = [:]
                }
                return (state.listener, Array(state.clients.values))
            }
            listener?.close()
            for client in clients { client.connection.close() }
            if listener != nil { log?("stopped") }
            return listener
        }
        // The descriptor closes when the read source's cancel handler has run on the queue.
        listener?.waitUntilClosed()
    }

    // MARK: - On the queue

    private func listen() throws(TCPConnectionError) {
        guard state.withLock({ $0.listener == nil }) else { return }
        let address = try SocketAddress.resolve(host: host, port: port, passive: true)[0]
        let fd: Int32
        do {
            fd = try openSocket(address.family)
        } catch {
            throw .openSocketFailed("\(error)")
        }
        guard fd >= 0 else { throw .system(operation: "socket", errno: errno) }
        let handle = SocketHandle(fd: fd)
        do throws(TCPConnectionError) {
            try Syscall.setReuseAddress(fd)
            try handle.makeNonBlocking()
            guard address.withSockaddr({ bind(fd, $0, $1) }) == 0 else { throw .system(operation: "bind \(address)", errno: errno) }
            try Syscall.listen(fd, backlog: 128)
        } catch {
            handle.close()
            throw error
        }
        let bound = SocketAddress.local(of: fd)?.port ?? port
        state.withLock { state in
            state.listener = handle
            state.port = bound
        }
        handle.startReading(on: queue) { [weak self] in self?.acceptClients(handle) }
        log?("listening on \(host):\(bound)")
    }

    private func acceptClients(_ listener: SocketHandle) {
        while state.withLock({ $0.listener === listener }) {
            var storage = sockaddr_storage()
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let fd = withUnsafeMutablePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept(listener.fd, $0, &length)  // start() makes it non-blocking and close-on-exec
                }
            }
            guard fd >= 0 else {
                // EAGAIN: drained. Anything else (ECONNABORTED, EMFILE): try again on the next event.
                return
            }
            let peer = withUnsafePointer(to: &storage) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { SocketAddress($0, length: length) }
            }
            guard let peer else {
                Syscall.close(fd)
                continue
            }
            let id = state.withLock { state -> UInt64 in
                state.nextID += 1
                state.accepted += 1
                return state.nextID
            }
            let connection = TCPConnection(accepted: fd, peer: peer, queue: queue) { [weak self] event in
                self?.clientEvent(event, id: id)
            }
            state.withLock { $0.clients[id] = (connection, LineFramer(limit: Self.maximumLineLength)) }
            log?("connection from \(peer)")
            connection.start()
        }
    }

    private func clientEvent(_ event: TCPConnection.Event, id: UInt64) {
        switch event {
        case .connected:
            break
        case .received(let bytes):
            let outcome = state.withLock { state -> (TCPConnection, [String]?, Bool)? in
                guard var client = state.clients[id] else { return nil }
                defer { state.clients[id] = client }
                return (client.connection, try? client.framer.append(bytes), state.answersPing)
            }
            guard let (connection, lines, answersPing) = outcome else { return }
            guard let lines else {
                log?("closing \(connection.host): line too long")
                dropClient(id)
                return
            }
            var reply: [UInt8] = []
            for line in lines {
                if line == "PING" {
                    if answersPing { reply += Array("PONG\n".utf8) }
                } else {
                    reply += Array((line + "\n").utf8)
                }
            }
            connection.send(reply)
        case .closed(let error):
            let client = state.withLock { $0.clients.removeValue(forKey: id) }
            if let client { log?("closed \(client.connection.host): \(error)") }
        }
    }

    private func dropClient(_ id: UInt64) {
        state.withLock { $0.clients.removeValue(forKey: id) }?.connection.close()
    }
}
