package com.bird.realtime

// Rooms on the connection machine (rooms seed; docs/rooms-protocol.md "What a client does"; the
// browser client's room-machine.js, the Swift client's `ConnectionStateMachine+Rooms`):
// positions per room kept across sockets and rejoined with `since`, duplicates dropped by id,
// holes re-synchronised (at most 3 in a row, then told on the room, never silent), refusals
// retried or final. Frames are in RoomFrames.kt, tokens in RoomTokens.kt, history in RoomHistory.kt.

/** A `room_join` in flight: a first join, or a member's rejoin from its position. */
internal class Join(
    /** The socket it was sent on. */
    val generation: Long,
    /** The position it was sent from, or where its deadline last found it (a streamed replay that moves it re-arms the deadline). */
    var from: RoomPosition?,
    /** The server told a gap for it: its `joined` (`recovered: false`) is not told again. */
    var gapTold: Boolean = false
)

/** Where a join stands. */
internal sealed class Step {
    /** Nothing in flight: no socket, or a retry timer armed. */
    object Waiting : Step()
    /** In the next batch of the auth route. */
    object NeedsToken : Step()
    /** Its token is being asked for. */
    data class Authorizing(val request: Long) : Step()
    /** `room_join` sent; the replay and `joined` are awaited. */
    class Sent(val join: Join) : Step()
}

/** A join until its `joined`: where it stands, and what it learned on the way. */
internal class Attempt(
    var step: Step = Step.Waiting,
    /** Refusals retried in a row (`rate_limited`, `store_full`, a join with no answer). */
    var retries: Int = 0,
    /** The server refused this attempt's token once: a second refusal is final. */
    var tokenRefused: Boolean = false,
    /** Rejoins for holes in a replay (bounded). */
    var resyncs: Int = 0
)

/** A new token asked for while joined. */
internal sealed class Renewal {
    /** In the next batch of the auth route. */
    object NeedsToken : Renewal()
    /** Asked for. */
    data class Authorizing(val request: Long) : Renewal()
}

/** A member's rejoin from its position. */
internal sealed class Rejoin {
    /** Refused for now (`rate_limited`, `store_full`): made when the room's retry timer fires. */
    object PutOff : Rejoin()
    /** Waiting for the token the renewal brings. */
    object AwaitingToken : Rejoin()
    /** Sent. */
    class Sent(val join: Join) : Rejoin()
}

/** A membership on a socket. */
internal class Membership(
    /** The socket it is on. */
    val generation: Long,
    /** Rejoins for holes since the last clean `joined`. */
    var resyncs: Int = 0,
    /** Rejoins refused and retried in a row (`rate_limited`, `store_full`). */
    var retries: Int = 0,
    /** A new token on its way: sent as `room_refresh`, or used by the rejoin that waits for it. */
    var renewal: Renewal? = null,
    /** A rejoin from the position (a hole, or the server's `resync`). */
    var rejoin: Rejoin? = null
)

/**
 * What a room is doing; each case carries what only it has (the Swift client's
 * `RoomTable.Phase`, the browser client's `RoomPhase`). The public state is read from it.
 */
internal sealed class RoomPhase {
    /** From `join` (or a drop, or a refused token) until `joined`. */
    class Joining(val attempt: Attempt = Attempt()) : RoomPhase()
    /** Joined on a socket, also while it rejoins from its position. */
    class Joined(val membership: Membership) : RoomPhase()
    /** Over: the record's `error` says why; nothing rejoins it until the app joins again. */
    object Failed : RoomPhase()
}

/** A token the client keeps; tokens are not bound to a connection, so a reconnect reuses one until [keepUntil] (client clock, ms). */
internal data class RoomToken(val value: String, val keepUntil: Long)

/** One room as the machine keeps it; position and token outlive every socket. */
internal class RoomRecord {
    var phase: RoomPhase = RoomPhase.Joining()
    /** The public state (`LEFT` rooms are removed). */
    val state: RoomState
        get() = when (phase) {
            is RoomPhase.Joining -> RoomState.JOINING
            is RoomPhase.Joined -> RoomState.JOINED
            RoomPhase.Failed -> RoomState.FAILED
        }
    /** The join in flight: an attempt's sent join, or a member's sent rejoin. */
    val joinInFlight: Join?
        get() = when (val current = phase) {
            is RoomPhase.Joining -> (current.attempt.step as? Step.Sent)?.join
            is RoomPhase.Joined -> (current.membership.rejoin as? Rejoin.Sent)?.join
            RoomPhase.Failed -> null
        }
    /** The socket the room is on: its membership's, or its sent join's. */
    val socket: Long?
        get() = when (val current = phase) {
            is RoomPhase.Joined -> current.membership.generation
            else -> joinInFlight?.generation
        }
    /** The epoch of [position], or `null` before the first `joined`. */
    var epoch: String? = null
        private set
    /** The id of [position] (0 before the first `joined`): a kept event delivered moves it, in its epoch. */
    var lastId: Long = 0
    /**
     * Rejoins start after it: the epoch and the last kept event's id, kept apart so a kept event
     * moves the id ([lastId]) without making a position; one is made when read.
     */
    var position: RoomPosition?
        get() = epoch?.let { RoomPosition(it, lastId) }
        set(value) {
            epoch = value?.epoch
            lastId = value?.id ?: 0
        }
    /** The token kept across reconnects. */
    var token: RoomToken? = null
    /** Why it failed, or the last gap it reported. */
    var error: RoomErrorInfo? = null
    /** When the auth route was last asked for it. */
    var lastAuthAt: Long? = null
    /** The room's users, from `joined` and `count`. */
    var count: Long? = null
    /** A presence room's members by id, with their info. */
    var members = LinkedHashMap<String, JsonValue?>()
}

/** An auth request in flight or waiting to retry. */
internal data class AuthEntry(val names: List<String>, val attempt: Int, val retriedUnauthorized: Boolean)

/** A history request in flight. */
internal data class HistoryEntry(val room: String, val generation: Long)

internal class RoomMachine(val connection: ConnectionMachine) {
    companion object {
        /** Most rooms a client joins: the server's limit per connection (`too_many_rooms`). */
        const val MAX_ROOMS = 100
        /** Largest event data the server accepts (10 KiB of JSON text). */
        const val MAX_ROOM_DATA = 10_240
        /** The room's own events, which nobody may send. */
        val ROOM_OWN_EVENTS = setOf("joined", "join", "leave", "count", "error", "kicked")

        private val ROOM_NAME = Regex("^[A-Za-z0-9_\\-=@,.;:]{1,164}$")
        private val RESERVED_EVENT = Regex("^(bird|pusher)(_internal)?:.*", RegexOption.DOT_MATCHES_ALL)

        /** Whether [name] is a valid room name (1…164 of `A–Z a–z 0–9 _ - = @ , . ; :`). */
        fun isValidRoomName(name: String): Boolean = ROOM_NAME.matches(name)

        /**
         * Whether [event] may be sent into a room: 1…200 bytes, no control characters, no
         * protocol namespace, none of the room's own event names.
         */
        fun isValidRoomEvent(event: String): Boolean =
            event.isNotEmpty() && event.toByteArray(Charsets.UTF_8).size <= 200 &&
                event.none { it < ' ' || it == '\u007f' } && !RESERVED_EVENT.matches(event) && event !in ROOM_OWN_EVENTS
    }

    /** In join order (the rejoin order). */
    val records = LinkedHashMap<String, RoomRecord>()
    /** Rooms waiting for the next auth request. */
    val batch = ArrayList<String>()
    var batchArmed = false
    /** Auth requests in flight or waiting to retry. */
    val authorizations = HashMap<Long, AuthEntry>()
    /** History requests in flight. */
    val history = HashMap<Long, HistoryEntry>()
    /** Public grants: a pattern and its token. */
    var grants: List<Pair<String, RoomToken>> = emptyList()

    /** The generation of a connected socket. */
    fun connectedGeneration(): Long? = if (connection.socketId == null) null else connection.generation

    /** The public grants of the backend's `config()`, received at [now]. */
    fun setGrants(config: RoomGrants, now: Long) {
        grants = config.grants.map { it.pattern to RoomTokens.makeToken(it.token, it.expires, config.time, now) }
    }

    /** `join(name)`: a new room (or a failed one again) starts joining. */
    fun join(name: String, now: Long): List<Action> {
        val existing = records[name]
        if (existing != null && existing.state != RoomState.FAILED) return emptyList()
        val full = existing == null && records.size >= MAX_ROOMS
        val record = existing ?: RoomRecord()
        record.phase = RoomPhase.Joining()
        record.error = null
        records[name] = record
        if (full) return fail(name, RoomErrorInfo("too_many_rooms", "a client joins at most $MAX_ROOMS rooms (the server's limit per connection)"))
        if (!isValidRoomName(name)) return fail(name, RoomErrorInfo("invalid_room", "not a valid room name (1…164 of A–Z a–z 0–9 _ - = @ , . ; :)"))
        return startJoin(name, now)
    }

    /**
     * `leave(name)`: `room_leave` when joined or joining; the room is forgotten with its
     * position and token; history calls in flight end with `left`.
     */
    fun leave(name: String): List<Action> {
        val record = records[name] ?: return emptyList()
        val actions = ArrayList(cancelTimers(name))
        val generation = record.socket
        if (generation != null) actions.add(Action.Send(frameText("room_leave", JsonObject(mapOf("room" to JsonString(name)))), generation))
        batch.remove(name)
        val ended = history.filterValues { it.room == name }.keys.toList()
        for (request in ended) {
            history.remove(request)
            actions.add(Action.Cancel(TimerKey(TimerKind.ROOM_HISTORY, request = request)))
            actions.add(Action.History(request, null, RoomErrorInfo("left", "the room was left")))
        }
        records.remove(name)
        return actions
    }

    /**
     * `room.send(event, data)`: only while joined.
     *
     * @param text the data's JSON text.
     * @return why nothing was sent, and the send.
     */
    fun send(name: String, event: String, text: String): Pair<RoomErrorInfo?, List<Action>> {
        val membership = (records[name]?.phase as? RoomPhase.Joined)?.membership
        if (membership == null || membership.generation != connection.generation) {
            return RoomErrorInfo("not_joined", "the room is not joined now") to emptyList()
        }
        if (!isValidRoomEvent(event)) return RoomErrorInfo("not_allowed", "a reserved or invalid event name: ${event.take(64)}") to emptyList()
        if (text.toByteArray(Charsets.UTF_8).size > MAX_ROOM_DATA) return RoomErrorInfo("bad_request", "data larger than $MAX_ROOM_DATA bytes") to emptyList()
        val payload = LinkedHashMap<String, JsonValue>()
        payload["room"] = JsonString(name)
        payload["event"] = JsonString(event)
        payload["data"] = JsonString(text)
        return null to listOf<Action>(Action.Send(frameText("room_send", JsonObject(payload)), membership.generation))
    }

    // Joining

    /** Sends the join if connected with a usable token, else asks for one. */
    fun startJoin(name: String, now: Long): List<Action> {
        val record = records[name] ?: return emptyList()
        val attempt = (record.phase as? RoomPhase.Joining)?.attempt ?: return emptyList()
        val token = record.token
        if (token != null && now < token.keepUntil) {
            val generation = connectedGeneration()
            if (generation == null) {
                attempt.step = Step.Waiting
                return emptyList()
            }
            return sendJoin(name, token, generation, now)
        }
        val grant = RoomTokens.grantFor(this, name, now)
        if (grant != null) {
            record.token = grant
            return listOf<Action>(Action.Schedule(TimerKey(TimerKind.ROOM_TOKEN, name = name), grant.keepUntil)) + startJoin(name, now)
        }
        record.token = null
        attempt.step = Step.NeedsToken
        return RoomTokens.addToBatch(this, name, now)
    }

    /**
     * Sends `room_join` from the position (a rejoin while joined re-synchronises), with a
     * deadline for its `joined`.
     */
    fun sendJoin(name: String, token: RoomToken, generation: Long, now: Long): List<Action> {
        val record = records[name] ?: return emptyList()
        val payload = LinkedHashMap<String, JsonValue>()
        payload["room"] = JsonString(name)
        payload["token"] = JsonString(token.value)
        record.position?.let {
            payload["since"] = JsonObject(linkedMapOf<String, JsonValue>("epoch" to JsonString(it.epoch), "id" to JsonNumber(it.id.toDouble())))
        }
        val join = Join(generation, record.position)
        when (val phase = record.phase) {
            is RoomPhase.Joined -> phase.membership.rejoin = Rejoin.Sent(join)
            is RoomPhase.Joining -> phase.attempt.step = Step.Sent(join)
            RoomPhase.Failed -> return emptyList()
        }
        return listOf(
            Action.Send(frameText("room_join", JsonObject(payload)), generation),
            Action.Schedule(TimerKey(TimerKind.ROOM_JOIN, name = name), now + connection.config.authTimeout)
        )
    }

    /**
     * A token for [name]: a joined room sends it as `room_refresh` (or rejoins with it when it
     * waits to re-synchronise), anything else joins.
     */
    fun tokenReceived(name: String, token: RoomToken, now: Long): List<Action> {
        val record = records[name] ?: return emptyList()
        record.token = token
        val arm = Action.Schedule(TimerKey(TimerKind.ROOM_TOKEN, name = name), token.keepUntil)
        val phase = record.phase
        if (phase is RoomPhase.Joined && phase.membership.generation == connection.generation) {
            val membership = phase.membership
            membership.renewal = null
            if (membership.rejoin != null) return listOf<Action>(arm) + sendJoin(name, token, membership.generation, now)
            val payload = linkedMapOf<String, JsonValue>("room" to JsonString(name), "token" to JsonString(token.value))
            return listOf(Action.Send(frameText("room_refresh", JsonObject(payload)), membership.generation), arm)
        }
        if (phase !is RoomPhase.Joining) return listOf(arm)
        val generation = connectedGeneration()
        if (generation == null) {
            phase.attempt.step = Step.Waiting
            return listOf(arm)
        }
        return listOf<Action>(arm) + sendJoin(name, token, generation, now)
    }

    /** The handshake: every room waiting rejoins from its position. */
    fun connected(now: Long): List<Action> =
        records.entries.toList().flatMap { (name, record) ->
            if ((record.phase as? RoomPhase.Joining)?.attempt?.step == Step.Waiting) startJoin(name, now) else emptyList()
        }

    /** The socket ended: rooms wait to rejoin (position and token kept); history requests end. */
    fun disconnected(): List<Action> {
        val actions = ArrayList<Action>()
        for ((name, record) in records) {
            val phase = record.phase
            if (phase == RoomPhase.Failed) continue
            // Nothing stays scheduled for a room without a socket (`disconnect()` leaves no timer):
            // the next `joined` arms the token's refresh again, the next handshake rejoins.
            actions.addAll(cancelTimers(name))
            if (phase is RoomPhase.Joining) {
                // A token asked for is still awaited; anything else waits for the next handshake.
                if (phase.attempt.step !is Step.Authorizing) phase.attempt.step = Step.Waiting
                continue
            }
            // A member waits to rejoin from its position; a renewal asked for becomes the token
            // the rejoin waits for, one still in the batch is asked for with the rejoin's.
            val membership = (phase as RoomPhase.Joined).membership
            val attempt = Attempt(retries = membership.retries, resyncs = membership.resyncs)
            when (val renewal = membership.renewal) {
                is Renewal.Authorizing -> attempt.step = Step.Authorizing(renewal.request)
                Renewal.NeedsToken -> if (name in batch) attempt.step = Step.NeedsToken
                null -> {}
            }
            record.phase = RoomPhase.Joining(attempt)
        }
        for (request in history.keys.toList()) {
            actions.add(Action.Cancel(TimerKey(TimerKind.ROOM_HISTORY, request = request)))
            actions.add(Action.History(request, null, RoomErrorInfo("disconnected", "the connection dropped before the answer")))
        }
        history.clear()
        return actions
    }

    /**
     * The connection will not come back by itself (`FAILED`, `disconnect()`): the `ready()` of
     * every room still joining ends with `disconnected`; the rooms stay joining, and join
     * after `connect()`.
     */
    fun settleJoining(message: String): List<Action> =
        records.filter { it.value.state == RoomState.JOINING }.keys.map { Action.SettleRoom(it, RoomErrorInfo("disconnected", message)) }

    /**
     * The room is over: `FAILED` with [error], its token dropped, never rejoined until the app
     * joins it again; [deliver] tells the room's `error` handlers.
     */
    fun fail(name: String, error: RoomErrorInfo, deliver: Boolean = true): List<Action> {
        val record = records[name] ?: return emptyList()
        record.phase = RoomPhase.Failed
        record.error = error
        record.token = null
        batch.remove(name)
        val actions = ArrayList(cancelTimers(name))
        if (deliver) actions.add(Action.RoomEvent(name, "error", error.toJson(), RoomEventMeta.SYSTEM))
        actions.add(Action.SettleRoom(name, error))
        return actions
    }

    fun cancelTimers(name: String): List<Action> = listOf(TimerKind.ROOM_TOKEN, TimerKind.ROOM_RETRY, TimerKind.ROOM_JOIN)
        .map { Action.Cancel(TimerKey(it, name = name)) }

    /** Whether [name] still waits for the auth answer [request]. */
    fun awaits(name: String, request: Long): Boolean {
        return when (val phase = records[name]?.phase) {
            is RoomPhase.Joining -> phase.attempt.step == Step.Authorizing(request)
            is RoomPhase.Joined -> phase.membership.renewal == Renewal.Authorizing(request)
            else -> false
        }
    }

    /** The auth route answered. */
    fun authorized(request: Long, result: RoomAuthResult, now: Long): List<Action> = RoomTokens.authorized(this, request, result, now)

    /** A timer of the rooms fired. */
    fun timerFired(fired: TimerKey, now: Long): List<Action> {
        val name = fired.name ?: ""
        val request = fired.request ?: 0
        return when (fired.kind) {
            TimerKind.ROOM_BATCH -> RoomTokens.batchDue(this, now)
            TimerKind.ROOM_AUTH -> RoomTokens.authorized(this, request,
                RoomAuthResult.Failed(AuthFailure(AuthFailure.Kind.TIMEOUT, null, "no answer from the room auth route in time")), now)
            TimerKind.ROOM_AUTH_RETRY -> RoomTokens.authRetryDue(this, request, now)
            TimerKind.ROOM_TOKEN -> RoomTokens.tokenDue(this, name, now)
            TimerKind.ROOM_RETRY -> retryDue(name, now)
            TimerKind.ROOM_JOIN -> joinTimedOut(name, now)
            TimerKind.ROOM_HISTORY ->
                if (history.remove(request) == null) emptyList()
                else listOf(Action.History(request, null, RoomErrorInfo("timed_out", "no history page within ${connection.config.authTimeout} ms")))
            else -> emptyList()
        }
    }

    /**
     * A join's deadline passed with no `joined`: retried with backoff (then `timed_out`); an
     * unanswered rejoin for a hole is given up and told (`not_recovered`).
     */
    private fun joinTimedOut(name: String, now: Long): List<Action> {
        val record = records[name] ?: return emptyList()
        if (connection.generation == null) return emptyList()
        // A replay still coming (it moved the position since the join or the last deadline) is
        // given more time (docs/rooms-protocol.md "Replay": a long replay is streamed).
        val join = record.joinInFlight ?: return emptyList()
        val position = record.position
        if (position != null && position != join.from) {
            join.from = position
            return listOf(Action.Schedule(TimerKey(TimerKind.ROOM_JOIN, name = name), now + connection.config.authTimeout))
        }
        when (val phase = record.phase) {
            is RoomPhase.Joining -> {
                val error = RoomErrorInfo("timed_out", "no joined within ${connection.config.authTimeout} ms")
                if (phase.attempt.retries >= RoomFrames.MAX_JOIN_RETRIES) return fail(name, error)
                phase.attempt.retries += 1
                phase.attempt.step = Step.Waiting
                return listOf(Action.Schedule(TimerKey(TimerKind.ROOM_RETRY, name = name), now + RoomFrames.retryDelay(phase.attempt.retries)))
            }
            is RoomPhase.Joined -> {
                phase.membership.rejoin = null
                phase.membership.resyncs = RoomFrames.MAX_RESYNCS
                return listOf(notRecovered(name, "the rejoin was not answered"))
            }
            RoomPhase.Failed -> return emptyList()
        }
    }

    /** A retry timer fired (after a refusal to retry, a timeout or the 5 s auth interval). */
    private fun retryDue(name: String, now: Long): List<Action> {
        val phase = records[name]?.phase
        if (phase is RoomPhase.Joining && phase.attempt.step == Step.Waiting && connection.socketId != null) return startJoin(name, now)
        // A renewal's retry shares the timer with a rejoin put off by a refusal: both are made.
        if (phase is RoomPhase.Joined && phase.membership.renewal != null) {
            return RoomTokens.addToBatch(this, name, now) + (if (phase.membership.rejoin == Rejoin.PutOff) resync(name, now) else emptyList())
        }
        // None when a token that came meanwhile already made the rejoin put off.
        if (phase is RoomPhase.Joined && (phase.membership.rejoin == null || phase.membership.rejoin == Rejoin.PutOff)) return resync(name, now)
        return emptyList()
    }

    /**
     * Rejoins from the position on the same socket (the server answers with the replay and
     * `joined`, without a second membership); at most `MAX_RESYNCS` in a row.
     */
    fun resync(name: String, now: Long): List<Action> {
        val record = records[name] ?: return emptyList()
        val membership = (record.phase as? RoomPhase.Joined)?.membership ?: return emptyList()
        val generation = connection.generation ?: return emptyList()
        if (membership.resyncs >= RoomFrames.MAX_RESYNCS) return emptyList()
        membership.resyncs += 1
        val token = record.token
        if (token != null && now < token.keepUntil) return sendJoin(name, token, generation, now)
        membership.rejoin = Rejoin.AwaitingToken
        if (membership.renewal != null) return emptyList()
        membership.renewal = Renewal.NeedsToken
        return RoomTokens.addToBatch(this, name, now)
    }

    /**
     * Tells the room that the events it missed will not come (`not_recovered`): with a [gap],
     * exactly which (the app fetches that range), else the app fetches state
     * (docs/rooms-protocol.md "Replay": never silent).
     */
    fun notRecovered(name: String, reason: String, gap: RoomGap? = null): Action {
        val error = if (gap == null) {
            RoomErrorInfo("not_recovered", "events missed while away cannot be replayed ($reason): fetch the room's state", reason)
        } else {
            val parts = ArrayList<String>()
            gap.previous?.let { parts.add("everything after id ${it.id} of the lost epoch ${it.epoch}") }
            if (gap.first != null) parts.add("ids ${gap.first}…${gap.last} of epoch ${gap.epoch}")
            val what = if (parts.isEmpty()) "none of this epoch" else parts.joinToString(" and ")
            RoomErrorInfo("not_recovered", "events missed while away are gone ($reason): $what; what is still kept follows", reason, gap)
        }
        records[name]?.error = error
        return Action.RoomEvent(name, "error", error.toJson(), RoomEventMeta.SYSTEM)
    }

    /** A room frame's text: `{"event": "bird:<name>", "data": "<payload JSON>"}`. */
    fun frameText(name: String, payload: JsonValue): String = Frame.encode("${connection.config.namespace}:$name", payload)

    /** A `room_event` or `room_history` frame (RoomFrames.kt). */
    fun frame(frame: Frame, name: String, now: Long): List<Action> = RoomFrames.frame(this, frame, name, now)
}
