package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Assertions.assertSame
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test

class RoomsTest {
    private class Joined(val c: TestClient, val room: Room, val socket: FakeSocket)

    /** A client connected, with [name] joined (token asked, join answered with `joined` at [epoch], [id]). */
    private fun joinedRoom(name: String = "order:1042", epoch: String = "e1", id: Long = 0, configure: (BirdRealtimeOptions) -> BirdRealtimeOptions = { it }): Joined {
        val c = TestClient(configure)
        val socket = c.connectNow()
        val room = c.bird.join(name)
        c.clock.advance(10)
        socket.receive("bird:room_event", mapOf("event" to "joined", "data" to mapOf("epoch" to epoch, "id" to id, "count" to 1)), name)
        return Joined(c, room, socket)
    }

    private fun kept(socket: FakeSocket, room: String, id: Long, data: Map<String, Any?> = emptyMap(), from: String? = null, replayed: Boolean? = null) {
        val meta = LinkedHashMap<String, Any?>()
        meta["id"] = id
        meta["at"] = 1_700_000_000_000L + id
        meta["from"] = from
        if (replayed != null) meta["replayed"] = replayed
        socket.receive("bird:room_event", mapOf("event" to "updated", "data" to data, "meta" to meta), room)
    }

    private fun joinedFrame(socket: FakeSocket, room: String, vararg data: Pair<String, Any?>) =
        socket.receive("bird:room_event", mapOf("event" to "joined", "data" to mapOf(*data)), room)

    private fun readyError(room: Room): String? {
        var code: String? = "pending"
        room.ready { code = it?.code }
        return code
    }

    @Test
    fun `join gives the same room for the same name, room(name) the one joined, or null`() {
        val c = TestClient()
        val order = c.bird.join("order:1042")
        assertSame(order, c.bird.join("order:1042"))
        assertSame(order, c.bird.room("order:1042"))
        assertNull(c.bird.room("order:7"))
        assertEquals(RoomState.JOINING, order.state)
    }

    @Test
    fun `40 rooms joined in one moment are asked for in one auth request, with the options' headers`() {
        val c = TestClient({ it.copy(authHeaders = mapOf("X-User" to "ann")) }, { roomAuthAnswer(it, refuse = mapOf("order:13" to "forbidden")) })
        val socket = c.connectNow()
        val rooms = (0 until 40).map { c.bird.join("order:$it") }
        c.clock.advance(10)
        assertEquals(1, c.calls.size)
        assertEquals(40, c.calls[0].rooms.size)
        assertEquals("ann", c.calls[0].headers["X-User"])
        assertEquals(39, socket.framesOf("bird:room_join").size, "every room but the forbidden one joins")
        assertEquals(RoomState.FAILED, rooms[13].state)
        assertEquals("forbidden", rooms[13].error?.code)
        assertEquals("forbidden", readyError(rooms[13]))
        assertEquals(RoomState.JOINING, rooms[12].state, "the others are not failed by it")
    }

    @Test
    fun `more than 100 rooms - a client joins at most 100, asked in one request`() {
        val c = TestClient()
        c.connectNow()
        for (i in 0 until 100) c.bird.join("r:$i")
        val extra = c.bird.join("r:100")
        assertEquals(RoomState.FAILED, extra.state)
        assertEquals("too_many_rooms", extra.error?.code)
        c.clock.advance(10)
        assertEquals(1, c.calls.size)
        assertEquals(100, c.calls[0].rooms.size)
    }

    @Test
    fun `joined - ready() resumes, the room's own event is heard, events arrive with their meta`() {
        val c = TestClient()
        val socket = c.connectNow()
        val order = c.bird.join("order:1042")
        var ready: String? = "pending"
        order.ready { ready = it?.code }
        var live = false
        order.on("joined") { _, _ -> live = true }
        val updates = ArrayList<Pair<String?, RoomEventMeta>>()
        order.on("updated") { data, meta -> updates.add(data["status"]?.string to meta) }
        c.clock.advance(10)
        assertEquals(listOf(JsonValue.from(mapOf("room" to "order:1042", "token" to "token-order:1042"))), socket.framesOf("bird:room_join").map { it.data })
        assertEquals("pending", ready)
        joinedFrame(socket, "order:1042", "epoch" to "e1", "id" to 41, "count" to 2)
        assertNull(ready)
        assertTrue(live)
        assertEquals(RoomState.JOINED, order.state)
        assertEquals(2L, order.count)
        kept(socket, "order:1042", 42, mapOf("status" to "paid"), from = "ann")
        assertEquals(listOf("paid" to RoomEventMeta(42, 1_700_000_000_042L, "ann", false, "e1")), updates)
        assertEquals(RoomPosition("e1", 42), order.position)
    }

    @Test
    fun `duplicates are dropped by id`() {
        val j = joinedRoom("order:1", id = 5)
        val ids = ArrayList<Long>()
        j.room.on("updated") { _, meta -> ids.add(meta.id) }
        for (id in listOf(5L, 6L, 6L, 4L, 7L, 7L)) kept(j.socket, "order:1", id)
        assertEquals(listOf(6L, 7L), ids)
    }

    @Test
    fun `a hole rejoins from the position on the same socket, the replay fills it in order`() {
        val j = joinedRoom("order:1", id = 5)
        val seen = ArrayList<Pair<Long, Boolean>>()
        j.room.on("updated") { _, meta -> seen.add(meta.id to meta.replayed) }
        kept(j.socket, "order:1", 6)
        kept(j.socket, "order:1", 9)
        assertEquals(JsonValue.from(mapOf("epoch" to "e1", "id" to 6)), j.socket.framesOf("bird:room_join").last().data?.get("since"))
        kept(j.socket, "order:1", 10) // held: the replay brings it
        kept(j.socket, "order:1", 7, replayed = true)
        kept(j.socket, "order:1", 8, replayed = true)
        kept(j.socket, "order:1", 9, replayed = true)
        joinedFrame(j.socket, "order:1", "epoch" to "e1", "id" to 9, "recovered" to true)
        kept(j.socket, "order:1", 10)
        assertEquals(listOf(6L to false, 7L to true, 8L to true, 9L to true, 10L to false), seen)
    }

    @Test
    fun `after a drop the room rejoins with since, the missed events come first with replayed, and no auth request is made`() {
        val j = joinedRoom("order:1042", id = 41)
        val seen = ArrayList<Triple<Long, Boolean, Long?>>()
        j.room.on("updated") { data, meta -> seen.add(Triple(meta.id, meta.replayed, data["n"]?.long)) }
        kept(j.socket, "order:1042", 42, mapOf("n" to 1))
        j.socket.drop(1006)
        assertEquals(RoomState.JOINING, j.room.state)
        j.c.clock.advance(1000)
        val next = j.c.socket
        next.handshake("2.2")
        assertEquals(listOf(JsonValue.from(mapOf("room" to "order:1042", "token" to "token-order:1042", "since" to mapOf("epoch" to "e1", "id" to 42)))),
            next.framesOf("bird:room_join").map { it.data })
        kept(next, "order:1042", 42, mapOf("n" to 1), replayed = true)
        kept(next, "order:1042", 43, mapOf("n" to 2), replayed = true)
        kept(next, "order:1042", 44, mapOf("n" to 3), replayed = true)
        joinedFrame(next, "order:1042", "epoch" to "e1", "id" to 44, "recovered" to true)
        kept(next, "order:1042", 45, mapOf("n" to 4))
        assertEquals(1, j.c.calls.size, "the token kept across the drop: no second auth request")
        assertEquals(listOf(Triple(42L, false, 1L), Triple(43L, true, 2L), Triple(44L, true, 3L), Triple(45L, false, 4L)), seen)
        assertEquals(RoomState.JOINED, j.room.state)
    }

    @Test
    fun `a rejoin whose streamed replay is still coming at its deadline is given more time, one that stops is retried`() {
        val j = joinedRoom("order:1042", id = 41)
        var seen = 0
        j.room.on("updated") { _, _ -> seen += 1 }
        j.socket.drop(1006)
        j.c.clock.advance(1000)
        val next = j.c.socket
        next.handshake("2.2")
        fun joins() = next.framesOf("bird:room_join").size
        assertEquals(1, joins())
        for (id in 42L..300L) kept(next, "order:1042", id, mapOf("n" to id), replayed = true)
        j.c.clock.advance(10_000)
        assertEquals(1, joins(), "the replay moved the position: no retry at the deadline")
        assertEquals(RoomState.JOINING, j.room.state)
        kept(next, "order:1042", 301, mapOf("n" to 301), replayed = true)
        j.c.clock.advance(10_000)
        assertEquals(1, joins(), "it moved again before the next deadline")
        j.c.clock.advance(15_000)
        assertTrue(joins() >= 2, "no progress since the last deadline: retried from the position")
        assertEquals(JsonValue.from(mapOf("epoch" to "e1", "id" to 301)), next.framesOf("bird:room_join")[1].data?.get("since"))
        assertEquals(260, seen)
    }

    @Test
    fun `an unrecoverable gap is told on the room as error not_recovered, never silently`() {
        val j = joinedRoom("order:1", id = 10)
        val errors = ArrayList<JsonValue>()
        j.room.on("error") { error, _ -> errors.add(error) }
        j.socket.drop(1006)
        j.c.clock.advance(1000)
        j.c.socket.handshake("2.2")
        joinedFrame(j.c.socket, "order:1", "epoch" to "e2", "id" to 3, "recovered" to false, "reason" to "epoch_changed")
        assertEquals(1, errors.size)
        assertEquals("not_recovered", errors[0]["code"]?.string)
        assertEquals("epoch_changed", errors[0]["reason"]?.string)
        assertEquals(RoomPosition("e2", 3), j.room.position, "the position is the room's now")
        assertEquals("not_recovered", j.room.error?.code)
    }

    /** A room joined at ([epoch], [id]), dropped, and its rejoin sent on a new socket: what the server answers comes next. */
    private fun rejoining(epoch: String, id: Long): Pair<Joined, ArrayList<List<Any?>>> {
        val j = joinedRoom("order:1", epoch = epoch, id = id)
        val seen = ArrayList<List<Any?>>()
        j.room.onAny { event, data, meta ->
            seen.add(if (event == "updated") listOf(meta.id, meta.replayed, meta.epoch) else listOf(event, data["gap"] ?: data["reason"]))
        }
        j.socket.drop(1006)
        j.c.clock.advance(1000)
        j.c.socket.handshake("2.2")
        return j to seen
    }

    private fun gapFrame(socket: FakeSocket, gap: Map<String, Any?>) =
        socket.receive("bird:room_event", mapOf("event" to "gap", "data" to gap), "order:1")

    @Test
    fun `a gap before the replay - told once with its exact ids, the position moved past it, the kept events in order after it`() {
        val (j, seen) = rejoining("e1", 10)
        val next = j.c.socket
        val gap = mapOf("reason" to "expired", "epoch" to "e1", "first" to 11, "last" to 14, "before" to 1_700_000_000_015L)
        gapFrame(next, gap)
        assertEquals(RoomPosition("e1", 14), j.room.position)
        kept(next, "order:1", 15, replayed = true)
        kept(next, "order:1", 16, replayed = true)
        joinedFrame(next, "order:1", "epoch" to "e1", "id" to 16, "recovered" to false, "reason" to "expired")
        kept(next, "order:1", 17)
        assertEquals(listOf(listOf("error", JsonValue.from(gap)), listOf(15L, true, "e1"), listOf(16L, true, "e1"), listOf(17L, false, "e1")),
            seen.filter { it[0] != "joined" })
        assertEquals(RoomGap("expired", "e1", 11, 14, 1_700_000_000_015L, null), j.room.error?.gap)
        assertTrue(j.room.error?.message?.contains("ids 11…14 of epoch e1") == true, j.room.error?.message)
        assertEquals(1, next.framesOf("bird:room_join").size, "no rejoin for a hole")
    }

    @Test
    fun `an epoch change - the gap names the lost epoch, every event of the new one is delivered, ids from 1, never dropped as duplicates`() {
        val (j, seen) = rejoining("e1", 10)
        val next = j.c.socket
        gapFrame(next, mapOf("reason" to "epoch_changed", "epoch" to "e2", "before" to 1_700_000_000_001L, "previous" to mapOf("epoch" to "e1", "id" to 10)))
        assertEquals(RoomPosition("e2", 0), j.room.position)
        for (id in 1L..3L) kept(next, "order:1", id, replayed = true)
        joinedFrame(next, "order:1", "epoch" to "e2", "id" to 3, "recovered" to false, "reason" to "epoch_changed")
        assertEquals(listOf(listOf(1L, true, "e2"), listOf(2L, true, "e2"), listOf(3L, true, "e2")), seen.filter { it[0] is Long })
        assertEquals(1, seen.count { it[0] == "error" }, "told once")
        assertEquals(RoomGap("epoch_changed", "e2", null, null, 1_700_000_000_001L, RoomPosition("e1", 10)), j.room.error?.gap)
        assertEquals(RoomPosition("e2", 3), j.room.position)
    }

    @Test
    fun `a gap with no rejoin asked, behind the position, or not of its shape is ignored and reported`() {
        val j = joinedRoom("order:1", id = 10)
        val errors = ArrayList<String>()
        j.c.bird.onError { errors.add(it.message ?: "") }
        gapFrame(j.socket, mapOf("reason" to "expired", "epoch" to "e1", "first" to 11, "last" to 90))
        assertEquals(RoomPosition("e1", 10), j.room.position, "no join in flight: nothing moves")
        j.socket.drop(1006)
        j.c.clock.advance(1000)
        j.c.socket.handshake("2.2")
        for (gap in listOf(mapOf("reason" to "expired", "epoch" to "e1", "first" to 3, "last" to 5), mapOf("reason" to "expired", "epoch" to "e1", "first" to 12),
            mapOf("reason" to "expired", "epoch" to ""), mapOf("reason" to "expired", "epoch" to "e1", "first" to 12, "last" to 11),
            mapOf("reason" to "expired", "epoch" to "e1", "first" to 1.5, "last" to 2), mapOf("reason" to "expired", "epoch" to "e1", "previous" to mapOf("epoch" to 3, "id" to 1)),
            mapOf("reason" to "expired", "epoch" to "e1", "first" to 12, "last" to 20),
            mapOf("reason" to "epoch_changed", "epoch" to "e2", "first" to 5, "last" to 9, "previous" to mapOf("epoch" to "e1", "id" to 10)),
            mapOf("reason" to "epoch_changed", "epoch" to "e2", "previous" to mapOf("epoch" to "e1", "id" to 9)), mapOf("reason" to "epoch_changed", "epoch" to "e2"))) {
            gapFrame(j.c.socket, gap)
        }
        assertEquals(RoomPosition("e1", 10), j.room.position)
        assertNull(j.room.error)
        assertEquals(11, errors.count { it.startsWith("a gap for order:1") }, errors.joinToString("\n"))
    }

    @Test
    fun `after a gap, a joined past where the replay reached is a hole - rejoined from the position, never a silent skip`() {
        val (j, seen) = rejoining("e1", 10)
        val next = j.c.socket
        gapFrame(next, mapOf("reason" to "expired", "epoch" to "e1", "first" to 11, "last" to 14))
        kept(next, "order:1", 15, replayed = true)
        joinedFrame(next, "order:1", "epoch" to "e1", "id" to 20, "recovered" to false, "reason" to "expired")
        assertEquals(listOf(JsonValue.from(mapOf("epoch" to "e1", "id" to 10)), JsonValue.from(mapOf("epoch" to "e1", "id" to 15))),
            next.framesOf("bird:room_join").map { it.data?.get("since") }, "rejoined from 15")
        assertEquals(RoomPosition("e1", 15), j.room.position)
        assertEquals(1, seen.count { it[0] == "error" }, "the gap told once; the hole is not a loss yet")
    }

    @Test
    fun `a replay that keeps stopping short is rejoined at most 3 times, then the gap is told and events flow`() {
        val j = joinedRoom("order:1", id = 1)
        val errors = ArrayList<String?>()
        val ids = ArrayList<Long>()
        j.room.on("error") { error, _ -> errors.add(error["code"]?.string) }
        j.room.on("updated") { _, meta -> ids.add(meta.id) }
        kept(j.socket, "order:1", 3)
        repeat(3) { joinedFrame(j.socket, "order:1", "epoch" to "e1", "id" to 3) }
        assertEquals(4, j.socket.framesOf("bird:room_join").size, "the first join and 3 rejoins, no more")
        assertEquals(listOf("not_recovered"), errors)
        assertEquals(RoomPosition("e1", 3), j.room.position)
        kept(j.socket, "order:1", 4)
        assertEquals(listOf(4L), ids, "events flow again")
    }

    @Test
    fun `tokens are kept until 10 minutes before they expire in the server's time, then asked for again`() {
        // The server's clock is far from the client's: only the difference counts.
        val c = TestClient(answer = { roomAuthAnswer(it, time = 42, life = 3_600_000) })
        val socket = c.connectNow("1.1", 86_400) // no pings in the way for an hour
        val room = c.bird.join("order:1")
        c.clock.advance(10)
        joinedFrame(socket, "order:1", "epoch" to "e1", "id" to 0)
        assertEquals(1, c.calls.size)
        c.clock.advance(50 * 60_000L - 1) // 50 minutes after the answer, less 1 ms
        assertEquals(1, c.calls.size, "still kept 1 ms before 50 minutes")
        c.clock.advance(1)
        c.clock.advance(10)              // the batching window
        assertEquals(2, c.calls.size, "asked again 10 minutes before expiry")
        assertEquals(listOf(JsonValue.from(mapOf("room" to "order:1", "token" to "token-order:1"))), socket.framesOf("bird:room_refresh").map { it.data })
        assertEquals(RoomState.JOINED, room.state)
    }

    @Test
    fun `a short token is kept for half its life`() {
        assertEquals(RoomToken("t", 1000 + 300_000), RoomTokens.makeToken("t", 600_000, 0, 1000))
        assertEquals(RoomToken("t", 1000 + 50 * 60_000), RoomTokens.makeToken("t", 10_000 + 3_600_000, 10_000, 1000))
    }

    @Test
    fun `a reconnect after the token's keep time asks the auth route again`() {
        val j = joinedRoom("order:1")
        j.c.bird.disconnect()
        assertEquals(emptyList<Long>(), j.c.clock.pending(), "disconnect() leaves nothing scheduled, joined rooms included")
        j.c.clock.advance(51 * 60_000L)
        j.c.bird.connect()
        j.c.socket.handshake("2.2")
        j.c.clock.advance(10)
        assertEquals(2, j.c.calls.size)
    }

    @Test
    fun `public rooms join with the grants of config(), with no auth request`() {
        val grants = RoomGrants.parse("""{"time": 0, "grants": [{"pattern": "news:{topic}", "token": "grant-news", "expires": 86400000}]}""")
        val c = TestClient({ it.copy(grants = grants) })
        val socket = c.connectNow()
        c.bird.join("news:sport")
        c.clock.advance(10)
        assertEquals(0, c.calls.size)
        assertEquals(listOf(JsonValue.from(mapOf("room" to "news:sport", "token" to "grant-news"))), socket.framesOf("bird:room_join").map { it.data })
        assertTrue(RoomTokens.matchesPattern("chat:34:42", "chat:{a}:{b}"))
        assertTrue(!RoomTokens.matchesPattern("news:a:b", "news:{topic}"))
    }

    @Test
    fun `auth route failures - 401 asked once more, 403 fails every room of the request, 500 retried then failed`() {
        val statuses = ArrayList(listOf(401, 401))
        val c = TestClient(answer = { json(if (statuses.isEmpty()) 500 else statuses.removeAt(0), "x") })
        c.connectNow()
        val a = c.bird.join("a:1")
        c.clock.advance(10)
        assertEquals(2, c.calls.size)
        assertEquals("unauthorized", a.error?.code)
        statuses.add(403)
        val b = c.bird.join("b:1")
        val d = c.bird.join("d:1")
        c.clock.advance(10)
        assertEquals("forbidden", b.error?.code)
        assertEquals("forbidden", d.error?.code)
        val e = c.bird.join("e:1")
        c.clock.advance(10)
        for (wait in listOf(1000L, 2000L, 4000L, 8000L)) c.clock.advance(wait)
        assertEquals("auth_failed", e.error?.code)
        assertEquals(2 + 1 + 5, c.calls.size, "two 401s, one 403, five tries of the 500")
    }

    @Test
    fun `join refusals - rate_limited retries with backoff, full ends the room`() {
        val j = joinedRoom("order:1")
        val other = j.c.bird.join("order:2")
        j.c.clock.advance(10)
        j.socket.receive("bird:room_event", mapOf("event" to "error", "data" to mapOf("code" to "rate_limited", "message" to "slow down")), "order:2")
        assertEquals(RoomState.JOINING, other.state)
        j.c.clock.advance(2000)
        assertEquals(2, j.socket.framesOf("bird:room_join").filter { it.data?.get("room")?.string == "order:2" }.size)
        j.socket.receive("bird:room_event", mapOf("event" to "error", "data" to mapOf("code" to "full", "message" to "full")), "order:2")
        assertEquals(RoomState.FAILED, other.state)
        assertEquals("full", other.error?.code)
    }

    @Test
    fun `a refused token asks for one new token, a second refusal is final`() {
        val j = joinedRoom("order:1")
        j.socket.receive("bird:room_event", mapOf("event" to "error", "data" to mapOf("code" to "expired", "message" to "expired")), "order:1")
        assertEquals(RoomState.JOINING, j.room.state)
        j.c.clock.advance(5000) // one auth request per room every 5 s
        j.c.clock.advance(10)
        assertEquals(2, j.c.calls.size)
        j.socket.receive("bird:room_event", mapOf("event" to "error", "data" to mapOf("code" to "expired", "message" to "expired")), "order:1")
        assertEquals(RoomState.FAILED, j.room.state)
        assertEquals("expired", j.room.error?.code)
    }

    @Test
    fun `kicked ends the room`() {
        val j = joinedRoom()
        val heard = ArrayList<JsonValue>()
        j.room.on("kicked") { data, _ -> heard.add(data) }
        j.socket.receive("bird:room_event", mapOf("event" to "kicked", "data" to mapOf("reason" to "bye")), "order:1042")
        assertEquals(listOf(JsonValue.from(mapOf("reason" to "bye"))), heard)
        assertEquals(RoomState.FAILED, j.room.state)
        assertEquals("kicked", j.room.error?.code)
    }

    @Test
    fun `presence rooms list members from joined, join and leave`() {
        val c = TestClient()
        val socket = c.connectNow()
        val room = c.bird.join("chat:1")
        c.clock.advance(10)
        joinedFrame(socket, "chat:1", "epoch" to "e", "id" to 0, "count" to 2, "members" to listOf(mapOf("id" to "ann"), mapOf("id" to "bob", "info" to mapOf("name" to "Bob"))))
        socket.receive("bird:room_event", mapOf("event" to "join", "data" to mapOf("id" to "cid")), "chat:1")
        socket.receive("bird:room_event", mapOf("event" to "leave", "data" to mapOf("id" to "ann")), "chat:1")
        socket.receive("bird:room_event", mapOf("event" to "count", "data" to mapOf("n" to 2)), "chat:1")
        assertEquals(listOf("bob", "cid"), room.members.map { it.id })
        assertEquals(2L, room.count)
    }

    @Test
    fun `send only while joined, reserved names refused, the frame carries the data as JSON text`() {
        val c = TestClient()
        val socket = c.connectNow()
        val room = c.bird.join("chat:1")
        assertEquals("not_joined", assertThrows<RoomError> { room.send("message", mapOf("text" to "hi")) }.code)
        c.clock.advance(10)
        joinedFrame(socket, "chat:1", "epoch" to "e", "id" to 0)
        assertEquals("not_allowed", assertThrows<RoomError> { room.send("joined", emptyMap<String, Any>()) }.code)
        assertEquals("bad_request", assertThrows<RoomError> { room.send("big", "x".repeat(20_000)) }.code)
        room.send("message", mapOf("text" to "hi", "blob" to byteArrayOf(1, 2)))
        assertEquals(listOf(JsonValue.from(mapOf("room" to "chat:1", "event" to "message", "data" to "{\"text\":\"hi\",\"blob\":{\"\$binary\":\"AQI=\"}}"))),
            socket.framesOf("bird:room_send").map { it.data })
    }

    @Test
    fun `history pages are asked for and answered, a drop fails the request in flight`() {
        val j = joinedRoom("chat:1", "e", 3)
        var page: HistoryPage? = null
        j.room.history(null, 2) { answer, _ -> page = answer }
        val request = j.socket.framesOf("bird:room_history")[0].data!!
        assertEquals(JsonValue.from(mapOf("room" to "chat:1", "request" to request["request"]?.string, "limit" to 2)), request)
        j.socket.receive("bird:room_history", mapOf("request" to request["request"]?.string, "more" to true, "events" to listOf(
            mapOf("event" to "line", "data" to mapOf("t" to "a"), "meta" to mapOf("id" to 2, "at" to 5, "from" to "ann")),
            mapOf("event" to "line", "data" to mapOf("t" to "b"), "meta" to mapOf("id" to 3, "at" to 6, "from" to null)))), "chat:1")
        assertEquals(true, page?.more)
        assertEquals(listOf("a" to "ann", "b" to null), page?.events?.map { it.data["t"]?.string to it.meta.from })
        assertEquals(listOf(2L, 3L), page?.events?.map { it.meta.id })
        var older: String? = "pending"
        j.room.history(2, 50) { _, error -> older = error?.code }
        assertEquals(2L, j.socket.framesOf("bird:room_history")[1].data?.get("before")?.long)
        j.socket.drop(1006)
        assertEquals("disconnected", older)
    }

    @Test
    fun `history and ready as suspend functions`() {
        val j = joinedRoom("chat:1", "e", 3)
        val page = startSuspending {
            j.room.ready()
            j.room.history(limit = 10)
        }
        assertEquals(false, page.done, "waiting for the server's page")
        val request = j.socket.framesOf("bird:room_history").single().data?.get("request")?.string
        j.socket.receive("bird:room_history", mapOf("request" to request, "more" to false, "events" to emptyList<Any>()), "chat:1")
        assertEquals(true, page.done)
        assertEquals(HistoryPage(emptyList(), false), page.value)
        val other = j.c.bird.join("order:9")
        val waiting = startSuspending { other.ready() }
        assertEquals(false, waiting.done, "joining")
        other.leave()
        assertEquals("left", (waiting.error as RoomError).code)
    }

    @Test
    fun `leave sends room_leave, forgets the room, and ready() ends with left`() {
        val j = joinedRoom()
        j.room.leave()
        assertEquals(listOf(JsonValue.from(mapOf("room" to "order:1042"))), j.socket.framesOf("bird:room_leave").map { it.data })
        assertEquals(RoomState.LEFT, j.room.state)
        assertNull(j.c.bird.room("order:1042"))
        assertEquals("left", readyError(j.room))
        kept(j.socket, "order:1042", 1)
        j.socket.drop(1006)
        j.c.clock.advance(1000)
        j.c.socket.handshake("2.2")
        assertEquals(0, j.c.socket.framesOf("bird:room_join").size, "never rejoined")
    }

    @Test
    fun `a room handler that throws is reported and the next handlers still run, off removes one`() {
        val j = joinedRoom("order:1")
        val ran = ArrayList<String>()
        j.room.on("updated") { _, _ -> throw IllegalStateException("bad handler") }
        j.room.onAny { event, _, _ -> ran.add(event) }
        kept(j.socket, "order:1", 1)
        assertEquals(listOf("updated"), ran)
        assertTrue(j.c.errors.last().message.contains("bad handler"))
        val second = j.room.onAny { _, _, _ -> ran.add("second") }
        j.room.off(second)
        kept(j.socket, "order:1", 2)
        assertEquals(listOf("updated", "updated"), ran)
    }

    @Test
    fun `ready() ends with disconnected when the connection fails (4001) or disconnect() is called, the room joins after connect()`() {
        val c = TestClient()
        val socket = c.connectNow()
        val room = c.bird.join("order:1")
        var failed: String? = "pending"
        room.ready { failed = it?.code }
        socket.drop(4001, "no such app")
        assertEquals("disconnected", failed)
        assertEquals(ConnectionState.FAILED, c.bird.connectionState)
        assertEquals(RoomState.JOINING, room.state, "not failed: connect() joins it")
        var stopped: String? = "pending"
        room.ready { stopped = it?.code }
        c.bird.disconnect()
        assertEquals("disconnected", stopped)
        var late: String? = "pending"
        room.ready { late = it?.code }
        assertEquals("disconnected", late, "asked while disconnected: answered at once, not after connect()")
        val next = c.connectNow("2.2")
        c.clock.advance(10)
        var ready: String? = "pending"
        room.ready { ready = it?.code }
        joinedFrame(next, "order:1", "epoch" to "e1", "id" to 0)
        assertNull(ready)
        assertEquals(RoomState.JOINED, room.state)
    }

    @Test
    fun `sealed rooms are refused as not supported yet, never read as plaintext`() {
        val c = TestClient(answer = { call ->
            json(200, mapOf("time" to 0, "rooms" to mapOf(call.rooms[0] to mapOf("token" to "t", "expires" to 3_600_000, "key" to "AAAA"))))
        })
        c.connectNow()
        val room = c.bird.join("secret:1")
        c.clock.advance(10)
        assertEquals("not_supported", room.error?.code)
    }

    @Test
    fun `a join unanswered within the auth timeout is sent again with backoff`() {
        val c = TestClient()
        val socket = c.connectNow()
        c.bird.join("order:1")
        c.clock.advance(10)
        assertEquals(1, socket.framesOf("bird:room_join").size)
        c.clock.advance(10_000)
        c.clock.advance(2000)
        assertEquals(2, socket.framesOf("bird:room_join").size)
    }

    @Test
    fun `the blocking ready() waits for joined, and times out`() {
        val j = joinedRoom("order:1")
        j.room.ready(10) // joined: at once
        val other = j.c.bird.join("order:2")
        assertEquals("timed_out", assertThrows<RoomError> { other.ready(20) }.code)
    }
}
