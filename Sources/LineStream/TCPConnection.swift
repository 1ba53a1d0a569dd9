#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import SystemSupport

/// One TCP connection over POSIX sockets, driven by Dispatch sources: the socket layer that
/// `TCPLineStream` and `XMPPClientStream` share. Single use: `start()` it once; after it
/// closes, make a new one.
///
/// The host is resolved with `getaddrinfo(3)` off the queue, then each address is tried in
/// turn with a non-blocking `connect(2)` whose completion a write source reports
/// (`SO_ERROR`). Reads come from a read source; writes that would block wait in an outbox
/// for a write source, up to `maximumOutboxBytes`: past it the peer is not reading, and the
/// connection closes with `sendBufferFull` instead of buffering without end. Every path closes
/// the descriptor, and `send(2)` never raises `SIGPIPE` (`MSG_NOSIGNAL`).
///
/// Threading: call every method on `queue`; `handler` runs there too, never from inside a
/// method call (a failure found while sending is reported asynchronously), so the owner may
/// call `send(_:)` and `close()` from its handler.
public final class TCPConnection: Sendable {
    /// What happens to the connection, in order: `connected` once, then any number of
    /// `received`, then `closed` at most once. Nothing is reported after `close()`.
    public enum Event: Sendable {
        /// The TCP handshake completed. `peer` is the address, "127.0.0.1:5222".
        case connected(peer: String)
        /// Bytes arrived, as read (not split at any boundary).
        case received([UInt8])
        /// The connection failed or ended; the descriptor is closed.
        case closed(TCPConnectionError)
    }

    /// Creates the socket for an address family (`AF_INET` or `AF_INET6`), returning the
    /// descriptor; a negative result means `errno` says why.
    public typealias OpenSocket = @Sendable (_ family: Int32) throws -> Int32

    /// `socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0)` in the calling thread's network namespace.
    public static let defaultOpenSocket: OpenSocket = { family in
        socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    }

    private enum Phase {
        case idle
        case accepted(SocketHandle)
        case resolving
        case connecting(SocketHandle, remaining: [SocketAddress])
        case connected(SocketHandle)
        case closed
    }

    private struct State {
        var phase = Phase.idle
        var peer: String?
        var outbox: [UInt8] = []
        var sent = 0
        var writeArmed = false
    }

    /// The host given at creation.
    public let host: String
    /// The TCP port given at creation.
    public let port: UInt16
    /// Where the connection's work and `handler` run.
    public let queue: DispatchQueue
    /// Most bytes waiting to be sent; more closes the connection with `sendBufferFull`.
    public let maximumOutboxBytes: Int
    /// The default bound on unsent bytes: 4 MiB.
    public static let defaultMaximumOutboxBytes = 4 << 20
    private let openSocket: OpenSocket
    private let handler: @Sendable (Event) -> Void
    private let state = Locked(State())

    /// Creates a connection to `host`:`port`; nothing happens until `start()`.
    ///
    /// - Parameters:
    ///   - host: a name or an IPv4/IPv6 literal (brackets allowed), resolved by `getaddrinfo(3)`.
    ///   - port: the TCP port.
    ///   - queue: a serial queue for the work and the handler.
    ///   - openSocket: creates the socket (default `socket(2)`); a test passes one that
    ///     creates it inside a network namespace.
    ///   - maximumOutboxBytes: most unsent bytes kept (4 MiB by default).
    ///   - handler: receives the connection's events on `queue`.
    public init(
        host: String,
        port: UInt16,
        queue: DispatchQueue,
        openSocket: @escaping OpenSocket = TCPConnection.defaultOpenSocket,
        maximumOutboxBytes: Int = TCPConnection.defaultMaximumOutboxBytes,
        handler: @escaping @Sendable (Event) -> Void
    ) {
        self.host = host
        self.port = port
        self.queue = queue
        self.maximumOutboxBytes = maximumOutboxBytes
        self.openSocket = openSocket
        self.handler = handler
    }

    deinit {
        // Dropped without close(): the Dispatch sources hold the socket, not this object.
        Self.handle(of: state.withLock { $0.phase })?.close()
    }

    /// Wraps a socket returned by `accept(2)`; `start()` begins reading. Reports no `connected`.
    package init(accepted fd: Int32, peer: SocketAddress, queue: DispatchQueue, handler: @escaping @Sendable (Event) -> Void) {
        host = peer.description
        port = peer.port
        self.queue = queue
        maximumOutboxBytes = Self.defaultMaximumOutboxBytes
        openSocket = TCPConnection.defaultOpenSocket
        self.handler = handler
        let handle = SocketHandle(fd: fd)
        state.withLock { state in
            state.phase = .accepted(handle)
            state.peer = peer.description
        }
    }

    /// Starts resolving and connecting (or, for an accepted socket, reading). Call once.
    public func start() {
        dispatchPrecondition(condition: .onQueue(queue))
        let next = state.withLock { state -> Phase in
            let current = state.phase
            switch current {
            case .idle: state.phase = .resolving
            case .accepted(let handle): state.phase = .connected(handle)
            default: break
            }
            return current
        }
        switch next {
        case .idle:
            let (host, port, queue) = (host, port, queue)
            DispatchQueue.global().async { [weak self] in
                // getaddrinfo blocks (DNS): off the connection's queue.
                let result: Result<[SocketAddress], TCPConnectionError>
                do throws(TCPConnectionError) {
                    result = .success(try SocketAddress.resolve(host: host, port: port))
                } catch {
                    result = .failure(error)
                }
                // `[self]` copies the weak reference, which is a `var`, into the inner closure.
                queue.async { [self] in self?.resolved(result) }
            }
        case .accepted(let handle):
            do {
                try handle.makeNonBlocking()
                handle.startReading(on: queue) { [weak self] in self?.readable(handle) }
            } catch {
                fail(error, ifCurrent: handle, now: false)
            }
        default:
            break
        }
    }

    /// Queues bytes for sending; they go out in order once connected. Ignored after the
    /// connection closed. A send failure, or more than `maximumOutboxBytes` unsent, is
    /// reported as `closed`, asynchronously.
    ///
    /// - Parameter bytes: what to send.
    public func send(_ bytes: [UInt8]) {
        dispatchPrecondition(condition: .onQueue(queue))
        guard !bytes.isEmpty else { return }
        var overflow: SocketHandle??
        let handle = state.withLock { state -> SocketHandle? in
            if case .closed = state.phase { return nil }
            guard state.outbox.count - state.sent + bytes.count <= maximumOutboxBytes else {
                overflow = .some(Self.handle(of: state.phase))
                return nil
            }
            switch state.phase {
            case .closed: return nil
            case .connected(let handle):
                state.outbox += bytes
                return state.writeArmed ? nil : handle
            default:
                state.outbox += bytes
                return nil
            }
        }
        if let overflow {
            fail(.sendBufferFull(limit: maximumOutboxBytes), ifCurrent: overflow, now: false)
            return
        }
        if let handle { flush(handle, now: false) }
    }

    /// Closes the connection at once (bytes still in the outbox are dropped) and reports
    /// nothing more. Idempotent.
    public func close() {
        dispatchPrecondition(condition: .onQueue(queue))
        let handle = state.withLock { state -> SocketHandle? in
            defer {
                state.phase = .closed
                state.outbox = []
            }
            return Self.handle(of: state.phase)
        }
        handle?.close()
    }

    /// The peer's address once connected ("127.0.0.1:5222"), `nil` before.
    public var peer: String? { state.withLock { $0.peer } }

    /// Whether the TCP connection is established and not closed.
    public var isConnected: Bool {
        state.withLock { if case .connected = $0.phase { true } else { false } }
    }

    // MARK: - Connecting

    private func resolved(_ result: Result<[SocketAddress], TCPConnectionError>) {
        guard state.withLock({ if case .resolving = $0.phase { true } else { false } }) else { return }
        switch result {
        case .success(let addresses): tryConnecting(addresses, lastError: nil)
        case .failure(let error): fail(error, ifCurrent: nil, now: true)
        }
    }

    /// Tries the first address; on failure the next, keeping the last error.
    private func tryConnecting(_ addresses: [SocketAddress], lastError: TCPConnectionError?) {
        guard let address = addresses.first else {
            fail(lastError ?? .resolutionFailed(host: host, code: 0, message: "no address"), ifCurrent: nil, now: true)
            return
        }
        let remaining = Array(addresses.dropFirst())
        let fd: Int32
        do {
            fd = try openSocket(address.family)
        } catch {
            tryConnecting(remaining, lastError: .openSocketFailed("\(error)"))
            return
        }
        guard fd >= 0 else {
            tryConnecting(remaining, lastError: .system(operation: "socket", errno: errno))
            return
        }
        let handle = SocketHandle(fd: fd)
        do {
            try handle.makeNonBlocking()
        } catch {
            handle.close()
            tryConnecting(remaining, lastError: error)
            return
        }
        let result = address.withSockaddr { connect(fd, $0, $1) }
        let code = result == 0 ? 0 : errno
        switch code {
        case 0:
            established(handle, peer: address)
        case EINPROGRESS, EINTR:
            // Non-blocking connect in progress: the socket turns writable when it ends.
            let stillWanted = state.withLock { state -> Bool in
                guard case .resolving = state.phase else { return false }
                state.phase = .connecting(handle, remaining: remaining)
                state.peer = address.description
                return true
            }
            guard stillWanted else {
                handle.close()
                return
            }
            handle.startWriting(on: queue) { [weak self] in self?.connectFinished(handle, address: address) }
        default:
            handle.close()
            tryConnecting(remaining, lastError: .system(operation: "connect to \(address)", errno: code))
        }
    }

    private func connectFinished(_ handle: SocketHandle, address: SocketAddress) {
        let remaining = state.withLock { state -> [SocketAddress]? in
            guard case .connecting(let current, let remaining) = state.phase, current === handle else { return nil }
            state.phase = .resolving
            return remaining
        }
        guard let remaining else { return }
        handle.stopWriting()
        let code = Syscall.pendingError(handle.fd)
        if code == 0 {
            established(handle, peer: address)
        } else {
            handle.close()
            tryConnecting(remaining, lastError: .system(operation: "connect to \(address)", errno: code))
        }
    }

    private func established(_ handle: SocketHandle, peer: SocketAddress) {
        let current = state.withLock { state -> Bool in
            guard case .resolving = state.phase else { return false }
            state.phase = .connected(handle)
            state.peer = peer.description
            return true
        }
        guard current else {
            handle.close()
            return
        }
        handle.startReading(on: queue) { [weak self] in self?.readable(handle) }
        flush(handle, now: false)
        handler(.connected(peer: peer.description))
    }

    // MARK: - Reading and writing

    private func readable(_ handle: SocketHandle) {
        guard isCurrent(handle) else { return }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65_536, alignment: 1)
        defer { buffer.deallocate() }
        do {
            switch try Syscall.read(handle.fd, into: buffer) {
            case .wouldBlock:
                return
            case .done(0):
                fail(.closedByPeer, ifCurrent: handle, now: true)
            case .done(let count):
                handler(.received(Array(buffer[..<count])))
            }
        } catch {
            fail(error, ifCurrent: handle, now: true)
        }
    }

    private func flush(_ handle: SocketHandle, now: Bool) {
        let outcome = state.withLock { state -> (error: TCPConnectionError?, arm: Bool, disarm: Bool) in
            guard case .connected(let current) = state.phase, current === handle else { return (nil, false, false) }
            while state.sent < state.outbox.count {
                let sent = state.sent
                let result = state.outbox.withUnsafeBytes { bytes in
                    Result { () throws(TCPConnectionError) in
                        try Syscall.send(handle.fd, UnsafeRawBufferPointer(rebasing: bytes[sent...]))
                    }
                }
                let progress: Syscall.Progress
                switch result {
                case .success(let value): progress = value
                case .failure(let error): return (error, false, false)
                }
                switch progress {
                case .done(let count):
                    state.sent += count
                case .wouldBlock:
                    defer { state.writeArmed = true }
                    return (nil, !state.writeArmed, false)
                }
            }
            state.outbox = []
            state.sent = 0
            defer { state.writeArmed = false }
            return (nil, false, state.writeArmed)
        }
        if let error = outcome.error {
            fail(error, ifCurrent: handle, now: now)
        } else if outcome.arm {
            handle.startWriting(on: queue) { [weak self] in self?.flush(handle, now: true) }
        } else if outcome.disarm {
            handle.stopWriting()
        }
    }

    // MARK: - Closing

    /// Closes and reports `closed(error)` if `handle` is still the connection's socket (any
    /// socket when `nil`); `now: false` reports from a fresh queue turn.
    private func fail(_ error: TCPConnectionError, ifCurrent handle: SocketHandle?, now: Bool) {
        guard now else {
            queue.async { [weak self] in self?.fail(error, ifCurrent: handle, now: true) }
            return
        }
        let (current, socket) = state.withLock { state -> (Bool, SocketHandle?) in
            if case .closed = state.phase { return (false, nil) }
            let socket = Self.handle(of: state.phase)
            if let handle, socket !== handle { return (false, nil) }
            state.phase = .closed
            state.outbox = []
            return (true, socket)
        }
        guard current else { return }
        socket?.close()
        handler(.closed(error))
    }

    private func isCurrent(_ handle: SocketHandle) -> Bool {
        state.withLock { Self.handle(of: $0.phase) === handle }
    }

    private static func handle(of phase: Phase) -> SocketHandle? {
        switch phase {
        case .accepted(let handle), .connecting(let handle, _), .connected(let handle): return handle
        case .idle, .resolving, .closed: return nil
        }
    }
}
