package com.bird.realtime

/**
 * Retry delays after a drop: exponential backoff with full jitter, base 1 s, cap 30 s
 * (realtime-connection-lifecycle seed, "Automatic reconnection"; "Exponential Backoff And
 * Jitter", AWS Architecture Blog, 2015). Durations in milliseconds.
 */
class Backoff(
    /** The ceiling of the first delay, in milliseconds (1000). */
    val base: Long = 1000,
    /** The largest ceiling, in milliseconds (30000). */
    val cap: Long = 30000,
    /** The growth of the ceiling per retry (2). */
    val multiplier: Double = 2.0
) {
    /**
     * The ceiling of retry [retry] (0-based): `min(cap, base × multiplier^retry)`.
     *
     * @param retry retries before this one.
     * @return the largest delay, in milliseconds.
     */
    fun ceiling(retry: Int): Long {
        val exponent = Math.min(Math.max(retry, 0), 64)
        return Math.min(cap.toDouble(), base * Math.pow(multiplier, exponent.toDouble())).toLong()
    }

    /**
     * The delay before retry [retry]: uniform in `0 … ceiling` (full jitter).
     *
     * @param retry retries before this one.
     * @param random a source of numbers in [0, 1).
     * @return the delay, in milliseconds.
     */
    fun fullJitterDelay(retry: Int, random: () -> Double): Long = (random() * ceiling(retry)).toLong()
}

/**
 * When the next attempt starts, as the Swift and browser clients decide it: the retry count
 * (the backoff's exponent) resets when a healthy connection drops, and only such a connection
 * has a server's immediate-retry request (4200–4299) honoured. Healthy: up for
 * [stableConnectionDuration] (5 s), or up at all while [shortConnectionAllowance] (5, one back
 * per [stableConnectionDuration]) lasts, so a path that flaps a few times is back within the
 * base delay (the seed resets the backoff on every handshake). A server that ends
 * every connection sooner is soon retried on the growing backoff, and no two attempts start
 * less than [minimumAttemptInterval] (100 ms) apart (a server closing with 4200
 * after every handshake drew hundreds of connections a second). Instants in milliseconds.
 */
internal class ReconnectSchedule(
    private val backoff: Backoff,
    private val stableConnectionDuration: Long,
    var minimumAttemptInterval: Long,
    private val random: () -> Double,
    shortConnectionAllowance: Int = 5
) {
    private val shortConnectionAllowance = Math.max(0, shortConnectionAllowance)

    /** Backoff retries since a healthy connection last dropped. */
    var retries = 0
        private set
    private var readyAt: Long? = null
    private var lastAttemptStart: Long? = null
    /** Short connections still allowed, as of [allowanceAt] (`null`: never used, all of it). */
    private var allowance = 0.0
    private var allowanceAt: Long? = null
    /** Whether the last [nextDelay] honoured an immediate-retry request (its delay is the floor at most). */
    var retriesAtOnce = false
        private set

    /** An attempt starts at [now]. */
    fun attemptStarted(now: Long) {
        lastAttemptStart = now
    }

    /** The handshake arrived at [now]. */
    fun ready(now: Long) {
        readyAt = now
    }

    /** The app called `connect()`: its attempt is not held to the minimum interval. */
    fun manualStart() {
        lastAttemptStart = null
    }

    /**
     * The delay before the next attempt after a socket ended.
     *
     * @param now the instant.
     * @param immediate the close asked for an immediate retry (4200–4299, or a missed pong).
     * @return the delay in milliseconds (0: at once).
     */
    fun nextDelay(now: Long, immediate: Boolean): Long {
        val started = readyAt
        val healthy = started != null && (now - started >= stableConnectionDuration || takeAllowance(now))
        readyAt = null
        if (healthy) retries = 0
        var delay = 0L
        retriesAtOnce = immediate && healthy
        if (!retriesAtOnce) {
            // An immediate retry does not grow the ceiling: the first real wait is still under the base.
            delay = backoff.fullJitterDelay(retries, random)
            retries += 1
        }
        val last = lastAttemptStart
        val floor = if (last == null) 0L else last + minimumAttemptInterval - now
        return Math.max(Math.max(delay, floor), 0L)
    }

    /** Takes one short connection from the allowance, if one is left (a token bucket). */
    private fun takeAllowance(now: Long): Boolean {
        val capacity = shortConnectionAllowance.toDouble()
        val since = allowanceAt
        val left = if (since == null) capacity else {
            val refill = if (stableConnectionDuration > 0) (now - since).toDouble() / stableConnectionDuration else capacity
            Math.min(capacity, allowance + Math.max(0.0, refill))
        }
        allowanceAt = now
        if (left < 1) {
            allowance = left
            return false
        }
        allowance = left - 1
        return true
    }
}
