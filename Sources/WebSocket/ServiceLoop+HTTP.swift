import CWebSockets

extension ServiceLoop {
    /// A plain HTTP request's headers arrived (`LWS_CALLBACK_HTTP`). Every answer closes the
    /// connection (`Connection: close`): lws 4.1.6 spun at 100 % CPU on a keep-alive
    /// connection whose next request (a POST with a body) arrived in the same segment as the
    /// first, stopping every other client (pipelining, RFC 9112 §9.3.2). A client opens a
    /// connection per request instead, which the HTTP API's callers (server libraries) do.
    ///
    /// Chunked request bodies are refused with 411: lws 4.1 never completes them (no
    /// HTTP_BODY_COMPLETION). Bodies over `maxHTTPBodySize` get 413 without being read.
    func httpRequest(_ wsi: OpaquePointer) -> Int32 {
        guard let server = server(for: wsi) else { return -1 }
        let id = assignID(wsi)
        let request = captureRequest(wsi, server: server)
        let exchange = HTTPExchange(id: id, request: request, thread: thread)
        record(id).exchange = exchange
        if request.header("transfer-encoding")?.lowercased().contains("chunked") == true {
            exchange.respond(HTTPServerResponse(status: 411, text: "chunked request bodies are not supported\n"))
            return 0
        }
        let contentLength = request.header("content-length").flatMap { Int($0) } ?? 0
        if contentLength > options.maxHTTPBodySize {
            exchange.respond(HTTPServerResponse(status: 413, text: "request body over \(options.maxHTTPBodySize) bytes\n"))
            return 0
        }
        if contentLength > 0 {
            exchange.expectBody()
        } else {
            dispatch(exchange, to: server)
        }
        return 0
    }

    /// Request body bytes (`LWS_CALLBACK_HTTP_BODY`).
    func httpBody(_ wsi: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard let id = id(of: wsi), let exchange = records[id]?.exchange else { return 0 }
        if !exchange.appendBody(bytes, limit: options.maxHTTPBodySize) {
            exchange.respond(HTTPServerResponse(status: 413, text: "request body over \(options.maxHTTPBodySize) bytes\n"))
        }
        return 0
    }

    /// The request body is complete (`LWS_CALLBACK_HTTP_BODY_COMPLETION`).
    func httpBodyCompletion(_ wsi: OpaquePointer) -> Int32 {
        guard let id = id(of: wsi), let exchange = records[id]?.exchange, let server = server(for: wsi) else { return 0 }
        if exchange.bodyComplete() != nil { dispatch(exchange, to: server) }
        return 0
    }

    /// Hands the request to the listener's handler in a task on `DispatchTaskExecutor.http`;
    /// without a handler, 404.
    private func dispatch(_ exchange: HTTPExchange, to server: ServerRecord) {
        guard let handler = server.onRequest else {
            exchange.respond(HTTPServerResponse(status: 404, text: "not found\n"))
            return
        }
        let request = exchange.request
        Task(executorPreference: DispatchTaskExecutor.http) {
            let response = await handler(request)
            exchange.respond(response)
        }
    }

    /// The socket can take one more write of the response (`LWS_CALLBACK_HTTP_WRITEABLE`).
    func httpWriteable(_ wsi: OpaquePointer) -> Int32 {
        guard let id = id(of: wsi), let exchange = records[id]?.exchange else { return 0 }
        switch exchange.nextWrite(maxChunk: scratch.count - pre) {
        case .none:
            return 0
        case .headers(let response, let bodyFollows):
            guard writeHeaders(wsi, response) else { return -1 }
            if bodyFollows {
                lws_callback_on_writable(wsi)
                return 0
            }
            return completeTransaction(id: id)
        case .body(let chunk, let final):
            if write(wsi, chunk, as: final ? LWS_WRITE_HTTP_FINAL : LWS_WRITE_HTTP) < 0 { return -1 }
            guard final else {
                lws_callback_on_writable(wsi)
                return 0
            }
            return completeTransaction(id: id)
        }
    }

    /// A plain HTTP connection closed (`LWS_CALLBACK_CLOSED_HTTP`).
    func httpClosed(_ wsi: OpaquePointer) -> Int32 {
        guard let id = id(of: wsi) else { return 0 }
        forgetExchange(id)
        return 0
    }

    /// Status line and headers in one `lws_write` (`lws_finalize_write_http_header`).
    private func writeHeaders(_ wsi: OpaquePointer, _ response: HTTPServerResponse) -> Bool {
        let start = (scratch.baseAddress! + pre).assumingMemoryBound(to: UInt8.self)
        let end = start + (scratch.count - pre - 1)
        var position: UnsafeMutablePointer<UInt8>? = start
        guard lws_add_http_common_headers(
            wsi, UInt32(response.status), response.contentType, lws_filepos_t(response.body.count), &position, end
        ) == 0 else { return false }
        let skipped: Set<String> = ["content-type", "content-length", "connection", "transfer-encoding"]
        for header in response.headers where !skipped.contains(header.name.lowercased()) {
            let name = header.name.lowercased() + ":"
            let value = Array(header.value.utf8)
            let failed = value.withUnsafeBufferPointer { buffer in
                lws_add_http_header_by_name(wsi, name, buffer.baseAddress, Int32(buffer.count), &position, end) != 0
            }
            if failed { return false }
        }
        let close = Array("close".utf8)
        let failed = close.withUnsafeBufferPointer { buffer in
            lws_add_http_header_by_token(wsi, WSI_TOKEN_CONNECTION, buffer.baseAddress, Int32(buffer.count), &position, end) != 0
        }
        if failed { return false }
        return lws_finalize_write_http_header(wsi, start, &position, end) == 0
    }

    /// Ends the exchange and closes the connection (no keep-alive).
    private func completeTransaction(id: UInt) -> Int32 {
        forgetExchange(id)
        return -1
    }

    /// Drops the exchange of `id` (its record goes with it once nothing else is left).
    private func forgetExchange(_ id: UInt) {
        records[id]?.exchange = nil
        forgetIfEmpty(id)
    }
}
