package com.bird.realtime

// History requests on the room machine (rooms seed, "Paging back"; docs/rooms-protocol.md
// `room_history`; the browser client's room-history.js): at most 16 in flight on a connection,
// each answered or failed within the auth timeout, and ended with `disconnected` when the
// socket drops.

internal object RoomHistory {
    /** History requests in flight on one connection. */
    const val MAX_IN_FLIGHT = 16

    /**
     * `room.history(before, limit)`: a request on the current socket, answered by a
     * `History` action.
     *
     * @return the request and the actions.
     */
    fun request(rooms: RoomMachine, name: String, before: Long?, limit: Int, now: Long): Pair<Long, List<Action>> {
        val request = rooms.connection.nextRequest()
        fun refuse(code: String, message: String) = request to listOf<Action>(Action.History(request, null, RoomErrorInfo(code, message)))
        if (limit < 1 || limit > 100) return refuse("bad_request", "a limit of 1…100, not $limit")
        val membership = (rooms.records[name]?.phase as? RoomPhase.Joined)?.membership
        if (membership == null || membership.generation != rooms.connection.generation) return refuse("not_joined", "the room is not joined now")
        if (rooms.history.size >= MAX_IN_FLIGHT) return refuse("rate_limited", "$MAX_IN_FLIGHT history requests are in flight")
        val payload = LinkedHashMap<String, JsonValue>()
        payload["room"] = JsonString(name)
        payload["request"] = JsonString("h$request")
        payload["limit"] = JsonNumber(limit.toDouble())
        if (before != null) payload["before"] = JsonNumber(before.toDouble())
        rooms.history[request] = HistoryEntry(name, membership.generation)
        return request to listOf(
            Action.Send(rooms.frameText("room_history", JsonObject(payload)), membership.generation),
            Action.Schedule(TimerKey(TimerKind.ROOM_HISTORY, request = request), now + rooms.connection.config.authTimeout)
        )
    }

    /** A history page (`{events, more, request}`) or its error (`{error, request}`) for [room]. */
    fun answered(rooms: RoomMachine, room: String, page: JsonObject): List<Action> {
        val tag = page["request"]?.string
        val request = if (tag != null && tag.startsWith("h")) tag.substring(1).toLongOrNull() else null
        val entry = if (request == null) null else rooms.history[request]
        if (request == null || entry == null || entry.room != room) {
            return rooms.connection.protocolError("a room_history answer to no request of this client, ignored")
        }
        rooms.history.remove(request)
        val actions = ArrayList<Action>()
        actions.add(Action.Cancel(TimerKey(TimerKind.ROOM_HISTORY, request = request)))
        val error = page["error"]
        if (error != null && !error.isNull) {
            actions.add(Action.History(request, null, RoomErrorInfo(error["code"]?.string ?: "unknown", error["message"]?.string ?: "")))
            return actions
        }
        val items = page["events"]?.array
        if (items == null) {
            actions.add(Action.History(request, null, RoomErrorInfo("bad_data", "a history page without events")))
            return actions
        }
        val events = ArrayList<HistoryEvent>()
        for (item in items) {
            val meta = item["meta"]
            val id = meta?.get("id")?.long
            if (meta == null || id == null) {
                actions.add(Action.History(request, null, RoomErrorInfo("bad_data", "a history event without meta")))
                return actions
            }
            val event = item["event"]?.string ?: ""
            events.add(HistoryEvent(event, item["data"] ?: JsonNull, RoomEventMeta(id, meta["at"]?.long ?: 0L, meta["from"]?.string, false)))
        }
        actions.add(Action.History(request, HistoryPage(events, page["more"]?.bool == true), null))
        return actions
    }
}
