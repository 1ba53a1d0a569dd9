package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.params.ParameterizedTest
import org.junit.jupiter.params.provider.CsvSource

class BackoffTest {
    @ParameterizedTest(name = "retry {0}: ceiling {1} ms")
    @CsvSource("0, 1000", "1, 2000", "2, 4000", "3, 8000", "4, 16000", "5, 30000", "6, 30000", "100, 30000")
    fun `the ceiling doubles from the 1 s base and stops at the 30 s cap`(retry: Int, ceiling: Long) {
        assertEquals(ceiling, Backoff().ceiling(retry))
    }

    @Test
    fun `full jitter draws uniformly between 0 and the ceiling`() {
        val backoff = Backoff()
        assertEquals(0L, backoff.fullJitterDelay(3) { 0.0 })
        assertEquals(4000L, backoff.fullJitterDelay(3) { 0.5 })
        assertTrue(backoff.fullJitterDelay(10) { 0.999999 } in 29999L..29999L)
    }

    /** No short connection allowance (the rule before issue 49), each delay drawn at its ceiling. */
    private fun schedule() = ReconnectSchedule(Backoff(), 5000, 100, { 1.0 }, 0)

    /** The default schedule (5 short connections allowed), drawing with [random]. */
    private fun allowing(random: () -> Double) = ReconnectSchedule(Backoff(), 5000, 100, random)

    /** Drops the connection made ready at [ready] after [lasted] ms and makes the next ready as it starts: the wait and then. */
    private fun flap(s: ReconnectSchedule, ready: Long, lasted: Long, immediate: Boolean): Pair<Long, Long> {
        val wait = s.nextDelay(ready + lasted, immediate)
        val next = ready + lasted + wait
        s.attemptStarted(next)
        s.ready(next)
        return wait to next
    }

    @Test
    fun `a path that flaps five times 0_5 s after each handshake is back within the base delay (issue 49)`() {
        for ((s, expected) in listOf(allowing { 1.0 } to listOf(1000L, 1000L, 1000L, 1000L, 1000L),
                                     schedule() to listOf(1000L, 2000L, 4000L, 8000L, 16000L))) {
            s.attemptStarted(0)
            s.ready(0)
            var ready = 0L
            val waits = ArrayList<Long>()
            repeat(5) {
                val (wait, next) = flap(s, ready, 500, false)
                waits.add(wait)
                ready = next
            }
            assertEquals(expected, waits)
        }
    }

    @Test
    fun `a 4200 0_3 s after the handshake is retried at once (issue 49)`() {
        val s = allowing { 1.0 }
        s.attemptStarted(0)
        s.ready(50)
        assertEquals(0L, s.nextDelay(350, true))
    }

    @Test
    fun `a peer ending every connection after its handshake with 4200 gets five at once, then the growing backoff, about a dozen in 10 s`() {
        var seed = 7L
        val s = allowing {
            seed = (seed * 1103515245 + 12345) % 2147483648
            seed / 2147483648.0
        }
        s.attemptStarted(0)
        s.ready(0)
        var ready = 0L
        var connections = 1
        var immediate = 0
        while (ready < 10_000) {
            val (wait, next) = flap(s, ready, 10, true)
            if (wait <= 100) immediate += 1
            ready = next
            if (ready < 10_000) connections += 1
        }
        assertTrue(connections <= 20, "$connections connections")
        assertTrue(immediate in 5..7, "$immediate at once")
    }

    @Test
    fun `failed attempts grow the backoff and a connection that stayed up 5 s resets it`() {
        val s = schedule()
        var now = 0L
        val delays = ArrayList<Long>()
        repeat(7) {
            s.attemptStarted(now)
            delays.add(s.nextDelay(now, false))
            now += 60_000
        }
        assertEquals(listOf(1000L, 2000L, 4000L, 8000L, 16000L, 30000L, 30000L), delays)
        s.attemptStarted(now)
        s.ready(now)
        assertEquals(1000L, s.nextDelay(now + 5000, false), "reset after a healthy connection")
    }

    @Test
    fun `a connection dropped within 5 s of its handshake does not reset the backoff`() {
        val s = schedule()
        s.attemptStarted(0)
        s.nextDelay(0, false)
        s.nextDelay(0, false)
        s.attemptStarted(100_000)
        s.ready(100_000)
        assertEquals(4000L, s.nextDelay(104_999, false))
    }

    @Test
    fun `an immediate retry is honoured only after a healthy connection and never sooner than 100 ms after the last attempt`() {
        val s = schedule()
        s.attemptStarted(0)
        s.ready(0)
        assertEquals(0L, s.nextDelay(6000, true), "healthy: at once")
        s.attemptStarted(6000)
        s.ready(6050)
        assertEquals(1000L, s.nextDelay(6060, true), "unhealthy: on the backoff")
        val t = schedule()
        t.attemptStarted(0)
        t.ready(0)
        t.minimumAttemptInterval = 10_000
        assertEquals(4000L, t.nextDelay(6000, true), "the floor of the minimum attempt interval")
    }

    @ParameterizedTest(name = "close code {0}: {1}")
    @CsvSource(
        "4000, FAIL", "4001, FAIL", "4009, FAIL", "4099, FAIL", "4100, BACK_OFF", "4199, BACK_OFF",
        "4200, RECONNECT_NOW", "4201, RECONNECT_NOW", "4299, RECONNECT_NOW", "4300, BACK_OFF", "4301, BACK_OFF",
        "1000, BACK_OFF", "1001, BACK_OFF", "1006, BACK_OFF", "3999, BACK_OFF"
    )
    fun `close codes 4000-4099 fail, 4200-4299 retry at once, anything else backs off`(code: Int, reaction: CloseReaction) {
        assertEquals(reaction, CloseCode.reaction(code))
        assertEquals(reaction, CloseCode(code).reaction)
    }
}
