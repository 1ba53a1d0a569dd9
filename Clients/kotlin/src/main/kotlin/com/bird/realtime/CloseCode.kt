package com.bird.realtime

/**
 * A WebSocket close code as the realtime protocol uses it (RFC 6455 §7.4 and Pusher's
 * 4000–4399 ranges). An open set: any code can be wrapped, the ones the client sends or reads
 * by name are constants (STYLE.md: "an open set of codes is a struct wrapping a raw value").
 */
class CloseCode(
    /** The code as it travels (1000 … 4999). */
    val rawValue: Int
) {
    /** What the client does after a close with this code (seed, "Automatic reconnection"). */
    val reaction: CloseReaction get() = reaction(rawValue)

    override fun equals(other: Any?): Boolean = other is CloseCode && other.rawValue == rawValue
    override fun hashCode(): Int = rawValue
    override fun toString(): String = rawValue.toString()

    /** The named codes and the reaction rule. */
    companion object {
        /** 1000: normal closure (RFC 6455 §7.4.1), sent by `disconnect()`. */
        @JvmField val NORMAL_CLOSURE = CloseCode(1000)

        /** 1006: dropped without a close frame (reported, never sent; RFC 6455 §7.1.5). */
        @JvmField val ABNORMAL_CLOSURE = CloseCode(1006)

        /** 4001: the app does not exist (Pusher). */
        @JvmField val UNKNOWN_APP = CloseCode(4001)

        /** 4009: unauthorised connection, or the member was terminated (Pusher; seed "Handling close code 4009"). */
        @JvmField val UNAUTHORIZED = CloseCode(4009)

        /** 4100: over capacity: back off (Pusher). */
        @JvmField val OVER_CAPACITY = CloseCode(4100)

        /** 4200: reconnect now (Pusher). */
        @JvmField val RECONNECT_NOW = CloseCode(4200)

        /** 4201: pong not received; the client closes with it after the pong deadline (seed, "The stale-connection check"). */
        @JvmField val PONG_NOT_RECEIVED = CloseCode(4201)

        /**
         * The reaction to a close code (seed, "Automatic reconnection"): 4000–4099 refused, no
         * retry; 4200–4299 immediate retry; anything else (network failures, 1006, 4100–4199,
         * 4300–4399) unavailable and backoff.
         *
         * @param code the close code.
         * @return the reaction.
         */
        @JvmStatic
        fun reaction(code: Int): CloseReaction = when (code) {
            in 4000..4099 -> CloseReaction.FAIL
            in 4200..4299 -> CloseReaction.RECONNECT_NOW
            else -> CloseReaction.BACK_OFF
        }
    }
}

/** What the client does after a socket closed (seed, "Automatic reconnection"). */
enum class CloseReaction {
    /** Refused: state `FAILED`, no retry until `connect()`. */
    FAIL,

    /** Retry at once (after a connection that stayed up 5 s; sooner ones back off). */
    RECONNECT_NOW,

    /** State `UNAVAILABLE`, retry after the backoff's delay. */
    BACK_OFF
}
