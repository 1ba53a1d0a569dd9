package com.bird.realtime

/**
 * The reachability seam: something that watches the device's network and tells the client
 * (the Swift client's reachability source, the browser's
 * `online`/`offline`). The client listens from its construction until `close()`:
 *
 * - [Listener.networkAvailable]: a network is back: a wait on the backoff ends at once, a
 *   hanging attempt is replaced, a connected socket is verified;
 * - [Listener.networkChanged]: the path changed under the connection (another interface,
 *   address, route): the socket is verified at once with a 1 s pong deadline;
 * - [Listener.networkLost]: no network: the socket is verified at once, and a failure waits on
 *   the backoff (or for `networkAvailable`) instead of retrying at once.
 *
 * On Android, a few lines adapt `ConnectivityManager` (README, "Android").
 */
interface NetworkMonitor {
    /**
     * Starts telling [listener]; called once, by the client's constructor.
     *
     * @param listener the client.
     */
    fun start(listener: Listener)

    /** Stops telling; called by the client's `close()`. */
    fun stop()

    /** What a monitor tells; any thread. */
    interface Listener {
        /** A network is available again. */
        fun networkAvailable()

        /** The network is gone. */
        fun networkLost()

        /** The network changed (interface, addresses, route) while available. */
        fun networkChanged()
    }

    /** The monitor that tells nothing. */
    companion object {
        /** Tells nothing: reconnection relies on the backoff and the stale check alone. */
        @JvmField val NONE: NetworkMonitor = object : NetworkMonitor {
            override fun start(listener: Listener) {}
            override fun stop() {}
        }
    }
}
