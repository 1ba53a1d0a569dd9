package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit

/**
 * The seeds' Kotlin snippets, as written (realtime-connection-lifecycle seed; the rooms seed's
 * "Joining" in Kotlin's shape): they compile against the API, and run.
 */
class SeedSnippetsTest {
    private val shown = CopyOnWriteArrayList<String>()
    private fun showReconnectingBanner() { shown.add("reconnecting") }
    private fun hideReconnectingBanner() { shown.add("connected") }
    private fun showSignedOutScreen() { shown.add("signed out") }
    private fun renderMembers(members: List<PresenceMember>) { shown.add("members ${members.map { it.id }}") }

    @Test
    fun `the lifecycle seed's snippets compile and run as written, on the default executor`() {
        val transitions = CountDownLatch(2)
        val seen = CopyOnWriteArrayList<String>()

        val bird = BirdRealtime(BirdRealtimeOptions(appKey = "your-app-key", region = "us1"))

        bird.onConnectionStateChange { previous, current ->
            println("$previous -> $current")
            if (current == ConnectionState.UNAVAILABLE) showReconnectingBanner()
            if (current == ConnectionState.CONNECTED) hideReconnectingBanner()
        }

        bird.onSigninError { error ->
            println("connection has no identity: ${error.message}")
        }

        val room = bird.subscribe("presence-room-1")
        if (room is PresenceChannel) {
            room.bind(BirdProtocol.Event.SUBSCRIPTION_SUCCEEDED) {
                renderMembers(room.members)
            }
        }

        room.bind(BirdProtocol.Event.SUBSCRIPTION_ERROR) { error ->
            println("could not join: $error")
        }

        bird.onError { error ->
            println("${error.code} ${error.message}")
        }

        bird.onError { error ->
            if (error.code == 4009) showSignedOutScreen()
        }

        bird.onConnectionStateChange { previous, current ->
            seen.add("$previous->$current")
            transitions.countDown()
        }
        bird.disconnect() // state: DISCONNECTED, no reconnect
        bird.connect() // reopens and re-subscribes

        assertTrue(transitions.await(10, TimeUnit.SECONDS), "handlers ran on the default executor: $seen")
        assertEquals(listOf("INITIALIZED->DISCONNECTED", "DISCONNECTED->CONNECTING"), seen.take(2))
        assertTrue(room is PresenceChannel)
        assertEquals("wss://ws-us1.realtime.bird.com/app/your-app-key?namespace=bird&client=kotlin&protocol=7", bird.options.endpointURL)
        bird.close()
    }

    @Test
    fun `the rooms seed's Joining snippet, in Kotlin's shape`() {
        val c = TestClient()
        c.connectNow()
        val rt = c.bird
        var status = "new"
        var live = false
        val codes = ArrayList<String>()

        val order = rt.join("order:1042")

        order.on("updated") { data, meta ->
            status = data["status"]?.string ?: status   // meta: from, id, at, replayed
            assertEquals(null, meta.from)
        }
        order.on("joined") { _, _ -> live = true }
        order.on("error") { error, _ -> codes.add(error["code"]?.string ?: "") }   // forbidden, no_rule, full, expired …

        assertEquals(RoomState.JOINING, order.state)            // JOINING, JOINED, FAILED, LEFT
        val ready = startSuspending { order.ready() }           // waits until joined, throws its error
        c.clock.advance(10)
        c.socket.receive("bird:room_event", mapOf("event" to "joined", "data" to mapOf("epoch" to "e", "id" to 0)), "order:1042")
        assertTrue(ready.done && ready.error == null)
        c.socket.receive("bird:room_event", mapOf("event" to "updated", "data" to mapOf("status" to "paid"), "meta" to mapOf("id" to 1, "at" to 5, "from" to null)), "order:1042")
        rt.leave("order:1042")    // or order.leave()

        assertEquals("paid", status)
        assertTrue(live)
        assertEquals(emptyList<String>(), codes)
        assertEquals(RoomState.LEFT, order.state)
    }
}
