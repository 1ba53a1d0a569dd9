package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestFactory
import java.io.File

/**
 * The shared transcripts (`Clients/conformance`): the same scripted server and clock as the
 * Swift and browser clients run, against this client's fakes. Room auth requests are held until
 * a step answers them.
 */
class ConformanceTest {
    private val root = File(System.getProperty("conformance.dir") ?: "../conformance")

    private fun read(file: File): JsonValue = JsonValue.parse(file.readText())

    @Test
    fun `the defaults are the shared table's (constants_json)`() {
        val constants = read(File(root, "constants.json"))
        val config = MachineConfig(namespace = "bird")
        val options = BirdRealtimeOptions(appKey = "app-key")
        val ours = mapOf(
            "backoff_base_ms" to config.backoff.base, "backoff_cap_ms" to config.backoff.cap,
            "stable_connection_ms" to config.stableConnectionDuration,
            "short_connection_allowance" to config.shortConnectionAllowance.toLong(),
            "minimum_attempt_interval_ms" to config.minimumAttemptInterval,
            "activity_timeout_ms" to options.activityTimeoutMillis, "pong_timeout_ms" to options.pongTimeoutMillis,
            "verify_pong_timeout_ms" to options.verifyPongTimeoutMillis, "connect_timeout_ms" to options.connectTimeoutMillis,
            "room_auth_batch_window_ms" to config.roomAuthBatchWindow, "room_minimum_auth_interval_ms" to RoomTokens.MINIMUM_AUTH_INTERVAL,
            "room_token_margin_ms" to RoomTokens.TOKEN_MARGIN, "room_max_per_auth_request" to RoomTokens.MAX_ROOMS_PER_REQUEST.toLong(),
            "room_max_auth_attempts" to RoomTokens.MAX_AUTH_ATTEMPTS.toLong(), "room_max_resyncs" to RoomFrames.MAX_RESYNCS.toLong(),
            "room_max_join_retries" to RoomFrames.MAX_JOIN_RETRIES.toLong(), "room_max_rooms" to RoomMachine.MAX_ROOMS.toLong()
        )
        for ((key, value) in ours) assertEquals(constants[key]?.long, value, key)
        val shared = (constants as JsonObject).fields.keys.filter { it != "source" }.toSet()
        assertEquals(shared, ours.keys, "every shared constant is checked")
    }

    @TestFactory
    fun transcripts(): List<DynamicTest> {
        val files = File(root, "transcripts").listFiles { file -> file.name.endsWith(".json") }!!.sortedBy { it.name }
        assertTrue(files.isNotEmpty(), "transcripts in $root")
        return files.map { file ->
            val transcript = read(file)
            DynamicTest.dynamicTest("${file.name}: ${transcript["title"]?.string}") { run(file.name, transcript) }
        }
    }

    /** What a room delivered: the app's events (event, data, id, epoch, replayed) and its errors (code, reason). */
    private class RoomSeen {
        val app = ArrayList<List<Any?>>()
        val errors = ArrayList<List<String?>>()
    }

    private fun run(name: String, transcript: JsonValue) {
        val c = TestClient(answer = { null })
        c.draw = transcript["draw"]?.number ?: 0.5
        val delivered = HashMap<String, ArrayList<Pair<String, JsonValue?>>>()
        val rooms = HashMap<String, RoomSeen>()
        val memberEvents = HashMap<String, ArrayList<String>>()
        val answered = HashMap<String, Int>()
        val callsTo = { url: String -> c.calls.filter { it.url == url } }
        val answer = { url: String, value: JsonValue, where: String ->
            val done = answered[url] ?: 0
            val calls = callsTo(url)
            assertTrue(done < calls.size, "$where: no request to answer")
            calls[done].answer(json(200, value.toString()))
            answered[url] = done + 1
        }
        transcript["steps"]!!.array!!.forEachIndexed { index, step ->
            val kind = step["step"]!!.string!!
            val where = "$name step ${index + 1} ($kind)"
            when (kind) {
                "connect" -> c.bird.connect()
                "disconnect" -> c.bird.disconnect()
                "handshake" -> c.socket.handshake(step["socket_id"]!!.string!!, step["activity_timeout"]?.int ?: 120)
                "close" -> c.socket.drop(step["code"]!!.int!!, step["reason"]?.string ?: "")
                "drop", "refuse" -> c.socket.drop(1006)
                "subscribe" -> {
                    val seen = ArrayList<Pair<String, JsonValue?>>()
                    delivered[step["channel"]!!.string!!] = seen
                    val members = ArrayList<String>()
                    memberEvents[step["channel"]!!.string!!] = members
                    c.bird.subscribe(step["channel"]!!.string!!).bindAll {
                        when {
                            it.event == "bird:member_added" -> members.add("+${it.data?.get("id")?.string}")
                            it.event == "bird:member_removed" -> members.add("-${it.data?.get("id")?.string}")
                            !it.event.startsWith("bird") -> seen.add(it.event to it.data)
                        }
                    }
                }
                "confirm" -> c.socket.receive("bird_internal:subscription_succeeded", step["data"]?.toString() ?: "{}", step["channel"]!!.string!!)
                "expect_channel_auth" -> assertEquals(
                    step["requests"]!!.array!!.map { mapOf("socket_id" to it["socket_id"]?.string, "channel_name" to it["channel_name"]?.string) },
                    callsTo("/auth").map { mapOf("socket_id" to it.form["socket_id"], "channel_name" to it.form["channel_name"]) }, where
                )
                "answer_channel_auth" -> answer("/auth", step["answer"]!!, where)
                "signin" -> c.bird.signin()
                "expect_signin_auth" -> assertEquals(
                    step["requests"]!!.array!!.map { mapOf("socket_id" to it["socket_id"]?.string) },
                    callsTo("/user-auth").map { mapOf("socket_id" to it.form["socket_id"]) }, where
                )
                "answer_signin_auth" -> answer("/user-auth", step["answer"]!!, where)
                "expect_members" -> {
                    val channel = c.bird.channel(step["channel"]!!.string!!) as PresenceChannel
                    assertEquals(step["ids"]!!.array!!.map { it.string!! }.sorted(), channel.members.map { it.id }.sorted(), where)
                    assertEquals(step["me"]?.string, channel.me?.id, where)
                }
                "expect_member_events" -> assertEquals(step["events"]!!.array!!.map { it.string }, memberEvents[step["channel"]!!.string!!] ?: emptyList<String>(), where)
                "server_event" -> c.socket.receive(step["event"]!!.string!!, step["data"]!!.toString(), step["channel"]!!.string!!)
                "expect_sent_count" -> assertEquals(step["count"]!!.int!!, c.socket.framesOf(step["event"]!!.string!!).size, where)
                "expect_subscribes" -> assertEquals(step["channels"]!!.array!!.map { it.string }, c.socket.framesOf("bird:subscribe").map { it.data?.get("channel")?.string }, where)
                "expect_delivered" -> assertEquals(
                    step["events"]!!.array!!.map { it["event"]!!.string!! to it["data"] },
                    delivered[step["channel"]!!.string!!] ?: emptyList<Pair<String, JsonValue?>>(), where
                )
                "advance" -> c.clock.advance(step["ms"]!!.long!!)
                "expect_state" -> assertEquals(ConnectionState.valueOf(step["state"]!!.string!!.toUpperCase()), c.bird.connectionState, where)
                "expect_sockets" -> assertEquals(step["count"]!!.int!!, c.sockets.size, where)
                "expect_next_timer" -> {
                    val next = c.clock.pending().firstOrNull()
                    assertTrue(next != null && next >= step["min_ms"]!!.long!! && next <= step["max_ms"]!!.long!!, "$where: next timer in $next ms")
                }
                "expect_no_timer" -> assertEquals(emptyList<Long>(), c.clock.pending(), where)
                "expect_last_error" -> assertEquals(step["code"]!!.int!!, c.errors.lastOrNull()?.code, "$where: ${c.errors.lastOrNull()}")
                "join" -> {
                    val seen = RoomSeen()
                    rooms[step["room"]!!.string!!] = seen
                    c.bird.join(step["room"]!!.string!!).onAny { event, data, meta ->
                        if (event == "error") seen.errors.add(listOf(data["code"]?.string, data["reason"]?.string))
                        else if (event !in RoomMachine.ROOM_OWN_EVENTS) seen.app.add(listOf(event, data, meta.id, meta.epoch, meta.replayed))
                    }
                }
                "expect_room_auth" -> assertEquals(step["requests"]!!.array!!.map { request -> request.array!!.map { it.string } }, callsTo("/rooms/auth").map { it.rooms }, where)
                "answer_room_auth" -> answer("/rooms/auth", step["answer"]!!, where)
                "expect_frames" -> assertEquals(step["data"]!!.array!!.toList(), c.socket.framesOf(step["event"]!!.string!!).map { it.data }, where)
                "room_frame" -> {
                    val payload = LinkedHashMap<String, Any?>()
                    payload["event"] = step["event"]!!.string!!
                    payload["data"] = step["data"]
                    step["meta"]?.let { payload["meta"] = it }
                    c.socket.receive("bird:room_event", JsonValue.from(payload).toString(), step["room"]!!.string!!)
                }
                "expect_room" -> {
                    val room = c.bird.room(step["room"]!!.string!!)
                    assertEquals(RoomState.valueOf(step["state"]!!.string!!.toUpperCase()), room?.state, where)
                    step["error"]?.string?.let { assertEquals(it, room?.error?.code, where) }
                }
                "expect_room_events" -> assertEquals(
                    step["events"]!!.array!!.map { listOf(it["event"]!!.string, it["data"], it["id"]!!.long, it["epoch"]?.string, it["replayed"]!!.bool) },
                    rooms[step["room"]!!.string!!]?.app ?: emptyList<List<Any?>>(), where
                )
                "expect_room_errors" -> assertEquals(
                    step["errors"]!!.array!!.map { listOf(it["code"]?.string, it["reason"]?.string) },
                    rooms[step["room"]!!.string!!]?.errors ?: emptyList<List<String?>>(), where
                )
                else -> throw AssertionError("$where: unknown step")
            }
        }
    }
}
