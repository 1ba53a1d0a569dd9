import CWebSockets

extension ServiceLoop {
    /// A listener received an upgrade request (`LWS_CALLBACK_FILTER_PROTOCOL_CONNECTION`, the
    /// last callback with the request headers before ESTABLISHED): keep them for the
    /// connection.
    func filterUpgrade(_ wsi: OpaquePointer) -> Int32 {
        guard let server = server(for: wsi) else { return -1 }
        let id = assignID(wsi)
        record(id).upgradeRequest = captureRequest(wsi, server: server)
        return 0
    }

    /// A listener completed an opening handshake (`LWS_CALLBACK_ESTABLISHED`): make the
    /// connection, give it to the server's handler, then report `.open`.
    func serverEstablished(_ wsi: OpaquePointer) -> Int32 {
        guard let server = server(for: wsi) else { return -1 }
        let id = assignID(wsi)
        let record = record(id)
        let request = record.upgradeRequest ?? captureRequest(wsi, server: server)
        record.upgradeRequest = nil
        let connection = WebSocketConnection(serverSideWithID: id, request: request, thread: thread)
        record.connection = connection
        record.wsi = wsi
        startDeflate(wsi, record: record, connection: connection)
        server.onConnection(connection)
        return open(connection, id: id, wsi: wsi)
    }

    /// The handshake completed on either side: report `.open` unless the connection was closed
    /// meanwhile, and ask for WRITEABLE if frames are already queued.
    ///
    /// - Returns: the lws callback result (-1 closes the connection).
    func open(_ connection: WebSocketConnection, id: UInt, wsi: OpaquePointer) -> Int32 {
        switch connection.established() {
        case .kill:
            return -1
        case .open(let requestWritable):
            let record = record(id)
            record.established = true
            if record.readingPaused { lws_rx_flow_control(wsi, 0) }
            connection.deliver(.open)
            if requestWritable { lws_callback_on_writable(wsi) }
            return 0
        }
    }

    /// Payload bytes of a data frame (`LWS_CALLBACK_RECEIVE` / `CLIENT_RECEIVE`); a frame larger
    /// than lws' receive buffer arrives in several callbacks.
    func receive(_ wsi: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard let id = id(of: wsi), let record = records[id], let connection = record.connection else { return 0 }
        if record.deflate {
            // Closed by `closeCompressed`: what lws still inflates until the kill is dropped.
            if record.deflateClosed { return 0 }
            if bytes.count >= PerMessageDeflate.inflateStep { return refuseLongInflate(wsi, record, connection) }
        }
        let first = lws_is_first_fragment(wsi) != 0
        let final = lws_is_final_fragment(wsi) != 0 && lws_remaining_packet_payload(wsi) == 0
        let binary = lws_frame_is_binary(wsi) != 0
        switch connection.received(bytes, binary: binary, first: first, final: final) {
        case .none:
            return 0
        case .deliver(let event):
            connection.deliver(event)
            return 0
        case .close(let code, let reason):
            // Returning -1 from a client's RECEIVE while lws still buffers the rest of the frame
            // corrupts lws 4.1.6's heap (a 1.1 MB message to a 1 MiB client crashed the process).
            // Close from the next WRITEABLE instead, lws' usual way; the state machine discards
            // the rest of the message meanwhile.
            if record.deflate { return closeCompressed(wsi, record, code, reason) }
            setCloseReason(wsi, code, reason)
            record.closeOnWritable = true
            lws_callback_on_writable(wsi)
            return 0
        }
    }

    /// A pong (`LWS_CALLBACK_RECEIVE_PONG` / `CLIENT_RECEIVE_PONG`).
    func pong(_ wsi: OpaquePointer, _ bytes: UnsafeRawBufferPointer) -> Int32 {
        guard let id = id(of: wsi), let connection = records[id]?.connection else { return 0 }
        connection.deliver(.pong(Array(bytes)))
        return 0
    }

    /// The socket can take one more write (`SERVER_WRITEABLE` / `CLIENT_WRITEABLE`).
    func writeable(_ wsi: OpaquePointer) -> Int32 {
        guard let id = id(of: wsi), let record = records[id], let connection = record.connection else { return 0 }
        // The close reason was set when the limit was broken (`receive`): lws sends it now.
        if record.closeOnWritable {
            record.closeOnWritable = false
            return -1
        }
        switch connection.nextWrite() {
        case .none:
            return 0
        case .frame(let chunk, let binary, let first, let last, let more):
            if writeFrame(wsi, record, chunk, binary: binary, first: first, last: last) < 0 { return -1 }
            if more { lws_callback_on_writable(wsi) }
            return 0
        case .ping(let payload, let more):
            if write(wsi, payload, as: LWS_WRITE_PING) < 0 { return -1 }
            if more { lws_callback_on_writable(wsi) }
            return 0
        case .close(let code, let reason):
            // RFC 6455 §7.1.2: lws sends this close frame and waits for the peer's.
            setCloseReason(wsi, code, reason)
            return -1
        case .closeNext:
            // Only returned outside a callback; asked again so the close is not stranded.
            lws_callback_on_writable(wsi)
            return 0
        }
    }

    /// Writes queued frames now, from the service thread outside a WRITEABLE callback, while the
    /// socket has nothing pending; whatever is left waits for WRITEABLE, as before.
    ///
    /// One delivery used to cost two `epoll_ctl` calls (write interest on, then off) and a
    /// wake-up of the loop before its `send`; a fan-out to 10,000 subscribers paid that 10,000
    /// times. lws 4.1.6 keeps what the kernel does not take of a direct write in the
    /// connection's own output list and asks for WRITEABLE itself (`lws_issue_raw`), so order
    /// is kept; `lws_partial_buffered` tells when such a rest is waiting. TLS connections keep
    /// to the callback: OpenSSL wants a refused write retried from the callback. So do
    /// compressed ones: a message whose deflated bytes outgrow lws' buffer is sent in several
    /// frames from POLLOUT, and a write meanwhile would be taken as its continuation.
    func writeNow(_ wsi: OpaquePointer, id: UInt) {
        guard let record = records[id], let connection = record.connection, !record.closeOnWritable, !record.deflate,
              lws_is_ssl(wsi) == 0 else {
            lws_callback_on_writable(wsi)
            return
        }
        writing: for _ in 0..<Self.directWritesPerCommand {
            guard lws_partial_buffered(wsi) == 0 else { break }
            switch connection.nextWrite(inCallback: false) {
            case .none:
                return
            case .frame(let chunk, let binary, let first, let last, let more):
                guard writeFrame(wsi, record, chunk, binary: binary, first: first, last: last) >= 0 else { return killSoon(wsi) }
                if !more { return }
            case .ping(let payload, let more):
                guard write(wsi, payload, as: LWS_WRITE_PING) >= 0 else { return killSoon(wsi) }
                if !more { return }
            case .close, .closeNext:
                break writing
            }
        }
        lws_callback_on_writable(wsi)
    }

    /// Writes one data frame or fragment (RFC 6455 §5.4: the opcode on the first, FIN on the last).
    ///
    /// - Returns: what `lws_write` returned (-1 on a failed socket).
    private func writeFrame(_ wsi: OpaquePointer, _ record: WSIRecord, _ chunk: FrameChunk, binary: Bool, first: Bool, last: Bool) -> Int32 {
        let opcode = Int32(binary ? LWS_WRITE_BINARY.rawValue : LWS_WRITE_TEXT.rawValue)
        let kind = lws_write_protocol(rawValue: UInt32(lws_write_ws_flags(opcode, first ? 1 : 0, last ? 1 : 0)))
        if record.deflate { return writeCompressed(wsi, record, chunk, as: kind) }
        return write(wsi, chunk, as: kind)
    }

    /// At most this many frames are written at once per command; the rest wait for
    /// WRITEABLE, so one connection's backlog cannot hold the service thread.
    static let directWritesPerCommand = 16

    /// A direct write failed (the socket is gone): lws closes the connection from its timer
    /// list on the next pass, as for `abort`.
    func killSoon(_ wsi: OpaquePointer) {
        lws_set_timeout(wsi, PENDING_TIMEOUT_USER_OK, LWS_TO_KILL_ASYNC)
    }

    /// The peer's close frame (`LWS_CALLBACK_WS_PEER_INITIATED_CLOSE`: 2 bytes big-endian code
    /// and the reason; lws answers it with the same payload when this returns 0: lws 4.1.6's
    /// ws parsers copy the buffer after the callback, having put 1002 in place of the codes
    /// below 3000 that RFC 6455 §7.4 does not allow, but not of 5000 and up). A code to answer
    /// instead (`ConnectionStateMachine.peerClosed`: 1007 for a reason that is not UTF-8, 1002
    /// for a code no endpoint may send) is written in place, the reason's bytes made `?` (the
    /// length is lws'); a payload of one byte has no room for one, so the close frame is sent
    /// with `lws_close_reason` and the connection closed (-1): 1002.
    func peerInitiatedClose(_ wsi: OpaquePointer, _ payload: UnsafeRawBufferPointer) -> Int32 {
        guard let id = id(of: wsi), let connection = records[id]?.connection, let answer = connection.peerClosed(payload: payload) else { return 0 }
        guard payload.count >= 2, let base = payload.baseAddress else {
            setCloseReason(wsi, answer, [])
            return -1
        }
        let bytes = UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(mutating: base), count: payload.count)
        bytes[0] = UInt8(answer.rawValue >> 8)
        bytes[1] = UInt8(answer.rawValue & 0xFF)
        for index in 2..<bytes.count { bytes[index] = UInt8(ascii: "?") }
        return 0
    }

    /// The WebSocket connection is gone (`LWS_CALLBACK_CLOSED` / `CLIENT_CLOSED`). With no
    /// peer close before it, the TCP connection ended without a close frame: 1006.
    func closed(_ wsi: OpaquePointer) -> Int32 {
        guard let id = id(of: wsi), let connection = records[id]?.connection else { return 0 }
        terminate(connection)
        return 0
    }

    /// lws frees the wsi after this (`LWS_CALLBACK_WSI_DESTROY`): drop every reference to it.
    func wsiDestroyed(_ wsi: OpaquePointer) -> Int32 {
        guard let id = id(of: wsi) else { return 0 }
        if let connection = records[id]?.connection { terminate(connection) }
        if let record = records[id] {
            record.wsi = nil
            record.exchange = nil
            record.upgradeRequest = nil
        }
        forgetIfEmpty(id)
        return 0
    }

    private func terminate(_ connection: WebSocketConnection) {
        let neverOpened: WebSocketError = isShuttingDown
            ? .contextShutDown
            : .connectFailed(url: connection.url ?? "", message: "closed before the handshake completed", errno: 0)
        connection.terminate(neverOpened: neverOpened)
        forgetConnection(connection.id)
    }

    private func setCloseReason(_ wsi: OpaquePointer, _ code: WebSocketCloseCode, _ reason: [UInt8]) {
        var reason = reason
        reason.withUnsafeMutableBufferPointer { buffer in
            lws_close_reason(wsi, lws_close_status(rawValue: UInt32(code.rawValue)), buffer.baseAddress, buffer.count)
        }
    }
}
