package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

class ChannelsTest {
    /** A Pusher-style auth endpoint: signs the socket id, refuses `private-refused`, answers presence with `channel_data`. */
    private val channelAuth: (HttpCall) -> HttpOutcome? = { call ->
        val channel = call.form["channel_name"] ?: ""
        when {
            call.url == "/user-auth" -> json(200, mapOf("auth" to "user:${call.form["socket_id"]}", "user_data" to "{\"id\":\"ann\"}"))
            channel == "private-refused" -> json(403, "no")
            channel.startsWith("presence-") -> json(200, mapOf("auth" to "key:${call.form["socket_id"]}:$channel",
                "channel_data" to "{\"user_id\":\"ann\",\"user_info\":{\"name\":\"Ann\"}}"))
            else -> json(200, mapOf("auth" to "key:${call.form["socket_id"]}:$channel"))
        }
    }

    private fun data(vararg pairs: Pair<String, Any?>) = JsonValue.from(mapOf(*pairs))

    @Test
    fun `a public channel subscribes after the handshake and hears its events`() {
        val c = TestClient()
        val news = c.bird.subscribe("news")
        assertSame(news, c.bird.subscribe("news"), "the same object for the same name")
        val events = ArrayList<JsonValue?>()
        news.bind("update") { events.add(it.data) }
        val socket = c.connectNow()
        assertEquals(listOf(data("channel" to "news")), socket.framesOf("bird:subscribe").map { it.data })
        assertFalse(news.subscribed)
        var succeeded = 0
        news.bind(BirdProtocol.Event.SUBSCRIPTION_SUCCEEDED) { succeeded += 1 }
        socket.receive("bird_internal:subscription_succeeded", emptyMap<String, Any>(), "news")
        assertTrue(news.subscribed)
        assertEquals(1, succeeded)
        socket.receive("update", mapOf("price" to 3), "news")
        socket.receive("update", "not json", "news")
        assertEquals(listOf(data("price" to 3), JsonString("not json")), events)
    }

    @Test
    fun `a private channel is authorised for the socket id, and again for each new connection`() {
        val c = TestClient(answer = channelAuth)
        val channel = c.bird.subscribe("private-orders")
        c.connectNow("1.1")
        assertEquals(listOf(mapOf("socket_id" to "1.1", "channel_name" to "private-orders")), c.calls.map { it.form })
        assertEquals(listOf(data("channel" to "private-orders", "auth" to "key:1.1:private-orders")), c.socket.framesOf("bird:subscribe").map { it.data })
        c.socket.receive("bird_internal:subscription_succeeded", emptyMap<String, Any>(), "private-orders")
        c.socket.drop(1006)
        assertFalse(channel.subscribed, "subscriptions belong to the connection")
        c.clock.advance(1000)
        c.socket.handshake("2.2")
        assertEquals(mapOf("socket_id" to "2.2", "channel_name" to "private-orders"), c.calls.last().form)
        assertEquals(listOf("key:2.2:private-orders"), c.socket.framesOf("bird:subscribe").map { it.data?.get("auth")?.string })
    }

    @Test
    fun `an authorisation answered after the connection changed is discarded`() {
        val c = TestClient(answer = { call -> if (call.form["socket_id"] == "1.1") null else channelAuth(call) })
        c.bird.subscribe("private-orders")
        val first = c.connectNow("1.1")
        val held = c.calls.single()
        first.drop(1006)
        c.clock.advance(1000)
        val second = c.socket
        second.handshake("2.2")
        held.answer(json(200, mapOf("auth" to "key:1.1:private-orders")))
        assertEquals(emptyList<SentFrame>(), first.framesOf("bird:subscribe"))
        assertEquals(listOf("key:2.2:private-orders"), second.framesOf("bird:subscribe").map { it.data?.get("auth")?.string })
        assertTrue(held.cancelled, "the old request was cancelled when its socket ended")
    }

    @Test
    fun `trigger returns false unless connected and subscribed, and sends client events only`() {
        val c = TestClient(answer = channelAuth)
        val channel = c.bird.subscribe("private-chat")
        assertFalse(channel.trigger("client-typing", mapOf("on" to true)), "not connected")
        c.connectNow()
        assertFalse(channel.trigger("client-typing", emptyMap<String, Any>()), "not subscribed yet")
        c.socket.receive("bird_internal:subscription_succeeded", emptyMap<String, Any>(), "private-chat")
        assertFalse(channel.trigger("typing", emptyMap<String, Any>()), "not a client- event")
        assertTrue(channel.trigger("client-typing", mapOf("on" to true)))
        assertEquals(listOf(SentFrame("client-typing", "private-chat", data("on" to true))), c.socket.framesOf("client-typing"))
        c.socket.drop(1006)
        assertFalse(channel.trigger("client-typing", emptyMap<String, Any>()), "reconnecting")
        assertFalse(c.bird.subscribe("news").trigger("client-x", emptyMap<String, Any>()), "public channels take no client events")
    }

    @Test
    fun `a refused authorisation arrives as bird subscription_error on the channel`() {
        val c = TestClient(answer = channelAuth)
        val channel = c.bird.subscribe("private-refused")
        val errors = ArrayList<JsonValue?>()
        channel.bind(BirdProtocol.Event.SUBSCRIPTION_ERROR) { errors.add(it) }
        c.connectNow()
        assertEquals(1, errors.size)
        assertEquals("AuthError", errors[0]?.get("type")?.string)
        assertEquals(403L, errors[0]?.get("status")?.long)
        assertEquals(0, c.socket.framesOf("bird:subscribe").size)
    }

    @Test
    fun `an authorisation that never answers fails the subscription after the auth timeout`() {
        val c = TestClient(answer = { null })
        val channel = c.bird.subscribe("private-slow")
        val errors = ArrayList<JsonValue?>()
        channel.bind(BirdProtocol.Event.SUBSCRIPTION_ERROR) { errors.add(it) }
        c.connectNow()
        c.clock.advance(10_000)
        assertEquals(1, errors.size)
        assertTrue(errors[0]?.get("error")?.string!!.contains("within 10000 ms"))
        assertTrue(c.calls.single().cancelled)
    }

    @Test
    fun `presence - members, me, member_added and member_removed each once, replaced on resubscription`() {
        val c = TestClient(answer = channelAuth)
        val room = c.bird.subscribe("presence-room-1")
        assertTrue(room is PresenceChannel)
        val presence = room as PresenceChannel
        var rendered: List<PresenceMember>? = null
        room.bind(BirdProtocol.Event.SUBSCRIPTION_SUCCEEDED) { rendered = presence.members }
        val changes = ArrayList<String>()
        room.bind("bird:member_added") { changes.add("added ${it.data?.get("id")?.string}") }
        room.bind(BirdProtocol.Event.MEMBER_REMOVED) { changes.add("removed ${it?.get("id")?.string} ${it?.get("info")}") }
        c.connectNow()
        val channelData = JsonValue.parse(c.socket.framesOf("bird:subscribe")[0].data?.get("channel_data")?.string!!)
        assertEquals("ann", channelData["user_id"]?.string)
        c.socket.receive("bird_internal:subscription_succeeded",
            mapOf("presence" to mapOf("ids" to listOf("ann", "bob"), "hash" to mapOf("ann" to mapOf("name" to "Ann"), "bob" to mapOf("name" to "Bob")), "count" to 2)),
            "presence-room-1")
        assertEquals(listOf("ann", "bob"), rendered?.map { it.id })
        assertEquals(2, presence.memberCount)
        assertEquals(PresenceMember("ann", data("name" to "Ann")), presence.me)
        assertEquals(PresenceMember("bob", data("name" to "Bob")), presence.member("bob"))
        c.socket.receive("bird_internal:member_added", mapOf("user_id" to "cid", "user_info" to mapOf("name" to "Cid")), "presence-room-1")
        c.socket.receive("bird_internal:member_added", mapOf("user_id" to "cid", "user_info" to mapOf("name" to "Cid")), "presence-room-1")
        c.socket.receive("bird_internal:member_removed", mapOf("user_id" to "bob"), "presence-room-1")
        c.socket.receive("bird_internal:member_removed", mapOf("user_id" to "nobody"), "presence-room-1")
        assertEquals(listOf("added cid", "removed bob {\"name\":\"Bob\"}"), changes)
        assertEquals(listOf("ann", "cid"), presence.members.map { it.id })
        c.socket.drop(1006)
        assertEquals(0, presence.memberCount, "no stale members after a drop")
        c.clock.advance(1000)
        c.socket.handshake("2.2")
        c.socket.receive("bird_internal:subscription_succeeded", mapOf("presence" to mapOf("ids" to listOf("ann"), "hash" to mapOf("ann" to emptyMap<String, Any>()), "count" to 1)), "presence-room-1")
        assertEquals(1, presence.memberCount)
    }

    @Test
    fun `client events on a presence channel carry the sender's user_id`() {
        val c = TestClient()
        val channel = c.bird.subscribe("presence-room-2")
        val seen = ArrayList<ChannelEvent>()
        channel.bind("client-wave") { seen.add(it) }
        val socket = c.connectNow()
        socket.receiveText("""{"event":"client-wave","channel":"presence-room-2","data":"{\"x\":1}","user_id":"bob"}""")
        assertEquals(listOf(ChannelEvent("presence-room-2", "client-wave", data("x" to 1), "bob")), seen)
    }

    @Test
    fun `an unsubscribed channel is never resubscribed`() {
        val c = TestClient()
        val news = c.bird.subscribe("news")
        val socket = c.connectNow()
        news.unsubscribe()
        assertEquals(listOf(data("channel" to "news")), socket.framesOf("bird:unsubscribe").map { it.data })
        assertNull(c.bird.channel("news"))
        socket.drop(1006)
        c.clock.advance(1000)
        c.socket.handshake("2.2")
        assertEquals(emptyList<SentFrame>(), c.socket.framesOf("bird:subscribe"))
    }

    @Test
    fun `bindAll hears every event after its own handlers, and a throwing handler is reported`() {
        val c = TestClient()
        val news = c.bird.subscribe("news")
        val order = ArrayList<String>()
        news.bindAll { order.add("all ${it.event}") }
        news.bind("update") { order.add("own"); throw IllegalStateException("bad handler") }
        val socket = c.connectNow()
        socket.receive("update", emptyMap<String, Any>(), "news")
        assertEquals(listOf("own", "all update"), order)
        assertTrue(c.errors.last().message.contains("bad handler"))
    }

    @Test
    fun `signin() signs in on every connection, failures arrive on onSigninError`() {
        var refuse = false
        val c = TestClient(answer = { call -> if (refuse) json(403, "no") else channelAuth(call) })
        val failures = ArrayList<AuthFailure>()
        c.bird.onSigninError { failures.add(it) }
        c.connectNow("1.1")
        c.bird.signin()
        assertEquals(listOf("/user-auth" to mapOf("socket_id" to "1.1")), c.calls.map { it.url to it.form })
        assertEquals(listOf(data("auth" to "user:1.1", "user_data" to "{\"id\":\"ann\"}")), c.socket.framesOf("bird:signin").map { it.data })
        c.socket.receive("bird:signin_success", mapOf("user_data" to "{\"id\":\"ann\"}"))
        assertEquals("{\"id\":\"ann\"}", c.bird.userData)
        c.socket.drop(1006)
        c.clock.advance(1000)
        c.socket.handshake("2.2")
        assertEquals(listOf("user:2.2"), c.socket.framesOf("bird:signin").map { it.data?.get("auth")?.string }, "signed in again, for the new id")
        c.socket.receive("bird:error", mapOf("code" to 4009, "message" to "bad signature"))
        assertEquals(1, failures.size)
        assertEquals(AuthFailure.Kind.REFUSED, failures[0].kind)
        refuse = true
        c.socket.drop(1006)
        c.clock.advance(2000)
        c.socket.handshake("3.3")
        assertEquals(2, failures.size)
        assertEquals(403, failures[1].status)
    }

    @Test
    fun `encrypted channels are refused as not supported yet, never read as plaintext`() {
        val c = TestClient(answer = channelAuth)
        val channel = c.bird.subscribe("private-encrypted-x")
        val errors = ArrayList<JsonValue?>()
        channel.bind(BirdProtocol.Event.SUBSCRIPTION_ERROR) { errors.add(it) }
        c.connectNow()
        assertTrue(errors.single()?.get("error")?.string!!.contains("not supported"))
        assertEquals(0, c.calls.size)
    }

    @Test
    fun `a presence channel lists at most 10,000 members`() {
        val c = TestClient(answer = channelAuth)
        val room = c.bird.subscribe("presence-big") as PresenceChannel
        c.connectNow()
        val ids = (0 until 10_001).map { "u$it" }
        c.socket.receive("bird_internal:subscription_succeeded", mapOf("presence" to mapOf("ids" to ids, "hash" to emptyMap<String, Any>(), "count" to ids.size)), "presence-big")
        assertEquals(ChannelMachine.MAX_PRESENCE_MEMBERS, room.memberCount)
        c.socket.receive("bird_internal:member_added", mapOf("user_id" to "late"), "presence-big")
        assertEquals(ChannelMachine.MAX_PRESENCE_MEMBERS, room.memberCount)
    }
}
