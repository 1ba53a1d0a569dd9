package com.bird.realtime

// What the machines ask of their owner (`BirdRealtime`), in order: the decisions are plain
// values, the owner performs them (STYLE.md: "the machine returns deadlines instead of
// sleeping"; the browser client's actions.js, the Swift client's `ConnectionStateMachine.Action`).

/** What a timer is for. */
internal enum class TimerKind {
    RETRY, CONNECT, ACTIVITY, PONG, CHANNEL_AUTH, SIGNIN, ROOM_BATCH,
    ROOM_AUTH, ROOM_AUTH_RETRY, ROOM_TOKEN, ROOM_RETRY, ROOM_JOIN, ROOM_HISTORY
}

/**
 * A timer: its kind and what it belongs to. Equal keys name the same timer, so arming a key
 * again replaces the armed one and a stale one is recognised.
 */
internal data class TimerKey(
    val kind: TimerKind,
    val generation: Long? = null,
    val sequence: Long? = null,
    val request: Long? = null,
    val name: String? = null
)

/** A room's error as the machines carry it. */
internal data class RoomErrorInfo(val code: String, val message: String, val reason: String? = null, val gap: RoomGap? = null) {
    fun toError(): RoomError = RoomError(code, message, reason, gap)
    fun toJson(): JsonValue = toError().toJson()
}

/** What the owner does. */
internal sealed class Action {
    data class Open(val generation: Long) : Action()
    data class Send(val text: String, val generation: Long) : Action()
    data class Close(val generation: Long, val code: Int? = null, val reason: String? = null) : Action()
    data class Schedule(val timer: TimerKey, val at: Long) : Action()
    data class Cancel(val timer: TimerKey) : Action()
    data class Authorize(val channel: String, val socketId: String, val request: Long) : Action()
    data class Authenticate(val socketId: String, val request: Long) : Action()
    data class AuthorizeRooms(val rooms: List<String>, val request: Long) : Action()
    data class CancelRequest(val request: Long) : Action()
    data class StateChange(val previous: ConnectionState, val current: ConnectionState) : Action()
    data class Error(val error: RealtimeError) : Action()
    data class SigninError(val error: AuthFailure) : Action()
    data class ChannelEvent(val channel: String, val event: String, val data: JsonValue?, val userId: String? = null) : Action()
    data class RoomEvent(val room: String, val event: String, val data: JsonValue, val meta: RoomEventMeta) : Action()
    data class SettleRoom(val room: String, val error: RoomErrorInfo?) : Action()
    data class History(val request: Long, val page: HistoryPage?, val error: RoomErrorInfo?) : Action()
}
