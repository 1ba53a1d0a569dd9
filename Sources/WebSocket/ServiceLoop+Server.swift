import CWebSockets
import Glibc

/// A listener as the service thread knows it.
struct ServerRecord {
    var id: UInt
    var vhost: OpaquePointer
    var host: String
    var port: Int
    var customHeaderNames: [String]
    var acceptsDeflate: (@Sendable (HTTPServerRequest) -> Bool)?
    var onConnection: @Sendable (WebSocketConnection) -> Void
    var onRequest: (@Sendable (HTTPServerRequest) async -> HTTPServerResponse)?
    /// `stop()` was called: new connections are refused at accept.
    var stopped = false
    /// `false` after `stopAccepting()`: new connections are refused at accept, open ones stay.
    var accepting = true
    /// Other contexts' listeners that serve this one's connections in turn with it
    /// (`WebSocketContext.listen(…, spreadingTo:)`), and whose turn is next (0: this one's).
    var spread: [SpreadTarget] = []
    var nextTurn = 0
}

extension ServiceLoop {
    /// Creates a vhost listening on the request's address and port.
    ///
    /// One protocol serves both WebSocket upgrades and plain HTTP on it. The address goes in
    /// `info.iface` (an IP address or an interface name); port 0 takes an ephemeral port,
    /// read back with `lws_get_vhost_listen_port`.
    ///
    /// - Returns: the bound port, or `listenFailed` with the errno seen after
    ///   `lws_create_vhost` returned NULL.
    func createServer(_ request: ListenRequest) -> Result<Int, WebSocketError> {
        guard let context else { return .failure(.contextShutDown) }
        // lws shares the listening socket of a vhost already on the same address and port
        // (for SNI) instead of failing: refuse that the way bind(2) would.
        if let port = request.port, port != 0, servers.values.contains(where: { $0.host == request.host && $0.port == port }) {
            return .failure(.listenFailed(host: request.host, port: port, errno: EADDRINUSE))
        }
        var info = lws_context_creation_info()
        info.port = request.port.map(Int32.init) ?? CONTEXT_PORT_NO_LISTEN_SERVER
        info.iface = UnsafePointer(arena.copy(request.host))
        info.protocols = UnsafePointer(protocols)
        info.vhost_name = UnsafePointer(arena.copy("server-\(request.serverID)"))
        var vhostOptions = Self.vhostOptions | UInt64(LWS_SERVER_OPTION_FAIL_UPON_UNABLE_TO_BIND)
        // An IPv4 address is bound on an AF_INET socket; otherwise lws opens AF_INET6.
        if Self.isIPv4Literal(request.host) { vhostOptions |= UInt64(LWS_SERVER_OPTION_DISABLE_IPV6) }
        info.options = vhostOptions
        if let tls = request.tls {
            info.ssl_cert_filepath = UnsafePointer(arena.copy(tls.certificateChainFile))
            info.ssl_private_key_filepath = UnsafePointer(arena.copy(tls.privateKeyFile))
        }
        // WebSocket upgrades need HTTP/1.1; lws would otherwise offer h2 by ALPN.
        info.alpn = UnsafePointer(arena.copy("http/1.1"))
        info.extensions = UnsafePointer(extensions)
        guard let vhost = lws_create_vhost(context, &info) else {
            let port = request.port ?? 0
            return .failure(.listenFailed(host: request.host, port: port, errno: Self.bindErrno(request.host, port)))
        }
        let port = request.port == nil ? 0 : Int(lws_get_vhost_listen_port(vhost))
        servers[request.serverID] = ServerRecord(
            id: request.serverID,
            vhost: vhost,
            host: request.host,
            port: port,
            customHeaderNames: request.customHeaderNames,
            acceptsDeflate: request.acceptsDeflate,
            onConnection: request.onConnection,
            onRequest: request.onRequest,
            spread: request.spread
        )
        serverIDsByVhost[UInt(bitPattern: vhost)] = request.serverID
        return .success(port)
    }

    /// Stops a listener: refuses its new connections and kills the open ones (without a close
    /// frame, so their peers report 1006).
    ///
    /// The vhost is not destroyed: in lws 4.1.6 `lws_vhost_destroy` never marks the vhost
    /// `being_destroyed`, so nothing closes its listening socket or its connections, and the
    /// vhost would linger half-destroyed. The listening socket closes with the context; until
    /// then every connection it accepts is closed at once (FILTER_NETWORK_CONNECTION).
    func stopServer(_ id: UInt) {
        guard let record = servers[id], !record.stopped else { return }
        servers[id]?.stopped = true
        for case let wsi? in records.values.map(\.wsi) where lws_get_vhost(wsi) == record.vhost {
            lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
        }
    }

    /// A listener accepted a TCP connection (`LWS_CALLBACK_FILTER_NETWORK_CONNECTION`, on the
    /// listening wsi): non-zero makes lws close it at once. Also refused: a connection whose
    /// descriptor is within `descriptorReserve` of the process's limit. The kernel hands out
    /// the lowest free descriptor, so that number means the process has that many open; past
    /// the limit `accept` fails with EMFILE, and lws retries it on every pass (a spin at 100 %
    /// of a core). Refusing first keeps the spare descriptors that avoid it.
    ///
    /// A listener spreading its connections over other contexts (`spread`) keeps one in turn
    /// and hands each other one to the next context: a duplicate of the descriptor goes to
    /// that context's service thread (`ServiceCommand.adopt`), and this one is refused, which
    /// closes the original. The kernel's socket lives on in the duplicate.
    func filterNetworkConnection(_ wsi: OpaquePointer, descriptor: Int32) -> Int32 {
        if descriptor >= 0, Int(descriptor) >= Self.descriptorCeiling() { return -1 }
        guard let vhost = lws_get_vhost(wsi), let id = serverIDsByVhost[UInt(bitPattern: vhost)] else { return 0 }
        guard let record = servers[id] else { return 0 }
        if record.stopped || !record.accepting { return -1 }
        guard !record.spread.isEmpty, descriptor >= 0 else { return 0 }
        let turn = record.nextTurn
        servers[id]?.nextTurn = (turn + 1) % (record.spread.count + 1)
        guard turn > 0 else { return 0 }
        let target = record.spread[turn - 1]
        let copy = dup(descriptor)
        guard copy >= 0 else { return 0 }
        guard target.thread.enqueue(.adopt(serverID: target.serverID, descriptor: copy)) else {
            close(copy)
            return 0
        }
        return -1
    }

    /// Serves a connection another context's listener accepted (`ServiceCommand.adopt`): lws
    /// takes it as if this vhost had accepted it, or closes it.
    func adopt(_ descriptor: Int32, server id: UInt) {
        guard let record = servers[id], !record.stopped, record.accepting else {
            close(descriptor)
            return
        }
        _ = lws_adopt_socket_vhost(record.vhost, descriptor)
    }

    /// Descriptors kept free for what is not a connection (the listener, pipes, files, the
    /// Redis bus, webhook requests).
    static let descriptorReserve = 64

    /// The soft descriptor limit less `descriptorReserve`: the first descriptor refused.
    static func descriptorCeiling() -> Int {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur != rlim_t.max else { return .max }
        return Int(clamping: limit.rlim_cur) - descriptorReserve
    }

    /// The listener a wsi belongs to, or nil for client wsis and stopped listeners.
    func server(for wsi: OpaquePointer) -> ServerRecord? {
        guard let vhost = lws_get_vhost(wsi), let id = serverIDsByVhost[UInt(bitPattern: vhost)],
              let record = servers[id], !record.stopped else { return nil }
        return record
    }

    /// Why binding `host`:`port` fails, asked of the kernel again: lws logs the bind errno but
    /// returns only NULL, and its logging overwrites `errno`. The cause (another listener, an
    /// address not on this host) still holds right after. 0 when the address is not an IP
    /// literal or the bind now succeeds (a certificate that did not load, for instance).
    static func bindErrno(_ host: String, _ port: Int) -> Int32 {
        var storage = sockaddr_storage()
        let length: Int
        if inet_pton(AF_INET, host, &storage) == 1 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            _ = inet_pton(AF_INET, host, &address.sin_addr)
            withUnsafeBytes(of: address) { bytes in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) }
            }
            length = MemoryLayout<sockaddr_in>.size
        } else {
            var address = sockaddr_in6()
            guard inet_pton(AF_INET6, host, &address.sin6_addr) == 1 else { return 0 }
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(port).bigEndian
            withUnsafeBytes(of: address) { bytes in
                withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: bytes) }
            }
            length = MemoryLayout<sockaddr_in6>.size
        }
        let probe = socket(Int32(storage.ss_family), Int32(SOCK_STREAM.rawValue), 0)
        guard probe >= 0 else { return errno }
        defer { close(probe) }
        // As lws does: SO_REUSEADDR, so only a live listener (not TIME_WAIT) makes it fail.
        var on: Int32 = 1
        setsockopt(probe, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(probe, $0, socklen_t(length)) }
        }
        return result == 0 ? 0 : errno
    }

    static func isIPv4Literal(_ host: String) -> Bool {
        var address = in_addr()
        return inet_pton(AF_INET, host, &address) == 1
    }

    /// Reads the request line and headers lws parsed (valid from LWS_CALLBACK_HTTP or
    /// FILTER_PROTOCOL_CONNECTION until the headers are released).
    func captureRequest(_ wsi: OpaquePointer, server: ServerRecord) -> HTTPServerRequest {
        var uri: UnsafeMutablePointer<CChar>?
        var uriLength: Int32 = 0
        let methodIndex = lws_http_get_uri_and_method(wsi, &uri, &uriLength)
        let path = uri.map { String(decoding: UnsafeRawBufferPointer(start: $0, count: Int(max(uriLength, 0))), as: UTF8.self) } ?? "/"
        var headers: [HTTPHeader] = []
        for raw in 0..<WSI_TOKEN_COUNT.rawValue {
            let token = lws_token_indexes(rawValue: raw)
            guard let namePointer = lws_token_to_string(token) else { continue }
            let name = String(cString: namePointer)
            // Header tokens end with ':'; method tokens ("get ") and h2 pseudo-headers do not.
            guard name.hasSuffix(":"), !name.hasPrefix(":") else { continue }
            if let value = headerValue(wsi, token) { headers.append(HTTPHeader(name: String(name.dropLast()), value: value)) }
        }
        for name in server.customHeaderNames {
            let key = name.lowercased() + ":"
            let length = lws_hdr_custom_length(wsi, key, Int32(key.utf8.count))
            guard length >= 0 else { continue }
            var buffer = [CChar](repeating: 0, count: Int(length) + 1)
            if lws_hdr_custom_copy(wsi, &buffer, Int32(buffer.count), key, Int32(key.utf8.count)) >= 0 {
                headers.append(HTTPHeader(name: name.lowercased(), value: String(decoding: buffer.prefix(Int(length)).map(UInt8.init(bitPattern:)), as: UTF8.self)))
            }
        }
        var address = [CChar](repeating: 0, count: 64)
        let remote = lws_get_peer_simple(wsi, &address, address.count).map { String(cString: $0) } ?? ""
        return HTTPServerRequest(
            method: Self.methodName(methodIndex),
            path: path,
            queryItems: queryItems(wsi),
            headers: headers,
            remoteAddress: remote
        )
    }

    /// The method name for an `LWSHUMETH_*` index (`lws_http_get_uri_and_method`).
    private static func methodName(_ index: Int32) -> String {
        switch index {
        case Int32(LWSHUMETH_POST): return "POST"
        case Int32(LWSHUMETH_OPTIONS): return "OPTIONS"
        case Int32(LWSHUMETH_PUT): return "PUT"
        case Int32(LWSHUMETH_PATCH): return "PATCH"
        case Int32(LWSHUMETH_DELETE): return "DELETE"
        case Int32(LWSHUMETH_CONNECT): return "CONNECT"
        case Int32(LWSHUMETH_HEAD): return "HEAD"
        default: return "GET"
        }
    }

    private func headerValue(_ wsi: OpaquePointer, _ token: lws_token_indexes) -> String? {
        let length = Int(lws_hdr_total_length(wsi, token))
        guard length > 0 else { return nil }
        var buffer = [CChar](repeating: 0, count: length + 1)
        guard lws_hdr_copy(wsi, &buffer, Int32(buffer.count), token) >= 0 else { return nil }
        return String(decoding: buffer.prefix(length).map(UInt8.init(bitPattern:)), as: UTF8.self)
    }

    /// The query items: lws keeps each `name=value` of the URI as one fragment of
    /// WSI_TOKEN_HTTP_URI_ARGS, percent-decoded.
    private func queryItems(_ wsi: OpaquePointer) -> [HTTPServerRequest.QueryItem] {
        let total = Int(lws_hdr_total_length(wsi, WSI_TOKEN_HTTP_URI_ARGS))
        guard total > 0 else { return [] }
        var items: [HTTPServerRequest.QueryItem] = []
        var buffer = [CChar](repeating: 0, count: total + 1)
        for index in 0...total {
            let length = lws_hdr_copy_fragment(wsi, &buffer, Int32(buffer.count), WSI_TOKEN_HTTP_URI_ARGS, Int32(index))
            guard length >= 0 else { break }
            let fragment = String(decoding: buffer.prefix(Int(length)).map(UInt8.init(bitPattern:)), as: UTF8.self)
            if let equals = fragment.firstIndex(of: "=") {
                items.append(.init(name: String(fragment[..<equals]), value: String(fragment[fragment.index(after: equals)...])))
            } else {
                items.append(.init(name: fragment, value: ""))
            }
        }
        return items
    }
}
