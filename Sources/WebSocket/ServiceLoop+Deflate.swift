import CWebSockets

extension ServiceLoop {
    /// The extension table given to every vhost when `Options.permessageDeflate` is set:
    /// libwebsockets' own `permessage-deflate` (zlib), then the empty entry that ends it.
    static func makeExtensions(_ arena: CStringArena) -> UnsafeMutablePointer<lws_extension> {
        let table = UnsafeMutablePointer<lws_extension>.allocate(capacity: 2)
        table.initialize(repeating: lws_extension(), count: 2)
        table[0].name = UnsafePointer(arena.copy(PerMessageDeflate.name))
        table[0].callback = lws_extension_callback_pm_deflate
        table[0].client_offer = UnsafePointer(arena.copy(PerMessageDeflate.clientOffer))
        return table
    }

    /// A listener's upgrade offers an extension lws supports
    /// (`LWS_CALLBACK_CONFIRM_EXTENSION_OKAY`, after FILTER_PROTOCOL_CONNECTION, so the
    /// request is kept): 0 accepts it, anything else answers without it.
    ///
    /// Refused: an offer the listener's `acceptsDeflate` turns down, and offers whose parameters
    /// libwebsockets 4.1.6 gets wrong on a server. It applies `server_no_context_takeover` from
    /// a client's side: it resets the server's inflater after each message (the client keeps
    /// its context, so its next message fails to inflate) and keeps the server's deflate
    /// context (which the client was told it may forget). It ignores parameters with a value,
    /// so `server_max_window_bits=N` is answered without it and deflated with 15 bits anyway.
    /// Without the extension such a client still connects, uncompressed. (An offer with
    /// `client_no_context_takeover` is accepted: lws then resets the server's deflater after
    /// each message, as `contextTakeover` off would, which any client can read.)
    func confirmExtension(_ wsi: OpaquePointer, name: UnsafeRawPointer?) -> Int32 {
        guard options.permessageDeflate != nil, let name,
              String(cString: name.assumingMemoryBound(to: CChar.self)) == PerMessageDeflate.name,
              let server = server(for: wsi), let id = id(of: wsi), let request = records[id]?.upgradeRequest else { return 1 }
        if let offer = request.header("sec-websocket-extensions")?.lowercased(),
           offer.contains("server_no_context_takeover") || offer.contains("server_max_window_bits") { return 1 }
        if let accepts = server.acceptsDeflate, !accepts(request) { return 1 }
        return 0
    }

    /// A handshake completed: when `permessage-deflate` was negotiated on this connection (a
    /// listener's: clients never offer it), applies the context's settings before its first
    /// message (lws makes its zlib streams on first use) and marks it so writes wait for
    /// WRITEABLE (see `writeNow`).
    ///
    /// lws has no query for a negotiated extension; setting an option on one that is not
    /// active on the wsi fails, and that is the test. On a server, lws reads its
    /// `client_no_context_takeover` as "reset this side's deflater after each message" (the
    /// client's view, as for `server_no_context_takeover` above), which is what
    /// `contextTakeover` off asks; the peer is not told, and need not be.
    func startDeflate(_ wsi: OpaquePointer, record: WSIRecord, connection: WebSocketConnection) {
        guard let deflate = options.permessageDeflate,
              lws_set_extension_option(wsi, PerMessageDeflate.name, "compression_level", "\(deflate.compressionLevel)") == 0 else { return }
        _ = lws_set_extension_option(wsi, PerMessageDeflate.name, "mem_level", "\(deflate.memoryLevel)")
        _ = lws_set_extension_option(wsi, PerMessageDeflate.name, "rx_buf_size", "\(PerMessageDeflate.inflateStepPower)")
        if !deflate.contextTakeover {
            _ = lws_set_extension_option(wsi, PerMessageDeflate.name, "client_no_context_takeover", nil)
        }
        record.deflate = true
        connection.markCompressed()
    }

    /// An incoming message broke a limit on a compressed connection (`receive`): the close
    /// frame is written now, once, and the connection dropped on lws' next pass; what lws
    /// inflates meanwhile is dropped (`WSIRecord.deflateClosed`).
    ///
    /// lws 4.1.6 cannot make its own closing handshake while it is still inflating a message
    /// that spans several reads (a compression bomb): it keeps the connection on its drain
    /// list, the service thread polls without waiting, and the close never goes out. Writing
    /// the close frame (`LWS_WRITE_CLOSE`, 4, which lws does not export) and killing the
    /// connection ends the inflating at once: the bomb costs what lws inflated before the
    /// limit was passed, and at most the rest of the read it came in.
    ///
    /// - Returns: 0, the RECEIVE callback's result (lws' drain from later passes ignores it;
    ///   the connection is ended by the kill).
    func closeCompressed(_ wsi: OpaquePointer, _ record: WSIRecord, _ code: WebSocketCloseCode, _ reason: [UInt8]) -> Int32 {
        record.deflateClosed = true
        let payload = [UInt8(code.rawValue >> 8), UInt8(code.rawValue & 0xFF)] + reason.prefix(123)
        _ = write(wsi, payload, as: lws_write_protocol(rawValue: 4))
        killSoon(wsi)
        return 0
    }

    /// Writes a data frame of a compressed connection from a copy it owns.
    ///
    /// lws 4.1.6's deflater keeps a pointer to the bytes given to `lws_write`: when their
    /// deflated form outgrows its 1 KiB buffer, it sends the rest from later POLLOUTs, reading
    /// the same bytes again. The shared `scratch` holds another connection's frame by then, so
    /// each compressed connection keeps its last frame until its next WRITEABLE (which lws
    /// gives only once the message is out) or its end.
    ///
    /// - Returns: what `lws_write` returned (-1 on a failed socket).
    func writeCompressed(_ wsi: OpaquePointer, _ record: WSIRecord, _ chunk: FrameChunk, as kind: lws_write_protocol) -> Int32 {
        record.deflateInput?.deallocate()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: pre + chunk.count + 1, alignment: 16)
        record.deflateInput = buffer
        chunk.withBytes { bytes in
            if let source = bytes.baseAddress { (buffer.baseAddress! + pre).copyMemory(from: source, byteCount: bytes.count) }
        }
        return lws_write(wsi, (buffer.baseAddress! + pre).assumingMemoryBound(to: UInt8.self), chunk.count, kind)
    }

    /// An incoming compressed message inflated a full step (`PerMessageDeflate.inflateStep`) at
    /// once: the connection is closed with 1009 before anything more of it is used.
    ///
    /// lws 4.1.6 inflates one step of a read's input while it reads, and the rest on later
    /// passes from the service thread's read buffer, which other connections' reads have
    /// overwritten by then: their bytes would be inflated into this message (or fail to, and
    /// the connection drop). A step that came back full is the sign that input was left.
    func refuseLongInflate(_ wsi: OpaquePointer, _ record: WSIRecord, _ connection: WebSocketConnection) -> Int32 {
        let reason = "a compressed message inflating past \(PerMessageDeflate.inflateStep) bytes a read"
        connection.closeForIncoming(.messageTooBig, reason: reason)
        return closeCompressed(wsi, record, .messageTooBig, Array(reason.utf8))
    }
}
