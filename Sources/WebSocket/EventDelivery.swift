import SystemSupport

/// Hands a connection's events, in order, to its handler and/or its `AsyncStream`.
///
/// Events that arrive before any consumer is attached are kept and given to the first one
/// attached, so a server's accept handler or a client's caller can attach after `connect`
/// returned without losing `.open`. A handler never runs twice at once: whichever thread
/// finds it idle drains the queue (the service thread, or the thread that sets the handler).
/// After the terminal event the handler and the continuation are dropped, which breaks any
/// reference cycle through a handler that captured its connection.
final class EventDelivery: Sendable {
    typealias Handler = @Sendable (WebSocketEvent) -> Void

    private struct State {
        var buffered: [WebSocketEvent] = []
        var handler: Handler?
        var handlerQueue: [WebSocketEvent] = []
        var handlerRunning = false
        var stream: AsyncStream<WebSocketEvent>?
        var continuation: AsyncStream<WebSocketEvent>.Continuation?
        var finished = false
    }

    private let state = Locked(State())

    /// Delivers one event; `terminal` marks the last one (`closed` or `failed`). Events after
    /// the terminal one are dropped.
    func deliver(_ event: WebSocketEvent, terminal: Bool) {
        let drain = state.withLock { state in
            guard !state.finished else { return false }
            state.finished = terminal
            if state.handler == nil && state.continuation == nil {
                state.buffered.append(event)
                return false
            }
            if let continuation = state.continuation {
                // Yielding under the lock keeps the stream in service-thread order.
                continuation.yield(event)
                if terminal {
                    continuation.finish()
                    state.continuation = nil
                }
            }
            guard state.handler != nil else { return false }
            state.handlerQueue.append(event)
            guard !state.handlerRunning else { return false }
            state.handlerRunning = true
            return true
        }
        if drain { drainHandlerQueue() }
    }

    /// Whether the terminal event was delivered.
    var isFinished: Bool { state.withLock { $0.finished } }

    /// Sets the handler; events kept so far go to it first unless a stream took them.
    func setHandler(_ handler: @escaping Handler) {
        let drain = state.withLock { state in
            state.handler = handler
            state.handlerQueue.append(contentsOf: state.buffered)
            state.buffered.removeAll()
            guard !state.handlerRunning else { return false }
            guard !state.handlerQueue.isEmpty else {
                if state.finished { state.handler = nil }
                return false
            }
            state.handlerRunning = true
            return true
        }
        if drain { drainHandlerQueue() }
    }

    /// The event stream; the first call creates it and gives it the events kept so far.
    var stream: AsyncStream<WebSocketEvent> {
        state.withLock { state in
            if let stream = state.stream { return stream }
            let (stream, continuation) = AsyncStream.makeStream(of: WebSocketEvent.self, bufferingPolicy: .unbounded)
            state.stream = stream
            for event in state.buffered { continuation.yield(event) }
            state.buffered.removeAll()
            if state.finished {
                continuation.finish()
            } else {
                state.continuation = continuation
            }
            return stream
        }
    }

    private func drainHandlerQueue() {
        while true {
            let work: ([WebSocketEvent], Handler)? = state.withLock { state in
                guard let handler = state.handler, !state.handlerQueue.isEmpty else {
                    state.handlerRunning = false
                    if state.finished { state.handler = nil }
                    return nil
                }
                let batch = state.handlerQueue
                state.handlerQueue.removeAll()
                return (batch, handler)
            }
            guard let (batch, handler) = work else { return }
            for event in batch { handler(event) }
        }
    }
}
