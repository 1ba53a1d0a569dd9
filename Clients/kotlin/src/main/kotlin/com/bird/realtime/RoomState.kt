package com.bird.realtime

/** Where a room stands (rooms seed: `order.state // .joining, .joined, .failed, .left`). */
enum class RoomState {
    /** Asking for its token, or joining (again, after a drop: it rejoins from its position). */
    JOINING,

    /** Joined: events arrive. */
    JOINED,

    /** Refused, or ended (`forbidden`, `no_rule`, `full`, `kicked` …: `room.error`); `bird.join(name)` tries again. */
    FAILED,

    /** Left: never rejoined; `bird.room(name)` is `null`. */
    LEFT
}

/**
 * A room's position: the epoch of its stream and the id of the last kept event delivered
 * (docs/rooms-protocol.md "Replay"). A rejoin starts after it.
 */
data class RoomPosition(
    /** Changes when the room's history is lost. */
    val epoch: String,
    /** The last kept event delivered (or the room's id at `joined`). */
    val id: Long
)
