package com.bird.realtime

/**
 * One WebSocket (RFC 6455) as the client uses it: text frames out, a close. Implemented with
 * OkHttp by [OkHttpTransportFactory]; tests use a fake.
 */
interface Transport {
    /**
     * Queues a text frame.
     *
     * @param text the frame.
     * @return false when the socket is closing or failed (its listener hears why).
     */
    fun send(text: String): Boolean

    /** Bytes queued and not yet written to the network (the client drops a socket past its bound, `maxQueuedBytes`). */
    val queuedBytes: Long

    /**
     * Closes the socket: with [code] and [reason] a close frame is sent (RFC 6455 §5.5.1) and the
     * socket released when the server answers it (OkHttp gives up after 60 s); with a `null`
     * code the socket is given up at once (it never completed a handshake, or is useless). The
     * client ignores whatever the listener tells after it asked for a close.
     *
     * @param code the close code, or `null`.
     * @param reason the close reason (at most 123 bytes), or `null`.
     */
    fun close(code: Int?, reason: String?)
}

/**
 * What a [Transport] tells its client, on any thread, one call at a time, in order. After
 * [onClosed] or [onFailure] nothing more is told.
 */
interface TransportListener {
    /** A text frame arrived. */
    fun onText(text: String)

    /** A binary frame of [size] bytes arrived (the protocol is text: the client reports it). */
    fun onBinary(size: Int)

    /**
     * The server closed the socket with a close frame ([code] 1005 when it had none).
     *
     * @param code the close code.
     * @param reason the close reason.
     */
    fun onClosed(code: Int, reason: String)

    /**
     * The socket could not open, or dropped without a close frame (read as close code 1006).
     *
     * @param message what happened.
     */
    fun onFailure(message: String)
}

/** Opens sockets. */
interface TransportFactory {
    /**
     * Opens a WebSocket to [url]; its events reach [listener].
     *
     * @param url `ws://…` or `wss://…`.
     * @param listener told about frames and the end.
     * @return the socket, opening.
     */
    fun open(url: String, listener: TransportListener): Transport
}
