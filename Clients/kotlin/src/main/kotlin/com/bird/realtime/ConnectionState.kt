package com.bird.realtime

/**
 * The six states of a connection (realtime-connection-lifecycle seed, "The six states"):
 * `bird.connectionState` is always one of them, and `onConnectionStateChange` hears every
 * transition between two of them.
 */
enum class ConnectionState {
    /** The client exists and has not opened a socket yet. */
    INITIALIZED,

    /** A socket is opening, or is open and waiting for the server's handshake. */
    CONNECTING,

    /** The handshake arrived: the connection has an id and can subscribe. */
    CONNECTED,

    /** The connection dropped and a reconnect is scheduled (on the backoff). */
    UNAVAILABLE,

    /** `disconnect()` was called: nothing is scheduled. */
    DISCONNECTED,

    /** The server refused this connection (close codes 4000–4099): the client does not retry. */
    FAILED
}
