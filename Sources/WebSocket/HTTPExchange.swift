import SystemSupport

/// One plain HTTP request on a listener and its response, from LWS_CALLBACK_HTTP to the
/// last body write.
///
/// The request is read on the service thread; the response may come from any thread (the
/// request handler runs in a task), so the state sits behind a lock. Every response closes its
/// connection (no keep-alive: see `ServiceLoop.httpRequest`).
final class HTTPExchange: Sendable {
    /// The one write to perform in an HTTP_WRITEABLE callback.
    enum Write: Hashable, Sendable {
        case none
        /// The status line and headers (`lws_finalize_write_http_header`).
        case headers(HTTPServerResponse, bodyFollows: Bool)
        /// Body bytes; `final` is the last write of the response (`LWS_WRITE_HTTP_FINAL`).
        case body(ArraySlice<UInt8>, final: Bool)
    }

    private enum Phase {
        case readingBody
        case awaitingResponse
        case responding(HTTPServerResponse, headersSent: Bool, offset: Int)
        case done
    }

    private struct State {
        var request: HTTPServerRequest
        var phase = Phase.awaitingResponse
    }

    let id: UInt
    private let thread: ServiceThread
    private let state: Locked<State>

    init(id: UInt, request: HTTPServerRequest, thread: ServiceThread) {
        self.id = id
        self.thread = thread
        state = Locked(State(request: request))
    }

    var request: HTTPServerRequest { state.withLock { $0.request } }

    /// The request has a body to read (HTTP_BODY callbacks follow).
    func expectBody() { state.withLock { $0.phase = .readingBody } }

    /// Appends body bytes.
    ///
    /// - Returns: false when the body would exceed `limit` bytes (the bytes are dropped).
    func appendBody(_ bytes: UnsafeRawBufferPointer, limit: Int) -> Bool {
        state.withLock { state in
            guard case .readingBody = state.phase else { return true }
            guard state.request.body.count + bytes.count <= limit else { return false }
            state.request.body.append(contentsOf: bytes)
            return true
        }
    }

    /// The body is complete (HTTP_BODY_COMPLETION).
    ///
    /// - Returns: the request with its body, or nil when a response was already chosen.
    func bodyComplete() -> HTTPServerRequest? {
        state.withLock { state in
            guard case .readingBody = state.phase else { return nil }
            state.phase = .awaitingResponse
            return state.request
        }
    }

    /// Sets the response, from any thread, and asks the service thread to write it.
    ///
    /// - Parameter response: the response; the first one set wins.
    func respond(_ response: HTTPServerResponse) {
        let accepted = state.withLock { state in
            switch state.phase {
            case .readingBody, .awaitingResponse:
                state.phase = .responding(response, headersSent: false, offset: 0)
                return true
            case .responding, .done:
                return false
            }
        }
        if accepted { thread.enqueue(.respond(id, self)) }
    }

    /// Takes the next write, with body pieces of at most `maxChunk` bytes. A HEAD request gets
    /// the headers only (RFC 9110 §9.3.2).
    func nextWrite(maxChunk: Int) -> Write {
        state.withLock { state in
            guard case .responding(let response, let headersSent, let offset) = state.phase else {
                return .none
            }
            let body = state.request.method == "HEAD" ? [] : response.body
            if !headersSent {
                if body.isEmpty {
                    state.phase = .done
                } else {
                    state.phase = .responding(response, headersSent: true, offset: 0)
                }
                return .headers(response, bodyFollows: !body.isEmpty)
            }
            let end = min(offset + maxChunk, body.count)
            let final = end == body.count
            state.phase = final ? .done : .responding(response, headersSent: true, offset: end)
            return .body(body[offset..<end], final: final)
        }
    }
}
