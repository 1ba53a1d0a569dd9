package com.bird.realtime

import java.util.Base64

// Room tokens (docs/rooms-protocol.md "Tokens", "Auth route", "What a client does"; the browser
// client's room-tokens.js): every room joined in the same moment goes into one auth request
// (rooms seed), each token is kept until 10 minutes before it expires in the server's time, a
// joined room refreshes its token then, and public rooms join with the grants of the backend's
// `config()`.

/** The auth route's answer (`{"time", "rooms": {name: {token, expires} | {error}}}`), or why there is none. */
internal sealed class RoomAuthResult {
    data class Answered(val answer: JsonObject) : RoomAuthResult()
    data class Failed(val failure: AuthFailure) : RoomAuthResult()
}

/**
 * The backend's `config()` (rooms seed, "Rooms anyone may join"): a grant per public pattern,
 * so public rooms are joined with no request to the app's server.
 */
data class RoomGrants(
    /** The backend's clock when it answered, milliseconds since 1970. */
    val time: Long,
    /** One per public pattern. */
    val grants: List<RoomGrant>
) {
    /** Reading `config()`'s answer. */
    companion object {
        /**
         * Reads `{"time", "grants": [{"pattern", "token", "expires"}]}` (docs/rooms-protocol.md "Auth route").
         *
         * @param json the answer's JSON text.
         * @return the grants.
         * @throws IllegalArgumentException when the text is not that shape.
         */
        @JvmStatic
        fun parse(json: String): RoomGrants {
            val value = JsonValue.parseOrNull(json) ?: throw IllegalArgumentException("config() is not JSON")
            val time = value["time"]?.long ?: throw IllegalArgumentException("config() without time")
            val list = value["grants"]?.array ?: throw IllegalArgumentException("config() without grants")
            return RoomGrants(time, list.map {
                RoomGrant(
                    it["pattern"]?.string ?: throw IllegalArgumentException("a grant without pattern"),
                    it["token"]?.string ?: throw IllegalArgumentException("a grant without token"),
                    it["expires"]?.long ?: throw IllegalArgumentException("a grant without expires")
                )
            })
        }
    }
}

/** A public pattern's grant. */
data class RoomGrant(
    /** The pattern (`news:{topic}`: `{param}` stands for one segment). */
    val pattern: String,
    /** The grant's token (a JWT). */
    val token: String,
    /** Its expiry, milliseconds on the backend's clock. */
    val expires: Long
)

internal object RoomTokens {
    /** Tokens are given up this long before they expire (rooms seed: "until 10 minutes before it expires"). */
    const val TOKEN_MARGIN = 600_000L
    /** The longest life a token is read as having (30 days): a later `expires` is read as this. */
    const val LONGEST_TOKEN_LIFE = 30L * 86_400_000L
    /** The shortest time between two auth requests for one room (5 s, as the Swift client). */
    const val MINIMUM_AUTH_INTERVAL = 5_000L
    /** Most rooms one auth request names (the route's limit, and the server's rooms per connection). */
    const val MAX_ROOMS_PER_REQUEST = 100
    /** Tries of one batch before its rooms fail with `auth_failed`. */
    const val MAX_AUTH_ATTEMPTS = 5
    /** The longest token accepted (8 KiB, the server's limit). */
    const val MAX_TOKEN_LENGTH = 8192

    /**
     * A token whose expiry is [expires] on a clock that read [time] when it answered, received
     * at [now]: the remaining life is measured on the server's clock, so the client's own clock
     * does not matter; the token is kept until `expires − min(10 min, life / 2)`.
     */
    fun makeToken(value: String, expires: Long, time: Long, now: Long): RoomToken {
        val life = Math.min(Math.max(0L, expires - time), LONGEST_TOKEN_LIFE)
        return RoomToken(value, now + life - Math.min(TOKEN_MARGIN, life / 2))
    }

    /**
     * The rule a room token carries, its claims read without checking the signature (the
     * server checks it; the client only learns whether the room is sealed), or `null`.
     */
    fun tokenRule(token: String): JsonValue? {
        val parts = token.split('.')
        if (parts.size < 2) return null
        return try {
            val claims = JsonValue.parseOrNull(String(Base64.getUrlDecoder().decode(parts[1]), Charsets.UTF_8))
            claims?.get("rule") as? JsonObject
        } catch (error: IllegalArgumentException) {
            null
        }
    }

    /** Whether a room name matches a pattern such as `order:{id}` (`{param}`: one or more name characters other than `:`). */
    fun matchesPattern(name: String, pattern: String): Boolean {
        val source = pattern.split(Regex("\\{[^}]*\\}")).joinToString("[A-Za-z0-9_\\-=@,.;]+") { Regex.escape(it) }
        return Regex("^$source$").matches(name)
    }

    /** The usable grant of a public pattern the room matches. */
    fun grantFor(rooms: RoomMachine, name: String, now: Long): RoomToken? =
        rooms.grants.firstOrNull { now < it.second.keepUntil && matchesPattern(name, it.first) }?.second

    /** Puts a room in the next batch (at most one auth request per room every 5 s). */
    fun addToBatch(rooms: RoomMachine, name: String, now: Long): List<Action> {
        val record = rooms.records[name] ?: return emptyList()
        val last = record.lastAuthAt
        if (last != null && now < last + MINIMUM_AUTH_INTERVAL) {
            val attempt = (record.phase as? RoomPhase.Joining)?.attempt
            if (attempt?.step == Step.NeedsToken) attempt.step = Step.Waiting
            return listOf(Action.Schedule(TimerKey(TimerKind.ROOM_RETRY, name = name), last + MINIMUM_AUTH_INTERVAL))
        }
        if (name !in rooms.batch) rooms.batch.add(name)
        if (rooms.batchArmed) return emptyList()
        rooms.batchArmed = true
        return listOf(Action.Schedule(TimerKey(TimerKind.ROOM_BATCH), now + rooms.connection.config.roomAuthBatchWindow))
    }

    /** The batching window closed: one request per 100 rooms. */
    fun batchDue(rooms: RoomMachine, now: Long): List<Action> {
        rooms.batchArmed = false
        val names = rooms.batch.filter {
            when (val phase = rooms.records[it]?.phase) {
                is RoomPhase.Joining -> phase.attempt.step == Step.NeedsToken
                is RoomPhase.Joined -> phase.membership.renewal != null
                else -> false
            }
        }
        rooms.batch.clear()
        val actions = ArrayList<Action>()
        for (chunk in names.chunked(MAX_ROOMS_PER_REQUEST)) {
            for (name in chunk) rooms.records[name]?.lastAuthAt = now
            actions.addAll(ask(rooms, AuthEntry(chunk, 1, false), now, null))
        }
        return actions
    }

    /** Sends one auth request with its deadline, or arms its retry after [delay] milliseconds. */
    private fun ask(rooms: RoomMachine, entry: AuthEntry, now: Long, delay: Long?): List<Action> {
        if (entry.names.isEmpty()) return emptyList()
        val request = rooms.connection.nextRequest()
        rooms.authorizations[request] = entry
        for (name in entry.names) {
            when (val phase = rooms.records[name]?.phase) {
                is RoomPhase.Joining -> phase.attempt.step = Step.Authorizing(request)
                is RoomPhase.Joined -> phase.membership.renewal = Renewal.Authorizing(request)
                else -> {}
            }
        }
        if (delay != null) return listOf(Action.Schedule(TimerKey(TimerKind.ROOM_AUTH_RETRY, request = request), now + delay))
        return listOf(
            Action.Schedule(TimerKey(TimerKind.ROOM_AUTH, request = request), now + rooms.connection.config.authTimeout),
            Action.AuthorizeRooms(entry.names, request)
        )
    }

    /** A retry timer of the auth route fired. */
    fun authRetryDue(rooms: RoomMachine, request: Long, now: Long): List<Action> {
        val entry = rooms.authorizations.remove(request) ?: return emptyList()
        return ask(rooms, entry.copy(names = entry.names.filter { rooms.awaits(it, request) }), now, null)
    }

    /**
     * The auth route answered (or failed, or timed out) for [request]. A 401 is asked once
     * more; a 403, and any other 4xx but 408 and 429, fails every room of the request; other
     * failures are retried after 1, 2, 4, 8 s, then the rooms fail (docs/rooms-protocol.md "Tokens").
     */
    fun authorized(rooms: RoomMachine, request: Long, result: RoomAuthResult, now: Long): List<Action> {
        val entry = rooms.authorizations.remove(request) ?: return emptyList()
        val names = entry.names.filter { rooms.awaits(it, request) }
        val actions = ArrayList<Action>()
        actions.add(Action.Cancel(TimerKey(TimerKind.ROOM_AUTH, request = request)))
        actions.add(Action.CancelRequest(request))
        fun failAll(code: String, message: String): List<Action> = actions + names.flatMap { rooms.fail(it, RoomErrorInfo(code, message)) }
        val failure = when (result) {
            is RoomAuthResult.Answered -> {
                for (name in names) actions.addAll(entryReceived(rooms, name, result.answer, now))
                return actions
            }
            is RoomAuthResult.Failed -> result.failure
        }
        val status = if (failure.kind == AuthFailure.Kind.HTTP) failure.status ?: 0 else 0
        if (status == 401 && !entry.retriedUnauthorized) return actions + ask(rooms, entry.copy(names = names, retriedUnauthorized = true), now, null)
        if (status == 401) return failAll("unauthorized", "the auth route answered 401 twice: ${failure.message}")
        if (status == 403) return failAll("forbidden", "the auth route answered 403: ${failure.message}")
        if (status in 400..499 && status != 408 && status != 429) return failAll("auth_failed", "the auth route answered $status: ${failure.message}")
        if (failure.kind == AuthFailure.Kind.NOT_CONFIGURED) return failAll("auth_failed", failure.message)
        if (entry.attempt >= MAX_AUTH_ATTEMPTS) return failAll("auth_failed", "${failure.message} (after ${entry.attempt} tries)")
        val delay = Math.min(1000L shl (entry.attempt - 1), 30_000L)
        return actions + ask(rooms, entry.copy(names = names, attempt = entry.attempt + 1), now, delay)
    }

    /** One room's entry of a successful answer. */
    private fun entryReceived(rooms: RoomMachine, name: String, answer: JsonObject, now: Long): List<Action> {
        val record = rooms.records[name] ?: return emptyList()
        (record.phase as? RoomPhase.Joined)?.membership?.renewal = null
        val granted = answer["rooms"]?.get(name) as? JsonObject
            ?: return rooms.fail(name, RoomErrorInfo("auth_failed", "the auth route's answer has no entry for the room"))
        granted["error"]?.string?.let { return rooms.fail(name, RoomErrorInfo(it, "the auth route refused the room")) }
        val token = granted["token"]?.string
        val expires = granted["expires"]?.long
        if (token.isNullOrEmpty() || token.length > MAX_TOKEN_LENGTH || expires == null) {
            return rooms.fail(name, RoomErrorInfo("auth_failed", "the auth route's entry has neither a token with its expiry nor an error"))
        }
        // Sealed rooms need XSalsa20-Poly1305, which the JDK lacks: not supported yet. A room
        // whose answer carries a key, or whose token's rule says sealed, is never read as plaintext.
        val key = granted["key"]
        if ((key != null && !key.isNull) || tokenRule(token)?.get("sealed")?.bool == true) {
            return rooms.fail(name, RoomErrorInfo("not_supported", "sealed rooms are not supported by this client yet"))
        }
        val kept = makeToken(token, expires, answer["time"]?.long ?: 0L, now)
        if (now >= kept.keepUntil) return rooms.fail(name, RoomErrorInfo("expired", "the auth route gave a token that expires at once"))
        return rooms.tokenReceived(name, kept, now)
    }

    /**
     * A room's token reached its keep time: while joined, a new one is asked for (and sent as a
     * refresh); otherwise the next join asks.
     */
    fun tokenDue(rooms: RoomMachine, name: String, now: Long): List<Action> {
        val record = rooms.records[name] ?: return emptyList()
        val token = record.token ?: return emptyList()
        if (now < token.keepUntil) return emptyList()
        val membership = (record.phase as? RoomPhase.Joined)?.membership ?: return emptyList()
        if (membership.renewal != null) return emptyList()
        val grant = grantFor(rooms, name, now)
        if (grant != null) return rooms.tokenReceived(name, grant, now)
        membership.renewal = Renewal.NeedsToken
        return addToBatch(rooms, name, now)
    }
}
