package com.bird.realtime

import com.bird.realtime.ConnectionState.CONNECTED
import com.bird.realtime.ConnectionState.CONNECTING
import com.bird.realtime.ConnectionState.UNAVAILABLE
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

/** The stale-connection check (seed) and the network monitor's hints. */
class StaleCheckTest {
    private fun pings(socket: FakeSocket) = socket.framesOf("bird:ping").size

    @Test
    fun `the activity timeout comes from the handshake - a ping after that much silence`() {
        val c = TestClient()
        val socket = c.connectNow("1.1", 30)
        c.clock.advance(29_999)
        assertEquals(0, pings(socket))
        c.clock.advance(1)
        assertEquals(1, pings(socket))
    }

    @Test
    fun `without activity_timeout the default is 120 s, a silly value is clamped to 1 s`() {
        val c = TestClient()
        c.bird.connect()
        c.socket.receive("bird:connection_established", mapOf("socket_id" to "1.1"))
        c.clock.advance(119_999)
        assertEquals(0, pings(c.socket))
        c.clock.advance(1)
        assertEquals(1, pings(c.socket))
        val d = TestClient()
        d.bird.connect()
        d.socket.receive("bird:connection_established", mapOf("socket_id" to "1.1", "activity_timeout" to 1e-300))
        d.clock.advance(999)
        assertEquals(0, pings(d.socket))
        d.clock.advance(1)
        assertEquals(1, pings(d.socket))
    }

    @Test
    fun `frames push the ping back - the check re-arms for the rest of the timeout`() {
        val c = TestClient()
        val socket = c.connectNow("1.1", 30)
        c.clock.advance(20_000)
        socket.receive("news-event", emptyMap<String, Any>(), "news")
        c.clock.advance(10_000)
        assertEquals(0, pings(socket))
        c.clock.advance(20_000)
        assertEquals(1, pings(socket))
    }

    @Test
    fun `no pong within the pong timeout - reported, closed with 4201, retried at once after a healthy connection`() {
        val c = TestClient()
        val socket = c.connectNow("1.1", 30)
        c.clock.advance(30_000)
        assertEquals(1, pings(socket))
        c.clock.advance(29_999)
        assertEquals(CONNECTED, c.bird.connectionState)
        c.clock.advance(1)
        assertEquals(4201 to "pong not received", socket.closed)
        assertEquals(RealtimeError(RealtimeError.Type.PONG_TIMEOUT, 4201, "no pong within the pong timeout"), c.errors.last())
        assertEquals(CONNECTING, c.bird.connectionState)
        assertEquals(2, c.sockets.size)
    }

    @Test
    fun `a pong (any frame) within the deadline keeps the connection`() {
        val c = TestClient()
        val socket = c.connectNow("1.1", 30)
        c.clock.advance(30_000)
        socket.receive("bird:pong", emptyMap<String, Any>())
        c.clock.advance(29_999)
        assertEquals(CONNECTED, c.bird.connectionState)
        assertNull(socket.closed)
    }

    @Test
    fun `the server's ping is answered with a pong`() {
        val c = TestClient()
        val socket = c.connectNow()
        socket.receive("bird:ping", emptyMap<String, Any>())
        assertEquals(1, socket.framesOf("bird:pong").size)
    }

    @Test
    fun `the old connection's pong deadline cannot end the new one`() {
        val c = TestClient()
        val old = c.connectNow("1.1", 30)
        c.clock.advance(30_000)
        old.drop(1006)
        c.clock.advance(1000)
        c.socket.handshake("2.2", 120)
        c.clock.advance(40_000)
        assertEquals(CONNECTED, c.bird.connectionState)
        assertNull(c.socket.closed)
    }

    @Test
    fun `network lost - the connection is verified at once with a 1 s pong deadline, no answer backs off`() {
        val c = TestClient()
        val socket = c.connectNow()
        c.clock.advance(10_000)
        c.network.lost()
        assertEquals(1, pings(socket))
        c.clock.advance(1000)
        assertEquals(4201, socket.closed?.first)
        assertEquals(UNAVAILABLE, c.bird.connectionState, "the network is gone: wait, do not retry at once")
    }

    @Test
    fun `network lost, then an answer in time - still connected`() {
        val c = TestClient()
        val socket = c.connectNow()
        c.network.lost()
        socket.receive("bird:pong", emptyMap<String, Any>())
        c.clock.advance(5000)
        assertEquals(CONNECTED, c.bird.connectionState)
    }

    @Test
    fun `network changed - verified at once`() {
        val c = TestClient()
        val socket = c.connectNow()
        c.network.changed()
        assertEquals(1, pings(socket))
        assertEquals(listOf(1000L), c.clock.pending().filter { it <= 1000L })
        c.clock.advance(1000)
        assertEquals(4201, socket.closed?.first, "the old path is dead: replaced")
    }

    @Test
    fun `network available while waiting on the backoff - a new attempt at once, without waiting for the timer`() {
        val c = TestClient()
        c.draw = 1.0
        c.connectNow()
        repeat(5) {
            c.socket.drop(1006)
            c.clock.advance(c.clock.pending()[0])
        }
        c.socket.drop(1006)
        assertEquals(UNAVAILABLE, c.bird.connectionState)
        assertEquals(30_000L, c.clock.pending()[0])
        val before = c.sockets.size
        c.network.available()
        assertEquals(before + 1, c.sockets.size)
        assertEquals(CONNECTING, c.bird.connectionState)
        c.socket.handshake("7.7")
        assertEquals(CONNECTED, c.bird.connectionState)
    }

    @Test
    fun `network available while an attempt hangs - it is replaced by a new one`() {
        val c = TestClient()
        c.bird.connect()
        c.network.available()
        assertNotNull(c.sockets[0].closed)
        assertEquals(2, c.sockets.size)
    }

    @Test
    fun `a timer firing far too late (the device slept) verifies the connection at once`() {
        val c = TestClient()
        val socket = c.connectNow("1.1", 120)
        c.clock.advance(60_000)
        c.clock.freeze(300_000)    // asleep past the activity check
        c.clock.advance(0)         // the late check fires
        assertTrue(pings(socket) >= 1)
        assertEquals(1000L, c.clock.pending()[0], "the short pong deadline, not 30 s")
        c.clock.advance(1000)
        assertEquals(4201, socket.closed?.first)
    }

    @Test
    fun `close() stops listening to the network monitor`() {
        val c = TestClient()
        c.connectNow()
        c.bird.close()
        assertTrue(c.network.stopped)
        assertEquals(ConnectionState.DISCONNECTED, c.bird.connectionState)
    }
}
