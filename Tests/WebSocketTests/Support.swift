import Dispatch
import Foundation
import SystemSupport
import Testing
import WebSocket

/// Bound for every wait on a real event: generous, so a loaded CI machine does not flake; a
/// test that passes never waits for it.
let eventTimeout: Duration = .seconds(15)

/// Records a connection's events and lets a test wait, with a bound, until they satisfy a
/// condition. The timeout task only bounds the wait; no test logic depends on time.
final class EventLog: Sendable {
    private struct Waiter {
        var predicate: @Sendable ([WebSocketEvent]) -> Bool
        var continuation: CheckedContinuation<[WebSocketEvent]?, Never>
        var timeout: Task<Void, Never>?
    }

    private struct State {
        var events: [WebSocketEvent] = []
        var waiters: [Int: Waiter] = [:]
        var nextWaiter = 0
    }

    private let state = Locked(State())

    /// Starts recording `connection`'s events through its handler.
    init(_ connection: WebSocketConnection) {
        connection.setEventHandler { [self] event in record(event) }
    }

    /// Records through a handler the caller installs (for `connect(onEvent:)`).
    init() {}

    func record(_ event: WebSocketEvent) {
        let ready: [(CheckedContinuation<[WebSocketEvent]?, Never>, [WebSocketEvent], Task<Void, Never>?)] = state.withLock { state in
            state.events.append(event)
            let events = state.events
            var ready: [(CheckedContinuation<[WebSocketEvent]?, Never>, [WebSocketEvent], Task<Void, Never>?)] = []
            for (id, waiter) in state.waiters where waiter.predicate(events) {
                ready.append((waiter.continuation, events, waiter.timeout))
                state.waiters[id] = nil
            }
            return ready
        }
        for (continuation, events, timeout) in ready {
            timeout?.cancel()
            continuation.resume(returning: events)
        }
    }

    /// Every event so far.
    var events: [WebSocketEvent] { state.withLock { $0.events } }

    /// Waits until `predicate` holds for the events so far.
    ///
    /// - Returns: the events at that moment, or nil after `timeout`.
    func wait(timeout: Duration = eventTimeout, until predicate: @escaping @Sendable ([WebSocketEvent]) -> Bool) async -> [WebSocketEvent]? {
        await withCheckedContinuation { continuation in
            let id: Int? = state.withLock { state in
                if predicate(state.events) { return nil }
                let id = state.nextWaiter
                state.nextWaiter += 1
                state.waiters[id] = Waiter(predicate: predicate, continuation: continuation, timeout: nil)
                return id
            }
            guard let id else {
                continuation.resume(returning: events)
                return
            }
            let timer = Task { [self] in
                try? await Task.sleep(for: timeout)
                expire(id)
            }
            let stillWaiting = state.withLock { state in
                guard state.waiters[id] != nil else { return false }
                state.waiters[id]?.timeout = timer
                return true
            }
            if !stillWaiting { timer.cancel() }
        }
    }

    private func expire(_ id: Int) {
        let waiter = state.withLock { $0.waiters.removeValue(forKey: id) }
        waiter?.continuation.resume(returning: nil)
    }

    /// Waits for the terminal event (`closed` or `failed`).
    func terminal(timeout: Duration = eventTimeout) async -> WebSocketEvent? {
        await wait(timeout: timeout) { $0.contains(where: \.isTerminal) }?.first(where: \.isTerminal)
    }

    /// Waits until `count` events match `matching`.
    func wait(for count: Int = 1, timeout: Duration = eventTimeout, _ matching: @escaping @Sendable (WebSocketEvent) -> Bool) async -> [WebSocketEvent]? {
        await wait(timeout: timeout) { $0.filter(matching).count >= count }?.filter(matching)
    }

    /// Waits for `.open`.
    func opened(timeout: Duration = eventTimeout) async -> Bool {
        await wait(timeout: timeout) { $0.contains(.open) || $0.contains(where: \.isTerminal) }?.contains(.open) ?? false
    }
}

extension WebSocketEvent {
    var isTerminal: Bool {
        switch self {
        case .closed, .failed: return true
        default: return false
        }
    }

    var text: String? {
        if case .text(let text) = self { return text }
        return nil
    }
}

/// A listener whose accepted connections are kept, each with an event log, and optionally
/// echo what they receive.
final class ServerFixture: Sendable {
    let context: WebSocketContext
    let server: WebSocketServer
    private let accepted = Locked<[(connection: WebSocketConnection, log: EventLog)]>([])
    private let acceptedLog = EventLog()

    /// - Parameters:
    ///   - context: where to listen; a new one with `options` when nil.
    ///   - echo: send every text and binary message back.
    init(
        context: WebSocketContext? = nil,
        options: WebSocketContext.Options = .init(),
        tls: WebSocketServer.TLSConfiguration? = nil,
        echo: Bool = true,
        customHeaderNames: [String] = [],
        acceptsDeflate: (@Sendable (HTTPServerRequest) -> Bool)? = nil,
        onRequest: (@Sendable (HTTPServerRequest) async -> HTTPServerResponse)? = nil
    ) throws {
        let context = try context ?? WebSocketContext(options: options)
        self.context = context
        let accepted = accepted
        let acceptedLog = acceptedLog
        server = try context.listen(tls: tls, customHeaderNames: customHeaderNames, acceptsDeflate: acceptsDeflate, onConnection: { connection in
            let log = EventLog()
            connection.setEventHandler { event in
                log.record(event)
                guard echo else { return }
                switch event {
                case .text(let text): try? connection.send(text: text)
                case .binary(let bytes): try? connection.send(binary: bytes)
                default: break
                }
            }
            accepted.withLock { $0.append((connection, log)) }
            acceptedLog.record(.open)
        }, onRequest: onRequest)
    }

    /// Waits for the `index`-th accepted connection (0-based).
    func connection(_ index: Int = 0) async -> (connection: WebSocketConnection, log: EventLog)? {
        guard await acceptedLog.wait(for: index + 1, { $0 == .open }) != nil else { return nil }
        return accepted.withLock { $0[index] }
    }

    var acceptedCount: Int { accepted.withLock { $0.count } }
}

/// A connection a test made, with its log.
struct Client {
    let connection: WebSocketConnection
    let log: EventLog

    init(_ context: WebSocketContext, url: String, headers: [HTTPHeader] = []) throws {
        let log = EventLog()
        connection = try context.connect(url: url, headers: headers) { event in log.record(event) }
        self.log = log
    }
}

/// Runs blocking work (sockets, processes) off the cooperative pool, which has one thread per
/// core (two on CI machines) and also runs the HTTP handler tasks.
func offPool<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread {
            continuation.resume(with: Result { try work() })
        }
    }
}

/// A TCP port on 127.0.0.1 that nothing listens on: bound, then closed.
func closedPort() throws -> Int {
    let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(socket) }
    var address = RawTCP.loopback(port: 0)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddr in
            bind(socket, sockaddr, length) == 0 && getsockname(socket, sockaddr, &length) == 0
        }
    }
    guard socket >= 0, bound else { throw RawTCP.Failure(description: "bind: errno \(errno)") }
    return Int(UInt16(bigEndian: address.sin_port))
}
