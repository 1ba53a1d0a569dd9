package com.bird.realtime

import java.util.Base64

/**
 * A JSON value, as events' data reaches handlers (rooms seed, "Joining": "Data is a JSONValue
 * (data["status"]?.string, .number, .bool, .array, .object, .data for binary)").
 *
 * Read it with the accessors, each `null` when the value is of another kind:
 * `data["status"]?.string`, `data["items"]?.get(0)`, `data["n"]?.long`. `toString()` is the
 * value's JSON text (RFC 8259).
 */
sealed class JsonValue {
    /** The member [key] of an object, or `null` (not an object, or no such member). */
    open operator fun get(key: String): JsonValue? = null

    /** The element [index] of an array, or `null` (not an array, or out of range). */
    open operator fun get(index: Int): JsonValue? = null

    /** The text of a string, or `null`. */
    open val string: String? get() = null

    /** The value of a number, or `null`. */
    open val number: Double? get() = null

    /** A number that is an integer within ±(2^53 − 1) (exact in a double), or `null`. */
    val long: Long?
        get() {
            val value = number ?: return null
            if (value != Math.floor(value) || Math.abs(value) > MAX_SAFE_INTEGER) return null
            return value.toLong()
        }

    /** A number that is an integer within [Int]'s range, or `null`. */
    val int: Int? get() = long?.let { if (it >= Int.MIN_VALUE && it <= Int.MAX_VALUE) it.toInt() else null }

    /** The value of `true` or `false`, or `null`. */
    open val bool: Boolean? get() = null

    /** The elements of an array, or `null`. */
    open val array: List<JsonValue>? get() = null

    /** The members of an object, in their order, or `null` (`object` is a keyword in Kotlin). */
    open val obj: Map<String, JsonValue>? get() = null

    /** Whether this is JSON's `null`. */
    open val isNull: Boolean get() = false

    /**
     * The bytes of a binary value: an object that is exactly `{"$binary": "<base64>"}`
     * (docs/rooms-protocol.md "Binary values", RFC 4648 §4), or `null`.
     */
    val data: ByteArray?
        get() {
            val fields = obj ?: return null
            if (fields.size != 1) return null
            val text = fields[BINARY_KEY]?.string ?: return null
            return try {
                Base64.getDecoder().decode(text)
            } catch (error: IllegalArgumentException) {
                null
            }
        }

    /** The value's JSON text. */
    override fun toString(): String = StringBuilder().also { JsonWriter.write(this, it) }.toString()

    /** Parsing, converting and the limits of both. */
    companion object {
        /** The largest integer a double holds exactly (2^53 − 1). */
        const val MAX_SAFE_INTEGER: Double = 9007199254740991.0

        /** The deepest nesting [parse] accepts (64, the Swift client's `StrictJSON`). */
        const val MAX_DEPTH: Int = 64

        /** The member name of a binary value's object. */
        const val BINARY_KEY: String = "\$binary"

        /**
         * Parses JSON text strictly (RFC 8259's grammar: no trailing commas, no comments, no
         * byte-order mark; a member name twice and nesting past [MAX_DEPTH] refused).
         *
         * @param text the JSON text.
         * @return the value.
         * @throws JsonException when the text is not JSON by those rules.
         */
        @JvmStatic
        fun parse(text: String): JsonValue = JsonParser(text).parseDocument()

        /**
         * Parses JSON text, or gives `null` when it is not JSON (see [parse]).
         *
         * @param text the JSON text.
         * @return the value, or `null`.
         */
        @JvmStatic
        fun parseOrNull(text: String): JsonValue? = try {
            parse(text)
        } catch (error: JsonException) {
            null
        }

        /**
         * Converts a Kotlin value: `null`, [JsonValue], [String], [Boolean], [Number], [Map]
         * with string keys, [Iterable], [Array] and [ByteArray] (written `{"$binary"}`).
         *
         * @param value the value.
         * @return its JSON value.
         * @throws IllegalArgumentException for any other type, a non-string key, or a
         *   nesting deeper than [MAX_DEPTH].
         */
        @JvmStatic
        fun from(value: Any?): JsonValue = convert(value, 0)

        private fun convert(value: Any?, depth: Int): JsonValue {
            require(depth <= MAX_DEPTH) { "nested deeper than $MAX_DEPTH" }
            return when (value) {
                null -> JsonNull
                is JsonValue -> value
                is String -> JsonString(value)
                is Boolean -> JsonBool(value)
                is Number -> JsonNumber(value.toDouble())
                is ByteArray -> JsonObject(mapOf(BINARY_KEY to JsonString(Base64.getEncoder().encodeToString(value))))
                is Map<*, *> -> {
                    val fields = LinkedHashMap<String, JsonValue>()
                    for ((key, item) in value) {
                        require(key is String) { "a map key that is not a String: $key" }
                        fields[key] = convert(item, depth + 1)
                    }
                    JsonObject(fields)
                }
                is Iterable<*> -> JsonArray(value.map { convert(it, depth + 1) })
                is Array<*> -> JsonArray(value.map { convert(it, depth + 1) })
                else -> throw IllegalArgumentException("not a JSON value: ${value.javaClass.name}")
            }
        }
    }
}

/** JSON's `null`. */
object JsonNull : JsonValue() {
    override val isNull: Boolean get() = true
}

/** `true` or `false`. */
data class JsonBool(
    /** The value. */
    val value: Boolean
) : JsonValue() {
    override val bool: Boolean? get() = value
    override fun toString(): String = value.toString()
}

/** A number (a double: ids and times are integers below 2^53, exact). */
data class JsonNumber(
    /** The value. */
    val value: Double
) : JsonValue() {
    override val number: Double? get() = value
    override fun toString(): String = JsonWriter.number(value)
}

/** A string. */
data class JsonString(
    /** The text. */
    val value: String
) : JsonValue() {
    override val string: String? get() = value
    override fun toString(): String = JsonWriter.quote(value)
}

/** An array. */
data class JsonArray(
    /** The elements. */
    val values: List<JsonValue>
) : JsonValue() {
    override val array: List<JsonValue>? get() = values
    override operator fun get(index: Int): JsonValue? = values.getOrNull(index)
    override fun toString(): String = StringBuilder().also { JsonWriter.write(this, it) }.toString()
}

/** An object; its members keep their order. */
data class JsonObject(
    /** The members. */
    val fields: Map<String, JsonValue>
) : JsonValue() {
    override val obj: Map<String, JsonValue>? get() = fields
    override operator fun get(key: String): JsonValue? = fields[key]
    override fun toString(): String = StringBuilder().also { JsonWriter.write(this, it) }.toString()
}

/** Text that is not JSON by [JsonValue.parse]'s rules. */
class JsonException(
    /** What is wrong, and where (a character offset). */
    message: String
) : Exception(message)

/** Writes JSON text (RFC 8259 §7 escapes; non-finite numbers as `null`, which JSON lacks). */
internal object JsonWriter {
    fun write(value: JsonValue, out: StringBuilder) {
        when (value) {
            is JsonNull -> out.append("null")
            is JsonBool -> out.append(value.value)
            is JsonNumber -> out.append(number(value.value))
            is JsonString -> out.append(quote(value.value))
            is JsonArray -> {
                out.append('[')
                value.values.forEachIndexed { index, item ->
                    if (index > 0) out.append(',')
                    write(item, out)
                }
                out.append(']')
            }
            is JsonObject -> {
                out.append('{')
                var first = true
                for ((key, item) in value.fields) {
                    if (!first) out.append(',')
                    first = false
                    out.append(quote(key)).append(':')
                    write(item, out)
                }
                out.append('}')
            }
        }
    }

    fun number(value: Double): String {
        if (value.isNaN() || value.isInfinite()) return "null"
        if (value == Math.floor(value) && Math.abs(value) < 1e15) return value.toLong().toString()
        return value.toString()
    }

    fun quote(text: String): String {
        val out = StringBuilder(text.length + 2)
        out.append('"')
        for (char in text) {
            when (char) {
                '"' -> out.append("\\\"")
                '\\' -> out.append("\\\\")
                '\n' -> out.append("\\n")
                '\r' -> out.append("\\r")
                '\t' -> out.append("\\t")
                '\b' -> out.append("\\b")
                '\u000C' -> out.append("\\f")
                else -> if (char < ' ') out.append(String.format("\\u%04x", char.toInt())) else out.append(char)
            }
        }
        return out.append('"').toString()
    }
}

/** A strict recursive-descent parser (RFC 8259), bounded in depth. */
private class JsonParser(private val text: String) {
    private var index = 0

    fun parseDocument(): JsonValue {
        skipSpace()
        val value = parseValue(0)
        skipSpace()
        if (index != text.length) fail("text after the value")
        return value
    }

    private fun fail(message: String): Nothing = throw JsonException("$message at offset $index")

    private fun skipSpace() {
        while (index < text.length) {
            val char = text[index]
            if (char == ' ' || char == '\t' || char == '\n' || char == '\r') index += 1 else return
        }
    }

    private fun parseValue(depth: Int): JsonValue {
        if (index >= text.length) fail("the end of the text where a value was expected")
        return when (text[index]) {
            '{' -> parseObject(depth + 1)
            '[' -> parseArray(depth + 1)
            '"' -> JsonString(parseString())
            't' -> literal("true", JsonBool(true))
            'f' -> literal("false", JsonBool(false))
            'n' -> literal("null", JsonNull)
            else -> parseNumber()
        }
    }

    private fun literal(word: String, value: JsonValue): JsonValue {
        if (!text.startsWith(word, index)) fail("an invalid literal")
        index += word.length
        return value
    }

    private fun parseObject(depth: Int): JsonValue {
        if (depth > JsonValue.MAX_DEPTH) fail("nesting deeper than ${JsonValue.MAX_DEPTH}")
        index += 1
        val fields = LinkedHashMap<String, JsonValue>()
        skipSpace()
        if (index < text.length && text[index] == '}') {
            index += 1
            return JsonObject(fields)
        }
        while (true) {
            skipSpace()
            if (index >= text.length || text[index] != '"') fail("a member name was expected")
            val key = parseString()
            if (fields.containsKey(key)) fail("the member name \"${key.take(64)}\" twice")
            skipSpace()
            if (index >= text.length || text[index] != ':') fail("':' was expected")
            index += 1
            skipSpace()
            fields[key] = parseValue(depth)
            skipSpace()
            if (index >= text.length) fail("an unterminated object")
            when (text[index]) {
                ',' -> index += 1
                '}' -> {
                    index += 1
                    return JsonObject(fields)
                }
                else -> fail("',' or '}' was expected")
            }
        }
    }

    private fun parseArray(depth: Int): JsonValue {
        if (depth > JsonValue.MAX_DEPTH) fail("nesting deeper than ${JsonValue.MAX_DEPTH}")
        index += 1
        val values = ArrayList<JsonValue>()
        skipSpace()
        if (index < text.length && text[index] == ']') {
            index += 1
            return JsonArray(values)
        }
        while (true) {
            skipSpace()
            values.add(parseValue(depth))
            skipSpace()
            if (index >= text.length) fail("an unterminated array")
            when (text[index]) {
                ',' -> index += 1
                ']' -> {
                    index += 1
                    return JsonArray(values)
                }
                else -> fail("',' or ']' was expected")
            }
        }
    }

    /** A string: runs without escapes are copied whole (most strings have none: one substring). */
    private fun parseString(): String {
        index += 1
        var run = index
        var out: StringBuilder? = null
        while (true) {
            if (index >= text.length) fail("an unterminated string")
            val char = text[index]
            when {
                char == '"' -> {
                    val value = if (out == null) text.substring(run, index) else out.append(text, run, index).toString()
                    index += 1
                    return value
                }
                char == '\\' -> {
                    // Sized once for the rest of the text (a frame's `data` is most of it), at most 4 KiB.
                    val builder = out ?: StringBuilder(Math.min(text.length - run, 4096))
                    out = builder
                    builder.append(text, run, index)
                    if (index + 1 >= text.length) fail("an unterminated escape")
                    val escaped = text[index + 1]
                    index += 2
                    when (escaped) {
                        '"' -> builder.append('"')
                        '\\' -> builder.append('\\')
                        '/' -> builder.append('/')
                        'b' -> builder.append('\b')
                        'f' -> builder.append('\u000C')
                        'n' -> builder.append('\n')
                        'r' -> builder.append('\r')
                        't' -> builder.append('\t')
                        'u' -> {
                            if (index + 4 > text.length) fail("a short \\u escape")
                            val digits = text.substring(index, index + 4)
                            // Four hex digits, no sign (toIntOrNull alone would take "-001" or "+0fa").
                            if (!digits.all { it in '0'..'9' || it in 'a'..'f' || it in 'A'..'F' }) fail("an invalid \\u escape")
                            val code = digits.toInt(16)
                            builder.append(code.toChar())
                            index += 4
                        }
                        else -> fail("an invalid escape")
                    }
                    run = index
                }
                char < ' ' -> fail("a control character in a string")
                else -> index += 1
            }
        }
    }

    private fun parseNumber(): JsonValue {
        val start = index
        if (index < text.length && text[index] == '-') index += 1
        if (index >= text.length) fail("a number was expected")
        if (text[index] == '0') {
            index += 1
        } else if (text[index] in '1'..'9') {
            while (index < text.length && text[index] in '0'..'9') index += 1
        } else {
            fail("a value was expected")
        }
        var integer = true
        if (index < text.length && text[index] == '.') {
            integer = false
            index += 1
            val digits = index
            while (index < text.length && text[index] in '0'..'9') index += 1
            if (index == digits) fail("digits after '.' were expected")
        }
        if (index < text.length && (text[index] == 'e' || text[index] == 'E')) {
            integer = false
            index += 1
            if (index < text.length && (text[index] == '+' || text[index] == '-')) index += 1
            val digits = index
            while (index < text.length && text[index] in '0'..'9') index += 1
            if (index == digits) fail("digits of an exponent were expected")
        }
        // Ids, times and counts: an integer of at most 15 digits is exact in a Double and read
        // here (Double.parseDouble trims the text and scans it again).
        val negative = text[start] == '-'
        if (integer && index - start <= (if (negative) 16 else 15)) {
            var value = 0L
            for (position in (if (negative) start + 1 else start) until index) value = value * 10 + (text[position] - '0')
            return JsonNumber(if (negative) -value.toDouble() else value.toDouble())
        }
        return JsonNumber(text.substring(start, index).toDouble())
    }
}
