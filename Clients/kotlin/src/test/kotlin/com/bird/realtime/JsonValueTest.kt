package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertArrayEquals
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNull
import org.junit.jupiter.api.Test
import org.junit.jupiter.params.ParameterizedTest
import org.junit.jupiter.params.provider.ValueSource

class JsonValueTest {
    @Test
    fun `the seed's accessors read a value`() {
        val data = JsonValue.parse("""{"status":"paid","n":42,"ok":true,"items":[1,"a"],"blob":{"${'$'}binary":"AQI="},"none":null}""")
        assertEquals("paid", data["status"]?.string)
        assertEquals(42.0, data["n"]?.number)
        assertEquals(42L, data["n"]?.long)
        assertEquals(true, data["ok"]?.bool)
        assertEquals("a", data["items"]?.get(1)?.string)
        assertArrayEquals(byteArrayOf(1, 2), data["blob"]?.data)
        assertEquals(true, data["none"]?.isNull)
        assertNull(data["status"]?.number, "another kind is null")
        assertNull(data["missing"])
    }

    @Test
    fun `values convert from Kotlin and print as JSON text`() {
        val value = JsonValue.from(mapOf("text" to "hi \"you\"\n", "n" to 3, "x" to 1.5, "list" to listOf(true, null), "blob" to byteArrayOf(1, 2)))
        assertEquals("""{"text":"hi \"you\"\n","n":3,"x":1.5,"list":[true,null],"blob":{"${'$'}binary":"AQI="}}""", value.toString())
        assertEquals(value, JsonValue.parse(value.toString()))
    }

    @ParameterizedTest
    @ValueSource(strings = ["", "{", "[1,]", "{\"a\":1,}", "{\"a\":1,\"a\":2}", "01", "1.", "\"\u0001\"", "tru", "{} x", "\uFEFF{}", "NaN",
        "\"\\u-001\"", "\"\\u+0fa\"", "\"\\u00g1\"", "\"\\x\"", "\"ab\\\"", "\"a\u0001\\n\""])
    fun `text that is not strict JSON is refused`(text: String) {
        assertThrows<JsonException> { JsonValue.parse(text) }
    }

    @Test
    fun `strings - runs between escapes, escapes at either end, unicode escapes`() {
        val text = "{\"plain\":\"abc\",\"empty\":\"\",\"mixed\":\"a\\\"b\\\\c\\n\",\"ends\":\"\\tx\\u00e9\",\"inner\":\"{\\\"n\\\":1}\"}"
        val value = JsonValue.parse(text)
        assertEquals("abc", value["plain"]?.string)
        assertEquals("", value["empty"]?.string)
        assertEquals("a\"b\\c\n", value["mixed"]?.string)
        assertEquals("\tx\u00e9", value["ends"]?.string)
        assertEquals("{\"n\":1}", value["inner"]?.string)
        assertEquals(1L, JsonValue.parse(value["inner"]?.string ?: "")["n"]?.long)
        assertEquals(value, JsonValue.parse(value.toString()))
    }

    @ParameterizedTest
    @ValueSource(strings = ["0", "-0", "7", "-7", "1764860000123", "999999999999999", "-999999999999999", "9007199254740993",
        "12345678901234567890", "-12345678901234567890", "1.5", "-0.25", "1e3", "2E-2", "0.1", "123456789012345.6",
        "-0.0", "3.14159", "99999999999999.9", "1234567890123.45", "0.000000000000001", "0.30000000000000004", "2.5e-3"])
    fun `numbers read as Double reads their text`(text: String) {
        val read = JsonValue.parse(text).number ?: error("not a number: $text")
        // Bit for bit: -0 stays negative zero, 16 digits and more round as Double.parseDouble rounds.
        assertEquals(java.lang.Double.doubleToRawLongBits(text.toDouble()), java.lang.Double.doubleToRawLongBits(read), text)
    }

    @Test
    fun `20,000 random numbers read as Double reads their text, bit for bit`() {
        val random = java.util.Random(52)
        repeat(20_000) {
            val text = StringBuilder()
            if (random.nextBoolean()) text.append('-')
            val whole = random.nextInt(18)
            if (whole == 0) text.append('0') else {
                text.append('1' + random.nextInt(9))
                repeat(whole - 1) { text.append('0' + random.nextInt(10)) }
            }
            if (random.nextInt(3) > 0) {
                text.append('.')
                // Leading zeros of the fraction now and then (0.000123): they count as digits.
                repeat(random.nextInt(4)) { text.append('0') }
                repeat(1 + random.nextInt(17)) { text.append('0' + random.nextInt(10)) }
            }
            if (random.nextInt(8) == 0) text.append('e').append(random.nextInt(40) - 20)
            val read = JsonValue.parse(text.toString()).number ?: error("not a number: $text")
            assertEquals(java.lang.Double.doubleToRawLongBits(text.toString().toDouble()), java.lang.Double.doubleToRawLongBits(read), text.toString())
        }
    }

    @Test
    fun `nesting past 64 is refused`() {
        JsonValue.parse("[".repeat(64) + "]".repeat(64))
        assertThrows<JsonException> { JsonValue.parse("[".repeat(65) + "]".repeat(65)) }
    }

    @Test
    fun `a parsed object of 0 to 12 members is the map of its members in their order, equal to one built on a LinkedHashMap`() {
        for (size in 0..12) {
            val built = LinkedHashMap<String, JsonValue>()
            for (n in size downTo 1) built["m$n"] = if (n % 2 == 0) JsonNumber(n.toDouble()) else JsonString("v$n") // not sorted: order kept
            val text = JsonObject(built).toString()
            val parsed = JsonValue.parse(text) as JsonObject
            // Up to 8 members in one array (SmallFields), more in a LinkedHashMap: the same Map either way.
            assertEquals(size > SmallFields.MAX_SIZE, parsed.fields is LinkedHashMap<*, *>, "$size members")
            assertEquals(built, parsed.fields)
            assertEquals(parsed.fields, built)
            assertEquals(JsonObject(built), parsed)
            assertEquals(parsed, JsonObject(built))
            assertEquals(built.hashCode(), parsed.fields.hashCode())
            assertEquals(JsonObject(built).hashCode(), parsed.hashCode())
            assertEquals(built.toString(), parsed.fields.toString())
            assertEquals(text, parsed.toString())
            assertEquals(built.keys.toList(), parsed.fields.keys.toList())
            assertEquals(built.values.toList(), parsed.fields.values.toList())
            assertEquals(size, parsed.fields.size)
            for ((key, value) in built) {
                assertEquals(value, parsed[key])
                assertEquals(true, parsed.fields.containsKey(key))
                assertEquals(true, parsed.fields.containsValue(value))
            }
            assertNull(parsed["absent"])
            assertEquals(false, parsed.fields.containsKey("absent"))
        }
    }

    @Test
    fun `a member name twice is refused wherever it comes, in small objects and past 8 members`() {
        for (size in 1..12) {
            val names = (1..size).map { "\"m$it\":$it" }
            for (again in 1..size) {
                val text = "{" + (names + "\"m$again\":0").joinToString(",") + "}"
                assertThrows<JsonException> { JsonValue.parse(text) }
            }
            assertEquals(size, (JsonValue.parse("{" + names.joinToString(",") + "}") as JsonObject).fields.size)
        }
    }
}
