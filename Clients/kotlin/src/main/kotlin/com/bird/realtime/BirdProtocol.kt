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

/** A frame as it travels: `data` is the JSON text of the payload (Pusher protocol 7). */
internal data class Frame(val event: String, val channel: String?, val data: String?, val userId: String?) {
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
         * re-encoded, as some servers send it embedded.
         */
        fun parse(text: String): Frame? {
            val value = JsonValue.parseOrNull(text) as? JsonObject ?: return null
            val event = value["event"]?.string ?: return null
            val raw = value["data"]
            val data = when {
                raw == null -> null
                raw is JsonString -> raw.value
                else -> raw.toString()
            }
            return Frame(event, value["channel"]?.string, data, value["user_id"]?.string)
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
            if (event.startsWith("$namespace:")) return event.substring(namespace.length + 1)
            if (event.startsWith("${namespace}_internal:")) return event.substring(namespace.length + 10)
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
