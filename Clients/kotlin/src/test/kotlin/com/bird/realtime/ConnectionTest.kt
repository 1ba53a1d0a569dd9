package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import com.bird.realtime.ConnectionState.CONNECTED
import com.bird.realtime.ConnectionState.CONNECTING
import com.bird.realtime.ConnectionState.DISCONNECTED
import com.bird.realtime.ConnectionState.FAILED
import com.bird.realtime.ConnectionState.INITIALIZED
import com.bird.realtime.ConnectionState.UNAVAILABLE

class ConnectionTest {
    @Test
    fun `the six states - initialized, connecting until the handshake, connected with an id, disconnected`() {
        val c = TestClient()
        assertEquals(INITIALIZED, c.bird.connectionState)
        assertEquals(emptyList<FakeSocket>(), c.sockets, "nothing happens until connect()")
        c.bird.connect()
        assertEquals(CONNECTING, c.bird.connectionState)
        assertNull(c.bird.connectionId)
        var idWhenConnected: String? = null
        c.bird.onConnectionStateChange { _, current -> if (current == CONNECTED) idWhenConnected = c.bird.connectionId }
        c.socket.handshake("123.456")
        assertEquals(CONNECTED, c.bird.connectionState)
        assertEquals("123.456", idWhenConnected, "the id is set before the state becomes connected")
        c.bird.disconnect()
        assertEquals(listOf(CONNECTING, CONNECTED, DISCONNECTED), c.states)
        assertEquals(1000 to "disconnect()", c.sockets[0].closed)
        assertNull(c.bird.connectionId)
        assertEquals(emptyList<Long>(), c.clock.pending(), "disconnect() schedules nothing")
    }

    @Test
    fun `onConnectionStateChange gives previous and current, unbinding stops it`() {
        val c = TestClient()
        val changes = ArrayList<String>()
        val binding = c.bird.onConnectionStateChange { previous, current -> changes.add("$previous->$current") }
        c.connectNow()
        c.socket.drop(1006)
        assertEquals(listOf("INITIALIZED->CONNECTING", "CONNECTING->CONNECTED", "CONNECTED->UNAVAILABLE"), changes)
        binding.unbind()
        c.clock.advance(30_000)
        assertEquals(3, changes.size, "unbound")
    }

    @Test
    fun `the URL names the app, the namespace and the client, a region is a hosted TLS host`() {
        assertEquals("ws://127.0.0.1:6001/app/k?namespace=bird&client=kotlin&protocol=7", BirdRealtimeOptions(appKey = "k", host = "127.0.0.1", port = 6001).endpointURL)
        assertEquals("wss://ws-us1.realtime.bird.com/app/k?namespace=bird&client=kotlin&protocol=7", BirdRealtimeOptions(appKey = "k", region = "us1").endpointURL)
        assertEquals("wss://invalid-region.invalid/app/k?namespace=bird&client=kotlin&protocol=7", BirdRealtimeOptions(appKey = "k", region = "../evil").endpointURL)
        assertEquals("ws://h/app/k", BirdRealtimeOptions(appKey = "k", url = "ws://h/app/k").endpointURL)
        assertEquals("wss://[::1]/app/k?namespace=bird&client=kotlin&protocol=7", BirdRealtimeOptions(appKey = "k", host = "::1", useTLS = true).endpointURL)
    }

    @Test
    fun `a drop backs off with full jitter (1 s base, doubling, 30 s cap) in unavailable`() {
        val c = TestClient()
        c.draw = 0.5
        c.connectNow()
        val waits = ArrayList<Long>()
        repeat(7) {
            c.socket.drop(1006)
            assertEquals(UNAVAILABLE, c.bird.connectionState)
            val wait = c.clock.pending().first { it != 30_000L }
            waits.add(wait)
            val before = c.sockets.size
            c.clock.advance(wait - 1)
            assertEquals(before, c.sockets.size, "nothing opens before the delay")
            c.clock.advance(1)
            assertEquals(before + 1, c.sockets.size)
            assertEquals(CONNECTING, c.bird.connectionState)
        }
        assertEquals(listOf(500L, 1000L, 2000L, 4000L, 8000L, 15000L, 15000L), waits)
    }

    @Test
    fun `the backoff resets after every handshake while the short connection allowance lasts (5, issue 49), then only after a connection that stayed up 5 s`() {
        val c = TestClient()
        c.draw = 1.0
        c.connectNow()
        // Connections ended at once, one a second: each handshake resets the backoff (the seed),
        // five from the allowance and a sixth from the one that came back in those 5 s.
        for (i in 0 until 6) {
            c.socket.drop(1006)
            assertEquals(1000L, c.clock.pending()[0], "drop ${i + 1}: the base")
            c.clock.advance(1000)
            c.socket.handshake("${i + 2}.${i + 2}")
        }
        c.socket.drop(1006)          // the allowance spent: retry 1, 2 s
        assertEquals(2000L, c.clock.pending()[0])
        c.clock.advance(2000)
        c.socket.handshake("8.8")
        c.clock.advance(5000)        // up 5 s: healthy
        c.socket.drop(1006)
        assertEquals(1000L, c.clock.pending()[0], "back to the base")
    }

    @Test
    fun `4000-4099 fail with no retry, connect() after 4009 starts a new connection`() {
        val c = TestClient()
        c.connectNow()
        c.socket.drop(4009, "member terminated")
        assertEquals(FAILED, c.bird.connectionState)
        assertEquals(RealtimeError(RealtimeError.Type.CLOSED, 4009, "member terminated"), c.errors.last())
        assertEquals(emptyList<Long>(), c.clock.pending())
        c.clock.advance(120_000)
        assertEquals(1, c.sockets.size, "never retried")
        c.bird.connect()
        assertEquals(CONNECTING, c.bird.connectionState)
        assertEquals(2, c.sockets.size)
        c.socket.handshake("9.9")
        assertEquals(CONNECTED, c.bird.connectionState)
    }

    @Test
    fun `4200-4299 after a healthy connection reconnect at once, after a short one too while the allowance lasts, then on the backoff`() {
        val c = TestClient()
        c.draw = 1.0
        c.connectNow()
        c.clock.advance(6000)
        c.socket.drop(4200, "restarting")
        assertEquals(CONNECTING, c.bird.connectionState)
        assertEquals(2, c.sockets.size, "a new socket at once")
        for (i in 0 until 5) {
            c.socket.handshake("${i + 2}.${i + 2}")
            c.socket.drop(4201)
            assertEquals(CONNECTING, c.bird.connectionState, "retried at once, held by the floor only")
            assertEquals(listOf(100L), c.clock.pending(), "short ${i + 1}: the minimum attempt interval only")
            c.clock.advance(100)
        }
        c.socket.handshake("8.8")
        c.socket.drop(4201)
        assertEquals(UNAVAILABLE, c.bird.connectionState)
        assertEquals(listOf(1000L), c.clock.pending(), "a server ending every connection at once is backed off")
    }

    @Test
    fun `4100-4199, 4300-4399 and network failures back off in unavailable`() {
        for (code in listOf(4100, 4301, 1006, 1001)) {
            val c = TestClient()
            c.connectNow()
            c.clock.advance(10_000)
            c.socket.drop(code)
            assertEquals(UNAVAILABLE, c.bird.connectionState, "code $code")
            assertEquals(1, c.sockets.size)
        }
    }

    @Test
    fun `a handshake without a socket id is reported, the socket closed, and the attempt retried on the backoff`() {
        val c = TestClient()
        c.bird.connect()
        c.socket.receive("bird:connection_established", mapOf("activity_timeout" to 120))
        assertEquals(RealtimeError.Type.HANDSHAKE, c.errors.last().type)
        assertNotNull(c.sockets[0].closed)
        assertEquals(UNAVAILABLE, c.bird.connectionState)
    }

    @Test
    fun `an attempt with no handshake within the connect timeout is given up and retried`() {
        val c = TestClient()
        c.bird.connect()
        c.clock.advance(30_000)
        assertNotNull(c.sockets[0].closed)
        assertEquals(UNAVAILABLE, c.bird.connectionState)
        assertTrue(c.errors.last().message.contains("connect timeout"))
    }

    @Test
    fun `frames from an old socket are ignored once a new one is up`() {
        val c = TestClient()
        val old = c.connectNow("1.1")
        old.drop(1006)
        c.clock.advance(1000)
        c.socket.handshake("2.2")
        old.handshake("1.1")
        old.drop(4009)
        assertEquals(CONNECTED, c.bird.connectionState)
        assertEquals("2.2", c.bird.connectionId)
    }

    @Test
    fun `disconnect() keeps channels, connect() resubscribes them`() {
        val c = TestClient()
        c.connectNow()
        c.bird.subscribe("news")
        c.bird.disconnect()
        c.bird.connect()
        c.socket.handshake("2.2")
        assertEquals(listOf(JsonValue.from(mapOf("channel" to "news"))), c.socket.framesOf("bird:subscribe").map { it.data })
    }

    @Test
    fun `a handler that throws is reported through onError and the others still run`() {
        val c = TestClient()
        val after = ArrayList<String>()
        c.bird.onConnectionStateChange { _, current -> if (current == CONNECTED) throw IllegalStateException("boom") }
        c.bird.onConnectionStateChange { _, current -> if (current == CONNECTED) after.add("ran") }
        c.connectNow()
        assertEquals(listOf("ran"), after)
        assertEquals(RealtimeError.Type.HANDLER, c.errors.last().type)
        assertTrue(c.errors.last().message.contains("boom"))
        c.bird.onError { throw IllegalStateException("in error") }
        c.socket.receive("bird:error", mapOf("message" to "x", "code" to 4300))
        assertEquals(CONNECTED, c.bird.connectionState, "a throwing error handler does not loop")
    }

    /** An Error, not an Exception: the client does not catch it from a handler (a bug, or out of memory). */
    private class HandlerBug : Error("a bug in the app's handler")

    @Test
    fun `an Error out of a handler leaves the event's later actions, which the next event performs before its own`() {
        val c = TestClient()
        c.bird.subscribe("a")
        c.bird.subscribe("b")
        var thrown = false
        c.bird.onConnectionStateChange { _, current ->
            if (current == CONNECTED && !thrown) {
                thrown = true
                throw HandlerBug()
            }
        }
        c.bird.connect()
        // The state change comes before the subscriptions: the Error leaves them unsent.
        assertThrows<HandlerBug> { c.socket.handshake() }
        assertEquals(emptyList<SentFrame>(), c.socket.framesOf("bird:subscribe"))
        c.bird.subscribe("d")
        assertEquals(listOf("a", "b", "d"), c.socket.framesOf("bird:subscribe").map { it.data?.get("channel")?.string },
            "the actions the Error left first, in order, then the new event's")
        assertEquals(CONNECTED, c.bird.connectionState)
        c.socket.receive("bird:error", mapOf("message" to "x", "code" to 4300))
        assertEquals(RealtimeError(RealtimeError.Type.SERVER, 4300, "x"), c.errors.last(), "the client goes on draining")
    }

    @Test
    fun `server errors not attributed to a channel arrive on onError with code and message`() {
        val c = TestClient()
        c.connectNow()
        c.socket.receive("bird:error", mapOf("message" to "over quota", "code" to 4100))
        assertEquals(RealtimeError(RealtimeError.Type.SERVER, 4100, "over quota"), c.errors.last())
    }

    @Test
    fun `a socket whose send queue is past its bound is dropped and retried`() {
        val c = TestClient({ it.copy(maxQueuedBytes = 10) })
        c.connectNow()
        c.socket.queuedBytes = 11
        c.socket.receive("bird:ping", emptyMap<String, Any>())
        assertEquals(UNAVAILABLE, c.bird.connectionState)
        assertTrue(c.errors.last().message.contains("send queue"))
    }

    @Test
    fun `frames that are not frames, binary frames and frames over 4 MiB are told, never fatal`() {
        val c = TestClient()
        val socket = c.connectNow()
        socket.receiveText("not json")
        socket.receiveText("x".repeat(Frame.MAX_SIZE + 1))
        assertEquals(listOf(RealtimeError.Type.PROTOCOL, RealtimeError.Type.PROTOCOL), c.errors.map { it.type })
        assertEquals(CONNECTED, c.bird.connectionState)
    }

    @Test
    fun `handlers run on the options' executor, in order`() {
        val queued = ArrayList<Runnable>()
        val c = TestClient({ it.copy(executor = java.util.concurrent.Executor { task -> queued.add(task) }) })
        val seen = ArrayList<ConnectionState>()
        c.bird.onConnectionStateChange { _, current -> seen.add(current) }
        c.connectNow()
        assertEquals(emptyList<ConnectionState>(), seen, "nothing runs on the deliverer's thread")
        queued.forEach { it.run() }
        assertEquals(listOf(CONNECTING, CONNECTED), seen)
    }
}
