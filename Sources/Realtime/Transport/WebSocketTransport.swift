import SystemSupport
import RealtimeProtocol
import WebSocket

/// The production `RealtimeTransport`: WebSocket on libwebsockets, one service thread per
/// transport, created on the first `open` (so a client that never connects starts no thread).
public final class WebSocketTransport: RealtimeTransport {
    private let contextOptions: WebSocketContext.Options
    private let context = Locked<WebSocketContext?>(nil)

    /// Creates a transport.
    ///
    /// - Parameter options: libwebsockets context options (extra CA file, message size limit,
    ///   connect timeout).
    public init(options: WebSocketContext.Options = WebSocketContext.Options()) {
        contextOptions = options
    }

    deinit { context.withLock { $0 }?.shutdown() }

    /// Starts the service thread now instead of on the first `open`. Its sockets live in the
    /// network namespace of the thread that starts it (Linux threads inherit their creator's
    /// namespaces), so call it from inside a namespace (`NetworkLab`'s `run`) to connect from
    /// there.
    ///
    /// - Throws: `WebSocketError.contextCreationFailed` when libwebsockets cannot start.
    public func start() throws(WebSocketError) {
        _ = try makeContext()
    }

    /// The shared context, created on first use. The context (and its service thread) is made
    /// outside the lock; of two threads racing here, one context is kept and the other shut down.
    private func makeContext() throws(WebSocketError) -> WebSocketContext {
        if let existing = context.withLock({ $0 }) { return existing }
        let created = try WebSocketContext(options: contextOptions)
        let (kept, installed) = context.withLock { context -> (WebSocketContext, Bool) in
            if let context { return (context, false) }
            context = created
            return (created, true)
        }
        if !installed { created.shutdown() }
        return kept
    }

    /// Opens a WebSocket to `url`.
    ///
    /// - Throws: `WebSocketError.contextCreationFailed` when libwebsockets cannot start,
    ///   `.invalidURL` for a URL that is not `ws://` or `wss://`.
    public func open(url: String, onEvent: @escaping @Sendable (RealtimeTransportEvent) -> Void) throws -> any RealtimeSocket {
        let context = try makeContext()
        let connection = try context.connect(url: url) { event in
            switch event {
            case .open: onEvent(.open)
            case .text(let text): onEvent(.text(text))
            case .binary(let bytes): onEvent(.binary(bytes.count))
            case .pong: break
            case .closed(let code, let reason): onEvent(.closed(code: code.rawValue, reason: reason))
            case .failed(let error): onEvent(.failed("\(error)"))
            }
        }
        return WebSocketSocket(connection)
    }

    /// Defers `work` to the end of the service thread's current pass (`WebSocketContext.afterServicePass`).
    ///
    /// - Returns: false unless called on the service thread (inside `onEvent`).
    public func afterCurrentEvents(_ work: @escaping @Sendable () -> Void) -> Bool {
        context.withLock { $0 }?.afterServicePass(work) ?? false
    }

    /// Closes every socket and stops the service thread; later `open` calls start a new one.
    public func shutdown() {
        context.withLock { context in
            defer { context = nil }
            return context
        }?.shutdown()
    }
}

/// A `RealtimeSocket` over one `WebSocketConnection`.
final class WebSocketSocket: RealtimeSocket {
    let connection: WebSocketConnection

    init(_ connection: WebSocketConnection) { self.connection = connection }

    func send(text: String) -> Bool {
        do {
            try connection.send(text: text)
            return true
        } catch {
            return false
        }
    }

    func close(code: UInt16, reason: String) {
        // A socket that is already closing refuses a second close; nothing is lost.
        try? connection.close(code: WebSocketCloseCode(rawValue: code), reason: String(reason.utf8.prefix(123)) ?? "")
    }

    func abort() { connection.abort() }

    func setReceiving(_ enabled: Bool) { connection.setReceiving(enabled) }
}
