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

/**
 * A strict recursive-descent parser (RFC 8259), bounded in depth, of [text] from [start] to
 * [end].
 *
 * With [escaped], that range is the content of a JSON string (a frame's `data`, between its
 * quotes, already checked as a string by [skipString]) and the parser reads the text the string
 * stands for, decoding the string's escapes as it goes (RFC 8259 §7): the value, refusals and
 * limits of [JsonValue.parse] of the unescaped string, without building that string. Every
 * character is read by [at], which gives it and sets [step], the units of [text] it takes (1;
 * in an escaped range 2 for `\n`, 6 for `\u00e9`): the grammar below is the same in both modes.
 */
internal class JsonParser(
    private val text: String,
    start: Int = 0,
    private val end: Int = text.length,
    private val escaped: Boolean = false
) {
    /** Where the parser is in [text]. */
    var index = start
        private set

    /** The units of [text] the character [at] read last takes. */
    private var step = 1

    /** How many escapes of an escaped range [at] has decoded: a number that saw the count move looks for one in its text. */
    private var decodedEscapes = 0

    /** Whether the range is read to its end. */
    val atEnd: Boolean get() = index >= end

    /** The escapes' rules, shared by both modes. */
    companion object {
        /** The character of a one-letter escape (`n` → a newline; RFC 8259 §7), or -1 (`u` is not one: four hex digits follow it). */
        private fun escapeOf(letter: Char): Int = when (letter) {
            '"' -> '"'.toInt()
            '\\' -> '\\'.toInt()
            '/' -> '/'.toInt()
            'b' -> '\b'.toInt()
            'f' -> 0x0C
            'n' -> '\n'.toInt()
            'r' -> '\r'.toInt()
            't' -> '\t'.toInt()
            else -> -1
        }

        /** What [at] reads at a bare quote in an escaped range: NUL, which no rule of the grammar takes there. */
        private const val ENCLOSING_END = '\u0000'

        /** The longest string [parseName] looks up: 32 units. */
        private const val MAX_NAME = 32

        /**
         * Strings that recur (member names, events, channels), by their length and first and
         * last characters ([slotOf]): 512 of them at most, a newer one taking an older one's slot
         * (each lookup compares the whole string). Shared by every parser on
         * every thread without a lock: a slot holds a whole String or null (a reference is
         * written atomically, and a String is immutable), so a reader finds a string with the
         * characters it compared, or makes its own.
         */
        private val NAMES = arrayOfNulls<String>(512).also { names ->
            // The names the client reads, as the literals its code looks them up by: a lookup
            // that finds the same String object is answered by `equals` at its first check.
            for (name in listOf("event", "data", "meta", "id", "at", "from", "replayed", "epoch", "count", "members",
                    "info", "reason", "code", "message", "n", "recovered", "channel", "user_id", "socket_id",
                    "activity_timeout", "presence", "ids", "hash", "first", "last", "previous", "before", "more", "items")) {
                names[slotOf(name, 0, name.length)] = name
            }
        }

        /**
         * The slot of [NAMES] for [from, to) of [text] (not empty): a hash of its length and its
         * first and last characters, cheap to take; the names the client reads each have a slot
         * of their own.
         */
        private fun slotOf(text: String, from: Int, to: Int): Int =
            ((to - from) * 31 + text[from].toInt() * 7 + text[to - 1].toInt()) and 511

        /** 10⁰ … 10¹⁵, each exact in a Double (up to 10²² are). */
        private val POWERS_OF_TEN = DoubleArray(16).also { powers ->
            powers[0] = 1.0
            for (exponent in 1 until powers.size) powers[exponent] = powers[exponent - 1] * 10
        }

        /** A hex digit's value, or -1 (no sign: `toIntOrNull(16)` would take "-001" or "+0fa"). */
        private fun hexValue(char: Char): Int = when (char) {
            in '0'..'9' -> char - '0'
            in 'a'..'f' -> char - 'a' + 10
            in 'A'..'F' -> char - 'A' + 10
            else -> -1
        }
    }

    /**
     * In an escaped range that runs to the text's end: the value of the enclosing string's
     * content, read up to that string's closing quote, or `null` when the content is not one JSON
     * value (then nothing is known of the enclosing string: the caller reads it again). The
     * same value [parseDocument] gives on the range that ends at that quote; [index] is then at
     * the quote.
     */
    fun parseEnclosed(): JsonValue? = try {
        skipSpace()
        val value = parseValue(0)
        skipSpace()
        if (index < end && text[index] == '"') value else null
    } catch (error: JsonException) {
        null
    }

    fun parseDocument(): JsonValue {
        skipSpace()
        val value = parseValue(0)
        skipSpace()
        if (index != end) fail("text after the value")
        return value
    }

    private fun fail(message: String): Nothing = throw JsonException("$message at offset $index")

    /**
     * The character at [index] (callers check [atEnd] first); sets [step]. In an escaped range
     * a backslash starts an escape of the enclosing string: the character it stands for.
     */
    private fun at(): Char {
        val char = text[index]
        if (!escaped) {
            step = 1
            return char
        }
        if (char != '\\') {
            step = 1
            // The enclosing string's own end (a bare quote) reads as a character no rule takes,
            // so a range read to the text's end ([parseEnclosed]) stops there; a bare control
            // character is not in a JSON string at all.
            if (char == '"') return ENCLOSING_END
            if (char < ' ') fail("a control character in the enclosing string")
            return char
        }
        if (index + 1 >= end) fail("an unterminated escape")
        decodedEscapes += 1
        val letter = text[index + 1]
        if (letter == '"') {
            // The enclosing string's quote: a payload's every name and string has two.
            step = 2
            return '"'
        }
        if (letter != 'u') {
            val code = escapeOf(letter)
            if (code < 0) fail("an invalid escape")
            step = 2
            return code.toChar()
        }
        if (index + 6 > end) fail("a short \\u escape")
        var code = 0
        for (position in index + 2 until index + 6) {
            val digit = hexValue(text[position])
            if (digit < 0) fail("an invalid \\u escape")
            code = code * 16 + digit
        }
        step = 6
        return code.toChar()
    }

    /** Whether [char] is next (nothing passed). */
    fun sees(char: Char): Boolean = index < end && at() == char

    /**
     * Passes a member name that is exactly [name] (written without escapes, as servers write
     * them) if it is next: whether it was. Nothing is made: a frame's own names are recognised
     * where they are. A name written otherwise (with an escape) is left to [parseString].
     * Not for an escaped range, whose quotes are escapes.
     */
    fun takeName(name: String): Boolean {
        val close = index + name.length + 1
        if (escaped || close >= end || text[index] != '"' || text[close] != '"' || !text.startsWith(name, index + 1)) return false
        index = close + 1
        return true
    }

    /** Moves to [position] of the text, past what another parser read there ([Frame]'s `data`). */
    fun passTo(position: Int) {
        index = position
    }

    /** Passes [char] if it is next: whether it was. */
    fun take(char: Char): Boolean {
        if (index >= end || at() != char) return false
        index += step
        return true
    }

    fun skipSpace() {
        while (index < end) {
            val char = at()
            if (char == ' ' || char == '\t' || char == '\n' || char == '\r') index += step else return
        }
    }

    /** A value at nesting [depth] (0 for the document's; an object's or array's members one deeper). */
    fun parseValue(depth: Int): JsonValue {
        if (index >= end) fail("the end of the text where a value was expected")
        return when (at()) {
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
        val start = index
        for (expected in word) {
            if (index >= end || at() != expected) {
                index = start // told where the literal starts
                fail("an invalid literal")
            }
            index += step
        }
        return value
    }

    // parseObject and parseArray start on the bracket parseValue read ([step] is still its).

    private fun parseObject(depth: Int): JsonValue {
        if (depth > JsonValue.MAX_DEPTH) fail("nesting deeper than ${JsonValue.MAX_DEPTH}")
        index += step
        skipSpace()
        if (index < end && at() == '}') {
            index += step
            return JsonObject(emptyMap())
        }
        // The members in one array while they are few (SmallFields), in a LinkedHashMap past that.
        var slots = arrayOfNulls<Any>(8)
        var count = 0
        var large: LinkedHashMap<String, JsonValue>? = null
        while (true) {
            skipSpace()
            if (index >= end || at() != '"') fail("a member name was expected")
            val key = parseName()
            val twice = if (large != null) large.containsKey(key) else SmallFields.indexOf(slots, count, key) >= 0
            if (twice) fail("the member name \"${key.take(64)}\" twice")
            skipSpace()
            if (index >= end || at() != ':') fail("':' was expected")
            index += step
            skipSpace()
            val value = parseValue(depth)
            if (large != null) {
                large[key] = value
            } else if (count < SmallFields.MAX_SIZE) {
                if (2 * count == slots.size) slots = slots.copyOf(2 * SmallFields.MAX_SIZE)
                slots[2 * count] = key
                slots[2 * count + 1] = value
                count += 1
            } else {
                large = LinkedHashMap()
                for (member in 0 until count) large[slots[2 * member] as String] = slots[2 * member + 1] as JsonValue
                large[key] = value
            }
            skipSpace()
            if (index >= end) fail("an unterminated object")
            when (at()) {
                ',' -> index += step
                '}' -> {
                    index += step
                    return JsonObject(large ?: SmallFields(slots, count))
                }
                else -> fail("',' or '}' was expected")
            }
        }
    }

    private fun parseArray(depth: Int): JsonValue {
        if (depth > JsonValue.MAX_DEPTH) fail("nesting deeper than ${JsonValue.MAX_DEPTH}")
        index += step
        val values = ArrayList<JsonValue>()
        skipSpace()
        if (index < end && at() == ']') {
            index += step
            return JsonArray(values)
        }
        while (true) {
            skipSpace()
            values.add(parseValue(depth))
            skipSpace()
            if (index >= end) fail("an unterminated array")
            when (at()) {
                ',' -> index += step
                ']' -> {
                    index += step
                    return JsonArray(values)
                }
                else -> fail("',' or ']' was expected")
            }
        }
    }

    /** A string, at its opening quote. */
    fun parseString(): String = string(true, false) ?: ""

    /**
     * A string that recurs from frame to frame (a member name, a frame's event or channel), at
     * its opening quote: as [parseString], but a short one written without escapes is taken
     * from [NAMES] when it is there (no new String), and put there when not.
     */
    fun parseName(): String = string(true, true) ?: ""

    /** Passes a string, at its opening quote, by [parseString]'s rules, building nothing. */
    fun skipString() {
        string(false, false)
    }

    /**
     * A string (`null` unless [keep]): runs without escapes are copied whole (most strings
     * have none: one substring; with [shared], a short one from [NAMES]).
     */
    private fun string(keep: Boolean, shared: Boolean): String? {
        at()
        index += step
        var run = index
        var out: StringBuilder? = null
        while (true) {
            // Characters that stand for themselves, passed in a tight loop (most of a string).
            while (index < end) {
                val char = text[index]
                if (char == '"' || char == '\\' || char < ' ') break
                index += 1
            }
            if (index >= end) fail("an unterminated string")
            val char = at()
            when {
                char == '"' -> {
                    val value = when {
                        !keep -> null
                        out != null -> out.append(text, run, index).toString()
                        shared -> sharedName(run, index)
                        else -> text.substring(run, index)
                    }
                    index += step
                    return value
                }
                char == '\\' -> {
                    if (keep) out = flush(out, run)
                    if (index + step >= end) fail("an unterminated escape")
                    index += step
                    val letter = at()
                    index += step
                    val code = if (letter == 'u') readHex() else escapeOf(letter)
                    if (code < 0) fail("an invalid escape")
                    out?.append(code.toChar())
                    run = index
                }
                char < ' ' -> fail("a control character in a string")
                else -> {
                    // A character the enclosing string escaped (`\u00e9` in a frame's data): decoded, not copied.
                    if (keep) out = flush(out, run).append(char)
                    index += step
                    run = index
                }
            }
        }
    }

    /**
     * [from, to) of [text] as a String: the one in [NAMES] with those characters when there is
     * one, else a new one, put there (longer than [MAX_NAME], always a new one).
     */
    private fun sharedName(from: Int, to: Int): String {
        val length = to - from
        if (length == 0 || length > MAX_NAME) return text.substring(from, to)
        val slot = slotOf(text, from, to)
        val known = NAMES[slot]
        if (known != null && known.length == length && text.startsWith(known, from)) return known
        val made = text.substring(from, to)
        NAMES[slot] = made
        return made
    }

    /** [out] (made when missing: sized once for the rest of the text, at most 4 KiB) with the run from [run] to [index] appended. */
    private fun flush(out: StringBuilder?, run: Int): StringBuilder =
        (out ?: StringBuilder(Math.min(end - run, 4096))).append(text, run, index)

    /** The four hex digits of a `\u` escape, at the first: their UTF-16 unit. */
    private fun readHex(): Int {
        val first = index
        if (index + 4 > end) fail("a short \\u escape")
        var code = 0
        for (count in 0 until 4) {
            if (index >= end) fail("a short \\u escape")
            val digit = hexValue(at())
            if (digit < 0) {
                index = first
                fail("an invalid \\u escape")
            }
            code = code * 16 + digit
            index += step
        }
        return code
    }

    /**
     * A number, as Double.parseDouble reads its text, bit for bit. Its digits are read once: at
     * most 15 of them without an exponent (ids, times, counts, prices, coordinates) are an
     * integer and a power of ten each exact in a Double, so the one division rounds to the
     * nearest Double as Double.parseDouble does (Clinger's fast path, "How to read floating point
     * numbers accurately", 1990), and the value is made on the way. Any other number is read by
     * Double.parseDouble from its text.
     */
    private fun parseNumber(): JsonValue {
        val start = index
        val escapesBefore = decodedEscapes
        var negative = false
        if (index < end && at() == '-') {
            negative = true
            index += step
        }
        if (index >= end) fail("a number was expected")
        val first = at()
        var value = 0L
        var count = 0 // digits read; past 15 the value is not used (and stops growing at 18)
        var decimals = 0
        if (first == '0') {
            index += step
            count = 1
        } else if (first in '1'..'9') {
            while (index < end) {
                val char = at()
                if (char !in '0'..'9') break
                if (count < 18) value = value * 10 + (char - '0')
                count += 1
                index += step
            }
        } else {
            fail("a value was expected")
        }
        if (index < end && at() == '.') {
            index += step
            val digits = index
            while (index < end) {
                val char = at()
                if (char !in '0'..'9') break
                if (count < 18) value = value * 10 + (char - '0')
                count += 1
                decimals += 1
                index += step
            }
            if (index == digits) fail("digits after '.' were expected")
        }
        var exponent = false
        if (index < end && (at() == 'e' || at() == 'E')) {
            exponent = true
            index += step
            if (index < end && (at() == '+' || at() == '-')) index += step
            val digits = index
            while (index < end && at() in '0'..'9') index += step
            if (index == digits) fail("digits of an exponent were expected")
        }
        if (!exponent && count <= 15) {
            val magnitude = if (decimals > 0) value.toDouble() / POWERS_OF_TEN[decimals] else value.toDouble()
            return JsonNumber(if (negative) -magnitude else magnitude)
        }
        // An escape read on the way (in the number, or the character after it): decoded text.
        val digits = if (decodedEscapes != escapesBefore && hasEscape(start, index)) decoded(start, index) else text.substring(start, index)
        return JsonNumber(digits.toDouble())
    }

    /** Whether [from, to) holds a backslash: an escape of the escaped range. */
    private fun hasEscape(from: Int, to: Int): Boolean {
        for (position in from until to) if (text[position] == '\\') return true
        return false
    }

    /** What [from, to) of an escaped range stands for (a number with an escape in it: rare). */
    private fun decoded(from: Int, to: Int): String {
        val resume = index
        val out = StringBuilder(to - from)
        index = from
        while (index < to) {
            out.append(at())
            index += step
        }
        index = resume
        return out.toString()
    }
}

/**
 * The members of a parsed object of at most [MAX_SIZE] members, in their order, in one array
 * of names and values searched in order: a room event's payload, its `data` and its `meta` have
 * two or three members each, and a LinkedHashMap's table and entries cost more to make than
 * such a search costs to read. A read-only [Map] like any other: equality, hash code and text
 * as the [Map] contract says, so a [JsonObject] is equal to one built on a LinkedHashMap with
 * the same members.
 *
 * @param slots each member's name (a String) then its value (a [JsonValue]), the first [size]
 *   members set (no name twice).
 */
internal class SmallFields(
    private val slots: Array<Any?>,
    override val size: Int
) : AbstractMap<String, JsonValue>() {
    override fun get(key: String): JsonValue? {
        val index = indexOf(slots, size, key)
        return if (index < 0) null else slots[2 * index + 1] as JsonValue
    }

    override fun containsKey(key: String): Boolean = indexOf(slots, size, key) >= 0

    override val entries: Set<Map.Entry<String, JsonValue>>
        get() = object : AbstractSet<Map.Entry<String, JsonValue>>() {
            override val size: Int get() = this@SmallFields.size
            override fun iterator(): Iterator<Map.Entry<String, JsonValue>> = object : Iterator<Map.Entry<String, JsonValue>> {
                private var next = 0
                override fun hasNext(): Boolean = next < size
                override fun next(): Map.Entry<String, JsonValue> {
                    if (next >= size) throw NoSuchElementException()
                    val entry = java.util.AbstractMap.SimpleImmutableEntry<String, JsonValue>(slots[2 * next] as String, slots[2 * next + 1] as JsonValue)
                    next += 1
                    return entry
                }
            }
        }

    /** The bound and the search, shared with the parser that fills the array. */
    companion object {
        /** The most members kept this way (8): a larger object is a LinkedHashMap. */
        const val MAX_SIZE = 8

        /** Which of the first [count] members of [slots] is named [key], or -1. */
        fun indexOf(slots: Array<Any?>, count: Int, key: String): Int {
            for (member in 0 until count) if ((slots[2 * member] as String) == key) return member
            return -1
        }
    }
}
