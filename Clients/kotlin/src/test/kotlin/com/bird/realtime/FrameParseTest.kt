package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotNull
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Test

// A frame read in one pass and a room payload parsed where it is in the frame (Frame.parse,
// Frame.dataObject; issue "Closer to the wire", 4), against the two-step parse they replaced:
// the frame with JsonValue.parse, then its data's unescaped text. Frames are written as the
// wire has them (raw strings: `\"` is the frame's escape).

class FrameParseTest {
    /** What a frame gives the client: its members, its data's text, that text as an object, and as a channel event's value. */
    private data class Read(val event: String, val channel: String?, val userId: String?, val data: String?, val payload: JsonObject?, val value: JsonValue?)

    /** The two-step parse (the client's before): the frame parsed whole, then the data's text. */
    private fun twoStep(text: String): Read? {
        val value = JsonValue.parseOrNull(text) as? JsonObject ?: return null
        val event = value["event"]?.string ?: return null
        val raw = value["data"]
        val data = when {
            raw == null -> null
            raw is JsonString -> raw.value
            else -> raw.toString()
        }
        return Read(event, value["channel"]?.string, value["user_id"]?.string, data, data?.let { JsonValue.parseOrNull(it) as? JsonObject },
            data?.let { JsonValue.parseOrNull(it) ?: JsonString(it) })
    }

    /** The one pass: the payload parsed in place first, as RoomFrames reads it (before any unescaped copy). */
    private fun onePass(text: String): Read? {
        val frame = Frame.parse(text) ?: return null
        val payload = frame.dataObject()
        return Read(frame.event, frame.channel, frame.userId, frame.data, payload, frame.dataValue())
    }

    private fun assertSameRead(text: String) = assertEquals(twoStep(text), onePass(text), text)

    /** A room event as the reference server writes it (keys sorted, the payload JSON-escaped). */
    private val referenceEvent = """{"channel":"bench:1","data":"{\"data\":{\"p\":1.5,\"seq\":7},\"event\":\"tick\",\"meta\":{\"at\":1764860000123,\"from\":null,\"id\":7}}","event":"bird:room_event"}"""

    /** Escapes inside the payload's strings: the frame escapes the payload's own escapes. */
    private val innerEscapes = """{"event":"bird:room_event","channel":"order:1","data":"{\"event\":\"note\",\"data\":{\"quote\":\"say \\\"hi\\\"\",\"path\":\"C:\\\\temp\",\"e\":\"caf\\u00e9\",\"smile\":\"\\ud83d\\ude00\",\"lines\":\"a\\nb\",\"slash\":\"a\\/b\"},\"meta\":{\"id\":1,\"at\":2,\"from\":\"ann\"}}"}"""

    /** Escapes of the frame itself: characters, the payload's whitespace, its structure, a number's digits. */
    private val frameEscapes = """{"event":"bird:room_event","channel":"order:1","data":"\u007b\u0022event\u0022:\"note\",\"data\":{\"e\":\"caf\u00e9\",\"smile\":\"\ud83d\ude00\",\"raw\":\"é😀\",\"slash\":\"a\/b\",\"n\":[1\u00302,1\u002e5,-\u0030,2\u0045-2]},\n\t\"meta\":{\"id\":1,\"at\":2,\"from\":\"b\u00f6b\",\"replayed\":true}\r\n\u0020}"}"""

    @Test
    fun `room events read in one pass are the two-step parse's - escapes, surrogates, nested data, meta`() {
        val nested = "{\\\"event\\\":\\\"deep\\\",\\\"data\\\":" + "{\\\"a\\\":[".repeat(20) + "true,false,null,{},[],\\\"\\\",0,-0,-7,1e3,2E-2,0.1,-0.25,3.14159,123456789012345.6,9007199254740993,12345678901234567890" +
            "]}".repeat(20) + ",\\\"meta\\\":{\\\"id\\\":3,\\\"at\\\":4,\\\"from\\\":null}}"
        val frames = listOf(
            referenceEvent,
            innerEscapes,
            frameEscapes,
            """{"event":"bird:room_event","channel":"order:1","data":"$nested"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"event\":\"updated\",\"data\":{\"status\":\"paid\"},\"meta\":{\"id\":42,\"at\":1700000000042,\"from\":\"ann\",\"replayed\":true}}"}""",
            // The payload's backslash written as the frame's \u005c: an escape of the payload.
            """{"event":"bird:room_event","channel":"order:1","data":"{\"s\":\"a\u005cnb\",\"q\":\"\u005c\"\"}"}""",
            // Lone surrogates, escaped by the frame or by the payload: kept as they are.
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\"\ud800\",\"b\":\"\\udc00x\"}"}""",
            """ { "event" : "bird:room_event" , "channel" : "order:1" , "data" : "{ }" } """,
            """{"event":"bird:room_history","channel":"order:1","data":"{\"request\":\"r1\",\"events\":[]}"}""",
            """{"event":"client-wave","channel":"presence-room-2","data":"{\"x\":1}","user_id":"bob","extra":[1,{"a":null}]}""",
            """{"ev\u0065nt":"bird:room_event","ch\u0061nnel":"order:\u0031","data":"{}"}""",
            // data that is not a string: re-encoded (embedded), as before.
            """{"event":"bird:room_event","channel":"order:1","data":{"event":"x","data":{"n":-0.0,"s":"\u00e9"},"meta":{"id":1}}}""",
            """{"event":"bird:room_event","channel":"order:1","data":null}""",
            """{"event":"bird:room_event","channel":"order:1","data":12}""",
            """{"event":"bird:room_event","channel":"order:1","data":[{}]}""",
            """{"event":"bird:room_event","channel":"order:1","data":true}""",
            """{"event":"bird:room_event","channel":"order:1"}""",
            """{"event":"bird:room_event","channel":7,"user_id":false,"data":"{}"}""",
            """{"event":"bird:ping"}""",
            """{"event":"bird:room_event","data":"hello"}""",
            """{"event":"bird:room_event","data":""}""",
            """{"event":"bird:room_event","data":"[1,2]"}"""
        )
        for (text in frames) {
            assertNotNull(onePass(text), text)
            assertSameRead(text)
        }
        val payload = Frame.parse(innerEscapes)?.dataObject()?.get("data")
        assertEquals("say \"hi\"", payload?.get("quote")?.string)
        assertEquals("C:\\temp", payload?.get("path")?.string)
        assertEquals("café", payload?.get("e")?.string)
        assertEquals("\uD83D\uDE00", payload?.get("smile")?.string)
        assertEquals("a\nb", payload?.get("lines")?.string)
        val escaped = Frame.parse(frameEscapes)?.dataObject()
        assertEquals(JsonValue.parse("[102,1.5,-0,2E-2]"), escaped?.get("data")?.get("n"))
        assertEquals("böb", escaped?.get("meta")?.get("from")?.string)
    }

    @Test
    fun `hostile frames give what the two-step parse gave - truncated, bad escapes, control characters, depth, duplicates, other values`() {
        val deep = "[".repeat(63) + "]".repeat(63)
        val tooDeep = "[".repeat(64) + "]".repeat(64)
        val frames = listOf(
            // Bad escapes of the frame (the frame is refused) and of the payload (the payload is).
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\x}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":1}\u12"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\u-001}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\u+0fa}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\u00g1}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{}\"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\"\\x\"}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\"\\u12\"}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\"\\u-001\"}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\"\\"}"}""",
            // Control characters: raw in the frame's string, or escaped by the frame into the payload's.
            "{\"event\":\"bird:room_event\",\"channel\":\"order:1\",\"data\":\"{\\\"a\\\":\\\"\u0001\\\"}\"}",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\"\u0001\"}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\"x\ny\"}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"\u0000{}"}""",
            // Nesting: 64 deep is read, 65 is refused, 100,000 is refused without a deep stack.
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":$deep}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":$tooDeep}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":${"[".repeat(100_000)}}"}""",
            """{"event":"bird:room_event","channel":"order:1","other":$deep,"data":"{}"}""",
            """{"event":"bird:room_event","channel":"order:1","other":$tooDeep,"data":"{}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":{"a":$deep}}""",
            """{"event":"bird:room_event","channel":"order:1","data":{"a":$tooDeep}}""",
            // A name twice: the frame's, escaped or not, and the payload's.
            """{"event":"bird:room_event","channel":"order:1","data":"{}","data":"{}"}""",
            """{"event":"bird:room_event","event":"bird:room_event","data":"{}"}""",
            """{"event":"bird:room_event","channel":"a","channel":"a","data":"{}"}""",
            """{"event":"bird:room_event","x":1,"data":"{}","x":2}""",
            """{"ev\u0065nt":"bird:room_event","event":"bird:room_event","data":"{}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"event\":\"a\",\"event\":\"b\"}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"event\":\"a\",\"meta\":{\"id\":1,\"id\":2}}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"event\":\"a\",\"ev\\u0065nt\":\"b\"}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"event\":\"a\",\"ev\u0065nt\":\"b\"}"}""",
            // Text around the value, trailing commas, a byte-order mark, literals and numbers.
            """{"event":"bird:room_event","channel":"order:1","data":"{}"} x""",
            """{"event":"bird:room_event","channel":"order:1","data":"{}x"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{} "}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":1,}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{}",}""",
            """{"event":"bird:room_event","channel":"order:1","data":"\ufeff{}"}""",
            "\uFEFF{\"event\":\"bird:room_event\",\"data\":\"{}\"}",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":tru}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":t\u0072ue,\"b\":nul}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":01}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":1.}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":-}"}""",
            """{"event":"bird:room_event","channel":"order:1","data":"{\"a\":1e}"}""",
            // Not a frame: not an object, no event, an event that is not a string.
            """{"event":1,"data":"{}"}""", """{"event":null}""", """{"data":"{}"}""", "[]", "\"x\"", "1", "", " ", "not json", "{", "}"
        )
        for (text in frames) assertSameRead(text)
        // Every truncation of frames with escapes of both kinds.
        for (text in listOf(referenceEvent, innerEscapes, frameEscapes)) {
            for (length in 0 until text.length) assertNull(onePass(text.substring(0, length)), "truncated at $length")
            assertNotNull(onePass(text))
        }
    }

    @Test
    fun `every one-character change of a room event reads as the two-step parse reads it`() {
        val replacements = listOf('"', '\\', '{', '}', '[', ']', ',', ':', ' ', 'u', '0', 'n', 'x', '/', '\n', '\u0001', 'é')
        for (text in listOf(referenceEvent, innerEscapes, frameEscapes)) {
            for (position in text.indices) {
                assertSameRead(text.removeRange(position, position + 1))
                for (char in replacements) assertSameRead(text.substring(0, position) + char + text.substring(position + 1))
            }
        }
    }

    @Test
    fun `a room event with escapes is delivered, a malformed one is told as before`() {
        val c = TestClient()
        val socket = c.connectNow()
        val room = c.bird.join("order:1")
        c.clock.advance(10)
        socket.receive("bird:room_event", mapOf("event" to "joined", "data" to mapOf("epoch" to "e1", "id" to 0, "count" to 1)), "order:1")
        val seen = ArrayList<Pair<JsonValue, RoomEventMeta>>()
        room.on("note") { data, meta -> seen.add(data to meta) }
        socket.receiveText(innerEscapes)
        socket.receiveText(frameEscapes.replace("\"id\\\":1", "\"id\\\":2"))
        assertEquals(listOf(1L, 2L), seen.map { it.second.id })
        assertEquals(twoStep(innerEscapes)?.payload?.get("data"), seen[0].first)
        assertEquals("ann", seen[0].second.from)
        assertEquals("böb", seen[1].second.from)
        assertEquals(true, seen[1].second.replayed)
        assertEquals(emptyList<RealtimeError>(), c.errors)

        socket.receiveText(innerEscapes.substring(0, 80))
        socket.receiveText("""{"event":"bird:room_event","channel":"order:1","data":"{\"a\":\"\\x\"}"}""")
        socket.receiveText("""{"event":"bird:room_event","channel":"order:1","data":"{\"a\":${"[".repeat(100_000)}}"}""")
        socket.receiveText("""{"event":"bird:room_event","channel":"order:1","data":"{\"event\":\"a\",\"event\":\"b\"}"}""")
        socket.receiveText("""{"event":"bird:room_event","channel":"order:1","data":{"event":"note","data":{"n":1},"meta":{"id":3,"at":4}}}""")
        assertEquals(
            listOf(
                "a frame that is not {event, channel?, data}, ignored",
                "bird:room_event for order:1 without an object, ignored",
                "bird:room_event for order:1 without an object, ignored",
                "bird:room_event for order:1 without an object, ignored"
            ),
            c.errors.map { it.message }
        )
        assertEquals(listOf(1L, 2L, 3L), seen.map { it.second.id }, "data sent embedded is read as before")
        assertEquals(RoomPosition("e1", 3), room.position)
    }
}
