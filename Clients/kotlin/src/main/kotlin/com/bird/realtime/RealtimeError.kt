package com.bird.realtime

/**
 * An error told to `onError` handlers (seed, "Errors on the connection versus errors on a
 * channel": `bird.onError { error -> println("${error.code} ${error.message}") }`).
 */
data class RealtimeError(
    /** Where it comes from. */
    val type: Type,
    /** The close code or the server's code, when there is one (`4009` after that close). */
    val code: Int?,
    /** What happened. */
    val message: String,
    /** The exception, for [Type.HANDLER]. */
    val cause: Throwable? = null
) {
    /** Where an error comes from. */
    enum class Type {
        /** The server closed the socket with a close code. */
        CLOSED,

        /** The socket dropped (no close frame), could not open, or had to be given up (send queue full, connect timeout). */
        TRANSPORT,

        /** No frame arrived within the pong deadline after a ping (seed, "The stale-connection check"). */
        PONG_TIMEOUT,

        /** A handshake without a socket id. */
        HANDSHAKE,

        /** The server's `bird:error` not attributed to a channel. */
        SERVER,

        /** A frame the client cannot use. */
        PROTOCOL,

        /** An app handler threw (the other handlers still ran). */
        HANDLER,

        /** A room's trouble that belongs to no handler of the room (a delivery backlog, a request). */
        ROOM
    }
}

/**
 * Why an authorisation, a user authentication (`signin()`, seed: `bird.onSigninError { error -> … }`)
 * or a room auth request failed.
 */
data class AuthFailure(
    /** What failed. */
    val kind: Kind,
    /** The HTTP status, for [Kind.HTTP]. */
    val status: Int?,
    /** What happened. */
    val message: String
) {
    /** What failed. */
    enum class Kind {
        /** The endpoint answered a status other than 2xx. */
        HTTP,

        /** The answer is not what the protocol asks for. */
        INVALID,

        /** The endpoint cannot be reached. */
        TRANSPORT,

        /** No answer within the auth timeout (10 s). */
        TIMEOUT,

        /** No endpoint is configured for it. */
        NOT_CONFIGURED,

        /** The realtime server refused the signin (`bird:error` 4009). */
        REFUSED
    }
}

/**
 * A room's error, as `ready()`, `history` and `send` throw it and the room's `error` event
 * tells it: [code] is docs/rooms-protocol.md's ("Error codes": `forbidden`, `no_rule`, `full`,
 * `expired` …) or the client's own (`not_recovered`, `auth_failed`, `unauthorized`, `kicked`,
 * `left`, `disconnected`, `timed_out`, `bad_data`, `not_supported`, `too_many_rooms`).
 */
class RoomError(
    /** The code. */
    val code: String,
    /** What happened. */
    message: String,
    /** Why events were not recovered, for `not_recovered` (`epoch_changed`, `expired` …). */
    val reason: String? = null,
    /** For `not_recovered` told before a replay: exactly which events will not come. */
    val gap: RoomGap? = null
) : Exception(message) {
    override fun toString(): String = "RoomError($code: $message${if (reason != null) ", reason: $reason" else ""})"

    /** The error as the room's `error` event's data: `{"code", "message", "reason"?, "gap"?}`. */
    fun toJson(): JsonValue {
        val fields = LinkedHashMap<String, JsonValue>()
        fields["code"] = JsonString(code)
        fields["message"] = JsonString(message ?: "")
        if (reason != null) fields["reason"] = JsonString(reason)
        if (gap != null) fields["gap"] = gap.toJson()
        return JsonObject(fields)
    }
}

/**
 * Missed events a resume cannot bring, as the server tells them before the replay of what is
 * still kept (docs/rooms-protocol.md "Replay", the `gap` event): the app fetches exactly that
 * range from its own records (the webhook's room events carry the same ids).
 */
data class RoomGap(
    /** `expired`, `epoch_changed` or `too_large`. */
    val reason: String,
    /** The epoch of what follows. */
    val epoch: String,
    /** The first missing id of [epoch]; `null` when none of it is missing. */
    val first: Long?,
    /** The last missing id of [epoch]. */
    val last: Long?,
    /** When the first event that follows was kept (ms since 1970): every missing one was kept before it. */
    val before: Long?,
    /** After an epoch change, the position in the lost epoch: everything after it is gone. */
    val previous: RoomPosition?
) {
    /** The gap as the server sent it. */
    fun toJson(): JsonValue {
        val fields = LinkedHashMap<String, JsonValue>()
        fields["reason"] = JsonString(reason)
        fields["epoch"] = JsonString(epoch)
        if (first != null && last != null) {
            fields["first"] = JsonNumber(first.toDouble())
            fields["last"] = JsonNumber(last.toDouble())
        }
        if (before != null) fields["before"] = JsonNumber(before.toDouble())
        if (previous != null) fields["previous"] = JsonObject(linkedMapOf<String, JsonValue>("epoch" to JsonString(previous.epoch), "id" to JsonNumber(previous.id.toDouble())))
        return JsonObject(fields)
    }

    /** Reading a `gap` event's data. */
    companion object {
        /**
         * Reads `{reason, epoch, first?, last?, before?, previous?}` strictly: ids whole and
         * below 2^53, `first` ≤ `last`, both or neither; `null` when it is not that shape.
         */
        @JvmStatic
        fun parse(data: JsonValue): RoomGap? {
            val reason = data["reason"]?.string ?: return null
            val epoch = data["epoch"]?.string ?: return null
            if (epoch.isEmpty()) return null
            val firstValue = data["first"]
            val lastValue = data["last"]
            if ((firstValue == null) != (lastValue == null)) return null
            var first: Long? = null
            var last: Long? = null
            if (firstValue != null && lastValue != null) {
                val from = idOf(firstValue) ?: return null
                val to = idOf(lastValue) ?: return null
                if (from < 1 || from > to) return null
                first = from
                last = to
            }
            val before = data["before"]?.let { idOf(it) ?: return null }
            val previous = data["previous"]?.let { value ->
                RoomPosition(value["epoch"]?.string ?: return null, idOf(value["id"]) ?: return null)
            }
            return RoomGap(reason, epoch, first, last, before, previous)
        }

        /** A whole number from 0 below 2^53, or `null`. */
        private fun idOf(value: JsonValue?): Long? =
            value?.number?.let { if (it >= 0 && it < 9.0e15 && it == Math.rint(it)) it.toLong() else null }
    }
}

/**
 * Where a room event sits in the room's stream (rooms seed: "meta: from, id, at, replayed").
 */
data class RoomEventMeta(
    /** The kept event's id (grows by one); 0 for the room's own events. */
    val id: Long,
    /** When it was kept, milliseconds since 1970 (the server's clock); 0 for the room's own events. */
    val at: Long,
    /** The user who sent it, as the app's server vouched; `null` for the app's server. */
    val from: String?,
    /** Sent from history after a reconnect: published while the client was away. */
    val replayed: Boolean,
    /** The epoch of the room's stream the id belongs to (ids start again at 1 in a new one); `null` for the room's own events. */
    val epoch: String? = null
) {
    /** The meta of the room's own events. */
    companion object {
        /** The meta of the room's own events (`joined`, `join`, `leave`, `count`, `error`, `kicked`): nothing kept. */
        @JvmField val SYSTEM = RoomEventMeta(0, 0, null, false)
    }
}

/** One event of a history page. */
data class HistoryEvent(
    /** The event name. */
    val event: String,
    /** Its data. */
    val data: JsonValue,
    /** Its id, time and sender (`replayed` is false). */
    val meta: RoomEventMeta
)

/** A page of a room's history: at most 100 events, oldest first (rooms seed, "Paging back"). */
data class HistoryPage(
    /** The events, oldest first. */
    val events: List<HistoryEvent>,
    /** Older events are kept: ask with `before = events.first().meta.id`. */
    val more: Boolean
)
