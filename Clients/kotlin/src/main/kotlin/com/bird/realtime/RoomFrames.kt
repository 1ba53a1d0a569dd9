package com.bird.realtime

// Room frames from the server (docs/rooms-protocol.md "Server to client", "Replay"; the browser
// client's room-frames.js, the Swift client's `ConnectionStateMachine+RoomFrames`): kept events
// against the room's position, the room's own events (`joined`, members, `count`, `kicked`,
// `error`) and history pages.

internal object RoomFrames {
    /** Rejoins for holes before a clean `joined` resets the count. */
    const val MAX_RESYNCS = 3
    /** Join refusals retried with backoff (`rate_limited`, `store_full`, no answer) before the room fails. */
    const val MAX_JOIN_RETRIES = 6
    /** Most presence members listed per room (the server's cap is 1,000). */
    const val MAX_ROOM_MEMBERS = 10_000
    /** Codes that refuse a token: one new token is asked for, a second refusal is final. */
    private val TOKEN_CODES = setOf("expired", "bad_signature", "invalid_token")

    /** The wait before retrying a refused or unanswered join: 2, 4, 8 … s, at most 30 s (retries from 1). */
    fun retryDelay(retries: Int): Long = Math.min(1000L shl Math.min(retries, 5), 30_000L)

    /** A `room_event` or `room_history` frame. */
    fun frame(rooms: RoomMachine, frame: Frame, name: String, now: Long): List<Action> {
        val room = frame.channel ?: ""
        // A frame for a room the app left: events in flight when it left are not wanted.
        val record = rooms.records[room] ?: return emptyList()
        // The payload is parsed where it is in the frame's text (Frame.dataObject): once.
        val payload = frame.dataObject()
            ?: return rooms.connection.protocolError("${frame.event} for ${room.take(164)} without an object, ignored")
        if (name == "room_history") return RoomHistory.answered(rooms, room, payload)
        val event = payload["event"]?.string
            ?: return rooms.connection.protocolError("a room_event for $room that is not {event, data, meta?}, ignored")
        val generation = rooms.connection.generation
        val socket = record.socket
        // An answer to a join made on an older socket (or none sent yet), or a room that failed.
        if (socket == null || socket != generation) return emptyList()
        val meta = payload["meta"] as? JsonObject
        if (meta != null) return keptEvent(rooms, room, record, event, payload, meta, now)
        return ownEvent(rooms, room, record, event, payload, socket, now)
    }

    /**
     * A kept event: an id not after the position is a duplicate (dropped); an id past the next
     * is a hole (rejoin from the position); the position moves before any handler runs.
     */
    private fun keptEvent(rooms: RoomMachine, room: String, record: RoomRecord, event: String, payload: JsonObject, meta: JsonObject, now: Long): List<Action> {
        val id = meta["id"]?.long
        if (id == null || id < 1) return rooms.connection.protocolError("a kept event for $room without an id, ignored")
        // The position read as its epoch and id (a kept event makes no RoomPosition).
        val epoch = record.epoch ?: return rooms.connection.protocolError("a kept event for $room before joined, ignored")
        val last = record.lastId
        if (id <= last) return emptyList()
        var told: Action? = null
        if (id != last + 1) {
            val membership = (record.phase as? RoomPhase.Joined)?.membership
            if (membership == null || membership.rejoin != null) return emptyList()
            if (membership.resyncs < MAX_RESYNCS) return rooms.resync(room, now)
            // Rejoins have not closed the gaps: the room is told, and events flow again from here.
            told = rooms.notRecovered(room, "the server kept skipping event ids (${last + 1}…${id - 1} missing)")
        }
        record.lastId = id
        val from = meta["from"]?.string
        val at = meta["at"]?.long ?: 0L
        val delivery = Action.RoomEvent(room, event, payload["data"] ?: JsonNull, RoomEventMeta(id, at, from, meta["replayed"]?.bool == true, epoch))
        return if (told == null) listOf(delivery) else listOf(told, delivery)
    }

    /** The room's own events: `joined`, `join`, `leave`, `count`, `kicked`, `error`, and `gap`. */
    private fun ownEvent(rooms: RoomMachine, room: String, record: RoomRecord, event: String, payload: JsonObject, generation: Long, now: Long): List<Action> {
        val data = payload["data"] as? JsonObject ?: JsonObject(emptyMap())
        val delivery = Action.RoomEvent(room, event, data, RoomEventMeta.SYSTEM)
        return when (event) {
            "joined" -> joined(rooms, room, record, data, generation, now)
            "join" -> {
                val id = data["id"]?.string
                if (id != null && (record.members.containsKey(id) || record.members.size < MAX_ROOM_MEMBERS)) record.members[id] = data["info"]
                listOf(delivery)
            }
            "leave" -> {
                data["id"]?.string?.let { record.members.remove(it) }
                listOf(delivery)
            }
            "count" -> {
                val n = data["n"]?.long
                if (n != null && n >= 0) record.count = n
                listOf(delivery)
            }
            "kicked" -> listOf<Action>(delivery) + rooms.fail(room, RoomErrorInfo("kicked", data["reason"]?.string ?: "removed by the app's server"), false)
            "error" -> roomError(rooms, room, record, data, delivery, now)
            "gap" -> gap(rooms, room, record, data)
            else -> rooms.connection.protocolError("a room_event ${event.take(64)} for $room without meta, ignored")
        }
    }

    /**
     * `gap`, before the replay of a rejoin from the position (docs/rooms-protocol.md
     * "Replay"): the room is told exactly which events will not come (`not_recovered` with the
     * gap), and the position moves past them so the replay that follows is in order.
     */
    private fun gap(rooms: RoomMachine, room: String, record: RoomRecord, data: JsonObject): List<Action> {
        val join = record.joinInFlight
        val position = record.position
        if (join == null || position == null) return rooms.connection.protocolError("a gap for $room with no rejoin from a position asked, ignored")
        val told = RoomGap.parse(data)
            ?: return rooms.connection.protocolError("a gap for $room that is not {reason, epoch, first?, last?, before?, previous?}, ignored")
        // A gap starts right after the position: the next id in the same epoch; in a new one,
        // after the position it names as lost (an old or forged gap could skip or repeat events).
        val follows = if (told.epoch == position.epoch) told.first == position.id + 1
            else told.previous == position && (told.first ?: 1L) == 1L
        if (!follows) return rooms.connection.protocolError("a gap for $room that does not start at its position ${position.epoch}/${position.id}, ignored")
        val resume = RoomPosition(told.epoch, told.last ?: if (position.epoch == told.epoch) position.id else 0L)
        record.position = resume
        join.gapTold = true
        return listOf(rooms.notRecovered(room, told.reason, told))
    }

    /**
     * `joined`: the room's position after any replay. With `recovered: false`, or a position
     * the replay did not reach, the room is told (`not_recovered`).
     */
    private fun joined(rooms: RoomMachine, room: String, record: RoomRecord, data: JsonObject, generation: Long, now: Long): List<Action> {
        val epoch = data["epoch"]?.string
        val id = data["id"]?.long
        if (epoch == null || id == null || id < 0) return rooms.connection.protocolError("joined for $room without epoch and id, ignored")
        // No join was asked: a position from it could move the room backwards.
        val join = record.joinInFlight ?: return rooms.connection.protocolError("joined for $room with no join asked, ignored")
        val phase = record.phase
        // What the join learned on the way, carried into the membership.
        val resyncs = when (phase) {
            is RoomPhase.Joining -> phase.attempt.resyncs
            is RoomPhase.Joined -> phase.membership.resyncs
            RoomPhase.Failed -> 0
        }
        val renewal = (phase as? RoomPhase.Joined)?.membership?.renewal
        val actions = ArrayList<Action>()
        actions.add(Action.Cancel(TimerKey(TimerKind.ROOM_JOIN, name = room)))
        val current = RoomPosition(epoch, id)
        var lost: String? = null
        val position = record.position
        if (position != null) {
            if (data["recovered"]?.bool == false && !join.gapTold) {
                lost = data["reason"]?.string ?: "unknown"
            } else if (join.gapTold && position == current) {
                // Told already, with its ids, when the server sent the gap before the replay.
            } else if (position.epoch == current.epoch && position.id < current.id) {
                // The replay stopped short of the room's position: a hole.
                if (resyncs < MAX_RESYNCS) {
                    record.phase = RoomPhase.Joined(Membership(generation, resyncs = resyncs, renewal = renewal))
                    return actions + rooms.resync(room, now)
                }
                lost = "the replay kept skipping events"
            } else if (position != current) {
                lost = if (position.epoch == current.epoch) "unknown_position" else "epoch_changed"
            }
        }
        val wasJoined = phase is RoomPhase.Joined
        record.position = current
        record.phase = RoomPhase.Joined(Membership(generation, renewal = renewal))
        val count = data["count"]?.long
        if (count != null && count >= 0) record.count = count
        val members = data["members"]?.array
        if (members != null) {
            val listed = LinkedHashMap<String, JsonValue?>()
            for (member in members) {
                if (listed.size >= MAX_ROOM_MEMBERS) break
                val memberId = member["id"]?.string ?: continue
                listed[memberId] = member["info"]
            }
            record.members = listed
        }
        // The token's refresh is armed while joined only (the socket's end disarms it).
        record.token?.let { actions.add(Action.Schedule(TimerKey(TimerKind.ROOM_TOKEN, name = room), it.keepUntil)) }
        actions.add(Action.RoomEvent(room, "joined", data, RoomEventMeta.SYSTEM))
        if (lost != null) actions.add(rooms.notRecovered(room, lost))
        if (!wasJoined) actions.add(Action.SettleRoom(room, null))
        return actions
    }

    /**
     * A room `error`: token refusals ask for one new token, `rate_limited`/`store_full` joins
     * retry with backoff, `resync`/`not_joined` while joined rejoin from the position, other
     * refusals of a join end the room; a refused send or refresh leaves the membership.
     */
    private fun roomError(rooms: RoomMachine, room: String, record: RoomRecord, data: JsonObject, delivery: Action, now: Long): List<Action> {
        val code = data["code"]?.string ?: "unknown"
        val error = RoomErrorInfo(code, data["message"]?.string ?: "")
        val attempt = (record.phase as? RoomPhase.Joining)?.attempt
        val membership = (record.phase as? RoomPhase.Joined)?.membership
        // A join of this room is answered: an attempt's, or a member's rejoin.
        val awaited = attempt != null || membership?.rejoin != null
        if (code == "expired" || (awaited && code in TOKEN_CODES)) {
            if (attempt?.tokenRefused == true) return listOf(delivery) + rooms.fail(room, error, false)
            record.token = null
            record.phase = RoomPhase.Joining(Attempt(tokenRefused = true, retries = attempt?.retries ?: membership?.retries ?: 0,
                resyncs = attempt?.resyncs ?: membership?.resyncs ?: 0))
            return listOf(delivery) + rooms.startJoin(room, now)
        }
        if (awaited && (code == "rate_limited" || code == "store_full")) {
            val retries = (attempt?.retries ?: membership?.retries ?: 0) + 1
            if (retries > MAX_JOIN_RETRIES) return listOf(delivery) + rooms.fail(room, error, false)
            attempt?.let { it.retries = retries; it.step = Step.Waiting }
            // Put off, not forgotten: the retry timer makes it (a renewal's retry shares that timer).
            membership?.let { it.retries = retries; it.rejoin = Rejoin.PutOff }
            return listOf(delivery, Action.Schedule(TimerKey(TimerKind.ROOM_RETRY, name = room), now + retryDelay(retries)))
        }
        if (code == "resync" && membership != null) {
            if (membership.rejoin != null) return listOf(delivery)
            membership.resyncs = 0
            return listOf(delivery) + rooms.resync(room, now)
        }
        if (code == "not_joined" && membership != null) return listOf(delivery) + rooms.resync(room, now)
        if (!awaited || membership != null) return listOf(delivery)
        return listOf(delivery) + rooms.fail(room, error, false)
    }
}
