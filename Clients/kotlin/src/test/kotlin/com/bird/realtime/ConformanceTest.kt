package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.DynamicTest
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.TestFactory
import java.io.File

/**
 * The shared transcripts (`Clients/conformance`, issue 49): the same scripted server and clock
 * as the Swift and browser clients run, against this client's fakes.
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
            "verify_pong_timeout_ms" to options.verifyPongTimeoutMillis, "connect_timeout_ms" to options.connectTimeoutMillis
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

    private fun run(name: String, transcript: JsonValue) {
        val c = TestClient()
        c.draw = transcript["draw"]?.number ?: 0.5
        val delivered = HashMap<String, ArrayList<Pair<String, JsonValue?>>>()
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
                    c.bird.subscribe(step["channel"]!!.string!!).bindAll { if (!it.event.startsWith("bird")) seen.add(it.event to it.data) }
                }
                "confirm" -> c.socket.receive("bird_internal:subscription_succeeded", "{}", step["channel"]!!.string!!)
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
                else -> throw AssertionError("$where: unknown step")
            }
        }
    }
}
