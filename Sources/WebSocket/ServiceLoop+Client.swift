import CWebSockets
import Glibc

extension ServiceLoop {
    /// Starts a client connection with `lws_client_connect_via_info`, to the URL's first
    /// resolved address (or its host, when that is an address).
    ///
    /// lws suppresses CLIENT_CONNECTION_ERROR while that call runs: a failure met inside it (a
    /// connect(2) that fails at once) makes it return NULL with no callback. That NULL is the
    /// attempt's failure: the next address is tried, or the connection fails.
    func startConnect(_ connection: WebSocketConnection, url: WebSocketURL, headers: [HTTPHeader]) {
        guard let context else {
            connection.fail(.contextShutDown)
            return
        }
        guard !connection.isCancelled else {
            connection.fail(.cancelled)
            return
        }
        let id = connection.id
        let record = record(id)
        record.connection = connection
        record.clientHeaders = headers
        record.clientURL = url
        let strings = CStringArena()
        var info = lws_client_connect_info()
        info.context = context
        info.vhost = clientVhost
        // The name stays in `host` (the Host header, SNI and the certificate check).
        info.address = UnsafePointer(strings.copy(url.addresses.first ?? url.host))
        info.port = Int32(url.port)
        info.path = UnsafePointer(strings.copy(url.resource))
        info.host = UnsafePointer(strings.copy(url.hostHeader))
        info.origin = UnsafePointer(strings.copy(url.origin))
        info.ssl_connection = url.isSecure ? Int32(LCCSCF_USE_SSL.rawValue) : 0
        // HTTP/2 has no WebSocket upgrade in lws 4.1's client; ask TLS servers for HTTP/1.1.
        info.alpn = UnsafePointer(strings.copy("http/1.1"))
        info.opaque_user_data = UnsafeMutableRawPointer(bitPattern: id)
        errno = 0
        let wsi = lws_client_connect_via_info(&info)
        let savedErrno = errno
        guard let wsi else {
            if !tryNextAddress(id) {
                connection.fail(.connectFailed(url: url.string, message: "the connection could not be started", errno: savedErrno))
                forgetConnection(id)
            }
            return
        }
        // lws copied the strings into the wsi's stash; `strings` may go.
        if let record = records[id], record.connection != nil { record.wsi = wsi }
    }

    /// Adds the caller's headers to the opening handshake
    /// (`LWS_CALLBACK_CLIENT_APPEND_HANDSHAKE_HEADER`: `in` is `unsigned char **p`, `len` the
    /// room left).
    func appendHandshakeHeaders(_ wsi: OpaquePointer, _ input: UnsafeMutableRawPointer?, _ length: Int) -> Int32 {
        guard let id = id(of: wsi), let headers = records[id]?.clientHeaders, !headers.isEmpty, let input else { return 0 }
        let position = input.assumingMemoryBound(to: UnsafeMutablePointer<UInt8>?.self)
        guard let start = position.pointee else { return 0 }
        let end = start + length
        for header in headers {
            let name = header.name.lowercased() + ":"
            let value = Array(header.value.utf8)
            let failed = value.withUnsafeBufferPointer { buffer in
                lws_add_http_header_by_name(wsi, name, buffer.baseAddress, Int32(buffer.count), position, end) != 0
            }
            if failed { return -1 }
        }
        return 0
    }

    /// The opening handshake completed (`LWS_CALLBACK_CLIENT_ESTABLISHED`).
    func clientEstablished(_ wsi: OpaquePointer) -> Int32 {
        guard let id = id(of: wsi), let record = records[id], let connection = record.connection else { return -1 }
        record.wsi = wsi
        record.clientHeaders = nil
        record.clientURL = nil
        return open(connection, id: id, wsi: wsi)
    }

    /// The attempt failed after `lws_client_connect_via_info` returned
    /// (`LWS_CALLBACK_CLIENT_CONNECTION_ERROR`; `in` is lws' message, sometimes with its NUL).
    func clientConnectionError(_ wsi: OpaquePointer, _ message: UnsafeRawBufferPointer) -> Int32 {
        guard let id = id(of: wsi), let connection = records[id]?.connection else { return 0 }
        var text = String(decoding: message.prefix(while: { $0 != 0 }), as: UTF8.self)
        if text.isEmpty { text = "connection error" }
        let status = Int(lws_http_client_http_response(wsi))
        let url = connection.url ?? ""
        if isShuttingDown {
            connection.fail(.contextShutDown)
        } else if status > 0 && status != 101 {
            connection.fail(.handshakeFailed(url: url, status: status, message: text))
        } else if tryNextAddress(id) {
            return 0
        } else {
            connection.fail(.connectFailed(url: url, message: text, errno: 0))
        }
        forgetConnection(id)
        return 0
    }

    /// The attempt on the current address failed before any HTTP answer: queues one on the
    /// next address the host resolved to, if there is one (run by the next command pass, not
    /// inside lws' callback).
    ///
    /// - Returns: whether another attempt was queued.
    func tryNextAddress(_ id: UInt) -> Bool {
        guard !isShuttingDown, let record = records[id], var url = record.clientURL, url.addresses.count > 1,
              let connection = record.connection, !connection.isCancelled else { return false }
        let headers = record.clientHeaders ?? []
        url.addresses.removeFirst()
        // Only the failed attempt is forgotten: the connection keeps its id, and a pause of
        // reading asked for before the handshake (`readingPaused`) still applies at open.
        if let wsi = record.wsi { lws_set_opaque_user_data(wsi, nil) }
        record.wsi = nil
        record.clientURL = nil
        return thread.enqueue(.connect(connection, url, headers: headers))
    }
}
