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

    private fun schedule() = ReconnectSchedule(Backoff(), 5000, 100) { 1.0 }

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
