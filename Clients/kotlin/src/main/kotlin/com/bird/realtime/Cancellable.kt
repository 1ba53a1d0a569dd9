package com.bird.realtime

/** Something armed or started that can be called off: a timer, an HTTP request. */
interface Cancellable {
    /** Calls it off; calling again, or after it ran, does nothing. */
    fun cancel()
}

/**
 * A handler's registration (`onConnectionStateChange`, `onError`, `channel.bind` …), returned so
 * the handler can be removed.
 */
class Binding internal constructor(private val removal: () -> Unit) {
    /** Removes the handler: it is not called for events delivered after this returns. */
    fun unbind() = removal()
}
