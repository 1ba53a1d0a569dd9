package com.bird.realtime

/**
 * The protocol's names as the seed's Kotlin snippets use them:
 * `room.bind(BirdProtocol.Event.SUBSCRIPTION_SUCCEEDED) { … }` (realtime-connection-lifecycle
 * seed, "What happens to your channels"). Pusher Channels protocol 7 frames in the client's
 * namespace (`bird`; docs/DESIGN.md "The wire protocol").
 */
object BirdProtocol {
    /** The namespace of the reference server (`bird:subscribe`, `bird_internal:subscription_succeeded`). */
    const val NAMESPACE: String = "bird"

    /** The protocol version the client speaks (Pusher's `protocol=7`). */
    const val VERSION: Int = 7

    /**
     * A protocol event a channel delivers to its bindings, by its bare name; bound, it is
     * heard in the namespace the client speaks (`bird:subscription_succeeded`).
     */
    class Event(
        /** The bare name (`subscription_succeeded`). */
        val name: String
    ) {
        /**
         * The event's full name in [namespace].
         *
         * @param namespace the protocol namespace (`bird`).
         * @return `bird:subscription_succeeded`.
         */
        fun fullName(namespace: String): String = "$namespace:$name"

        override fun equals(other: Any?): Boolean = other is Event && other.name == name
        override fun hashCode(): Int = name.hashCode()
        override fun toString(): String = name

        /** The events the seed names. */
        companion object {
            /**
             * The subscription is in place (after every resubscription); a presence channel has
             * its members then. Data: `{}`, or presence's `{"presence": {"ids", "hash", "count"}}`.
             */
            @JvmField val SUBSCRIPTION_SUCCEEDED = Event("subscription_succeeded")

            /**
             * The subscription was refused: the server's `{"code", "message"}`, or the failed
             * authorisation's `{"type": "AuthError", "error", "status"}`.
             */
            @JvmField val SUBSCRIPTION_ERROR = Event("subscription_error")

            /** A member joined a presence channel: `{"id", "info"}`. */
            @JvmField val MEMBER_ADDED = Event("member_added")

            /** A member left a presence channel: `{"id", "info"}`. */
            @JvmField val MEMBER_REMOVED = Event("member_removed")

            /** An error the server attributed to the channel: `{"message", "code"?}`. */
            @JvmField val ERROR = Event("error")
        }
    }
}

/**
 * A frame as it travels: `data` is the JSON text of the payload (Pusher protocol 7).
 *
 * [parse] reads the frame in one pass. A string `data` whose text is a JSON object (a room
 * frame's, most events') is parsed where it is in the frame as it is passed, its escapes decoded
 * on the way, so its text is read once ([dataObject], [dataValue]); any string `data` is kept as
 * where it is in the text and unescaped into a String only when asked ([data]).
 */
internal class Frame private constructor(
    /** The event's name (`bird:room_event`). */
    val event: String,
    /** The channel, or `null` (absent, or not a string). */
    val channel: String?,
    /** `user_id`, or `null` (absent, or not a string). */
    val userId: String?,
    /** The frame's text. */
    private val text: String,
    /** Where a string `data`'s content starts in [text] (after its opening quote), or -1. */
    private val dataStart: Int,
    /** Where it ends (at its closing quote). */
    private val dataEnd: Int,
    /** A `data` that is not a string, re-encoded (some servers send it embedded), or `null`. */
    private val embedded: String?,
    /** A string `data` whose content is a JSON object, that object (read as the frame was). */
    private val parsed: JsonObject?
) {
    private var unescaped: String? = null

    /** The payload's text: a string `data` unescaped (once, when first read), an embedded one re-encoded, or `null` without `data`. */
    val data: String?
        get() {
            if (dataStart < 0) return embedded
            unescaped?.let { return it }
            val value = JsonParser(text, dataStart - 1).parseString()
            unescaped = value
            return value
        }

    /**
     * The payload as a JSON object, or `null` (no `data`, not JSON, not an object), as
     * [parseObject] of [data] gives it: a string `data` is parsed where it is in the frame,
     * its escapes decoded on the way (JsonParser's escaped range: the same value, refusals and
     * limits, without the unescaped copy and a second pass).
     */
    fun dataObject(): JsonObject? {
        if (parsed != null) return parsed
        if (dataStart < 0) return parseObject(embedded)
        return try {
            JsonParser(text, dataStart, dataEnd, escaped = true).parseDocument() as? JsonObject
        } catch (error: JsonException) {
            null
        }
    }

    /** The payload as [parseData] of [data] gives it, without reading an object payload again. */
    fun dataValue(): JsonValue? = parsed ?: parseData(data)

    companion object {
        /** The largest frame read from the server, in UTF-16 code units (4 MiB, the Swift client's `maxMessageSize`). */
        const val MAX_SIZE = 4 shl 20

        /**
         * Encodes a frame; [payload] is JSON-encoded into `data`.
         */
        fun encode(event: String, payload: JsonValue, channel: String? = null): String =
            encodeText(event, payload.toString(), channel)

        /** Encodes a frame whose data is already JSON text (or any text: Pusher's `data` is a string). */
        fun encodeText(event: String, data: String, channel: String? = null): String {
            val fields = LinkedHashMap<String, JsonValue>()
            fields["event"] = JsonString(event)
            if (channel != null) fields["channel"] = JsonString(channel)
            fields["data"] = JsonString(data)
            return JsonObject(fields).toString()
        }

        /**
         * Parses a frame: an object with a string `event`; a `data` that is not a string is
         * re-encoded, as some servers send it embedded. One pass with [JsonValue.parse]'s rules
         * (strict, a member name twice refused, nesting bounded): the members the client reads
         * are kept, the others checked and dropped; a string `data` is checked, and kept as
         * its place in [text] (see [data], [dataObject]).
         *
         * @param text the frame's text.
         * @return the frame, or `null` when the text is not JSON or not such an object.
         */
        fun parse(text: String): Frame? = try {
            read(JsonParser(text), text)
        } catch (error: JsonException) {
            null
        }

        private fun read(json: JsonParser, text: String): Frame? {
            json.skipSpace()
            if (!json.take('{')) return null
            var event: String? = null
            var channel: String? = null
            var userId: String? = null
            var dataStart = -1
            var dataEnd = -1
            var embedded: JsonValue? = null
            var parsed: JsonObject? = null
            // The names read, as no name may come twice: the frame's own by bit, others in a set.
            var seen = 0
            var others: HashSet<String>? = null
            json.skipSpace()
            if (!json.take('}')) {
                do {
                    json.skipSpace()
                    if (!json.sees('"')) return null
                    // The frame's own names recognised in place (no String made); any other read.
                    var bit = when {
                        json.takeName("event") -> 1
                        json.takeName("channel") -> 2
                        json.takeName("data") -> 8
                        json.takeName("user_id") -> 4
                        else -> 0
                    }
                    if (bit == 0) {
                        val key = json.parseName()
                        bit = when (key) {
                            "event" -> 1 // written with an escape
                            "channel" -> 2
                            "user_id" -> 4
                            "data" -> 8
                            else -> 0
                        }
                        if (bit == 0 && !(others ?: HashSet<String>().also { others = it }).add(key)) return null
                    }
                    if (bit != 0) {
                        if (seen and bit != 0) return null
                        seen = seen or bit
                    }
                    json.skipSpace()
                    if (!json.take(':')) return null
                    json.skipSpace()
                    // The object's members are at depth 1, as in JsonValue.parse.
                    when (bit) {
                        1 -> event = stringMember(json)
                        2 -> channel = stringMember(json)
                        4 -> userId = (json.parseValue(1) as? JsonString)?.value
                        8 -> if (json.sees('"')) {
                            dataStart = json.index + 1
                            // An object's text (a room frame's, most events'): read as it is
                            // passed, its escapes decoded on the way, so it is read once.
                            val inner = if (dataStart < text.length && text[dataStart] == '{') JsonParser(text, dataStart, escaped = true) else null
                            parsed = inner?.parseEnclosed() as? JsonObject
                            if (inner != null && parsed != null) {
                                dataEnd = inner.index
                                json.passTo(dataEnd + 1)
                            } else {
                                json.skipString()
                                dataEnd = json.index - 1
                            }
                        } else {
                            embedded = json.parseValue(1)
                        }
                        else -> json.parseValue(1)
                    }
                    json.skipSpace()
                } while (json.take(','))
                if (!json.take('}')) return null
            }
            json.skipSpace()
            if (!json.atEnd || event == null) return null
            return Frame(event, channel, userId, text, dataStart, dataEnd, embedded?.toString(), parsed)
        }

        /** A member the client reads as a string: it, or `null` for another value (checked and dropped). */
        private fun stringMember(json: JsonParser): String? {
            if (json.sees('"')) return json.parseName()
            json.parseValue(1)
            return null
        }

        /** A payload's JSON text parsed; text that is not JSON is kept as a string (Pusher's convention for app events). */
        fun parseData(text: String?): JsonValue? {
            if (text == null) return null
            return JsonValue.parseOrNull(text) ?: JsonString(text)
        }

        /** A payload that must be a JSON object, or `null`. */
        fun parseObject(text: String?): JsonObject? = if (text == null) null else JsonValue.parseOrNull(text) as? JsonObject

        /**
         * The bare name of a protocol event (`bird:ping` → `ping`,
         * `bird_internal:subscription_succeeded` → `subscription_succeeded`), or `null` for an
         * app event or another namespace.
         */
        fun protocolName(event: String, namespace: String): String? {
            // The last answer again for the same event String (a parsed frame's event is shared
            // by parseName: a busy room's frames all hold one), without a substring each frame.
            val last = lastName
            if (last.event === event && last.namespace == namespace) return last.name
            val name = bareName(event, namespace)
            lastName = NameAnswer(event, namespace, name)
            return name
        }

        /** An answer of [protocolName]: immutable, so a thread reading [lastName] sees all of one. */
        private class NameAnswer(val event: String, val namespace: String, val name: String?)

        /** The last answer of [protocolName] (any thread's: a plain field holding a whole answer). */
        private var lastName = NameAnswer("", "", null)

        private fun bareName(event: String, namespace: String): String? {
            // `$namespace:` and `${namespace}_internal:` without building either (once a frame).
            if (!event.startsWith(namespace)) return null
            val rest = namespace.length
            if (event.length > rest && event[rest] == ':') return event.substring(rest + 1)
            if (event.startsWith("_internal:", rest)) return event.substring(rest + 10)
            return null
        }
    }
}

/** A channel's kind, from its name's prefix (Pusher's convention). */
internal enum class ChannelKind {
    PUBLIC, PRIVATE, PRESENCE, ENCRYPTED;

    companion object {
        fun of(name: String): ChannelKind = when {
            name.startsWith("private-encrypted-") -> ENCRYPTED
            name.startsWith("private-") -> PRIVATE
            name.startsWith("presence-") -> PRESENCE
            else -> PUBLIC
        }
    }
}
