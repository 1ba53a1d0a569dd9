package com.bird.realtime

import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit
import kotlin.coroutines.resume
import kotlin.coroutines.resumeWithException
import kotlin.coroutines.suspendCoroutine

/** What a room needs from its client. */
internal interface RoomOwner {
    fun <T> read(body: (ConnectionMachine) -> T): T
    fun isCurrent(room: Room): Boolean
    fun leave(room: String)
    fun send(room: String, event: String, text: String): RoomError?
    fun history(room: String, before: Long?, limit: Int, done: (HistoryPage?, RoomError?) -> Unit)
    fun post(task: () -> Unit)
    fun handlerFailed(error: Throwable, event: String)
    val lock: Any
}

/** A room handler's registration, returned by [Room.on] and [Room.onAny] for [Room.off]. */
class RoomListener internal constructor(
    internal val event: String?,
    internal val handler: (String, JsonValue, RoomEventMeta) -> Unit
)

/**
 * A room (rooms seed, "Joining"): `bird.join(name)` gives the same room for the same name until
 * it is left. The client keeps its position and token across drops: after a reconnect the
 * events missed come first, in order, with `meta.replayed`, then the live ones; none twice
 * (docs/rooms-protocol.md "Replay").
 *
 * ```kotlin
 * val order = bird.join("order:1042")
 * order.on("updated") { data, meta -> status = data["status"]?.string ?: status }
 * order.ready()            // suspends until joined; throws its RoomError
 * bird.leave("order:1042") // or order.leave()
 * ```
 */
class Room internal constructor(
    /** The room name (`order:1042`). */
    val name: String,
    private val owner: RoomOwner
) {
    private val listeners = HandlerList<RoomListener>()
    /** `ready()` waiters, guarded by the owner's lock; each runs on the draining thread. */
    private val waiters = ArrayList<(RoomError?) -> Unit>()

    /** Where the room stands (rooms seed: `.joining, .joined, .failed, .left`). */
    val state: RoomState
        get() = owner.read { machine -> if (!owner.isCurrent(this)) RoomState.LEFT else machine.rooms.records[name]?.state ?: RoomState.LEFT }

    /** Why it failed, or the last gap it told (`not_recovered`); `left` once left. */
    val error: RoomError?
        get() = owner.read { machine ->
            if (!owner.isCurrent(this)) RoomError("left", "the room was left") else machine.rooms.records[name]?.error?.toError()
        }

    /** The epoch and the last kept event delivered, or `null` before the first `joined`. */
    val position: RoomPosition? get() = owner.read { it.rooms.records[name]?.position }

    /** A presence room's members, sorted by id (at most 10,000 listed). */
    val members: List<PresenceMember>
        get() = owner.read { machine ->
            machine.rooms.records[name]?.members?.map { PresenceMember(it.key, it.value) }?.sortedBy { it.id } ?: emptyList()
        }

    /** The room's users, from `joined` and `count`, or `null` before. */
    val count: Long? get() = owner.read { it.rooms.records[name]?.count }

    /**
     * Calls [handler] with `(data, meta)` for every [event] of the room, in order, on the options'
     * executor. The room's own events are heard by name too: `joined` (`{epoch, id, count,
     * members?, recovered?}`), `join` / `leave` (`{id, info?}`), `count` (`{n}`), `error`
     * (`{code, message, reason?}`), `kicked` (`{reason?}`).
     *
     * @param event the event name.
     * @param handler the handler.
     * @return the listener, for [off].
     */
    fun on(event: String, handler: (JsonValue, RoomEventMeta) -> Unit): RoomListener =
        add(RoomListener(event) { _, data, meta -> handler(data, meta) })

    /**
     * Calls [handler] with `(event, data, meta)` for every event of the room, after that event's
     * own handlers.
     *
     * @param handler the handler.
     * @return the listener, for [off].
     */
    fun onAny(handler: (String, JsonValue, RoomEventMeta) -> Unit): RoomListener = add(RoomListener(null, handler))

    /** Removes a handler: it is not called for events delivered after this returns. */
    fun off(listener: RoomListener) {
        listeners.remove(listener)
    }

    /**
     * Suspends until the room is joined (rooms seed: "waits until joined, throws its error").
     * Cancelling the calling coroutine does not end the wait (kotlin's stdlib alone: no kotlinx-coroutines).
     *
     * @throws RoomError the room's error when it fails (`forbidden`, `no_rule`, `full`, `kicked`
     *   …), `left` when left, `disconnected` when the connection fails or `disconnect()` is called
     *   (or already has: the room stays joining, and joins after `connect()`).
     */
    suspend fun ready() {
        suspendCoroutine<Unit> { continuation ->
            whenSettled { error ->
                owner.post { if (error == null) continuation.resume(Unit) else continuation.resumeWithException(error) }
            }
        }
    }

    /**
     * Calls [callback] on the options' executor once the room is joined (`null`) or has failed
     * (its error, as [ready] throws it).
     *
     * @param callback told once.
     */
    fun ready(callback: (RoomError?) -> Unit) {
        whenSettled { error -> owner.post { callback(error) } }
    }

    /**
     * Blocks the calling thread until the room is joined. Never call it from a handler, nor on
     * the executor handlers run on (Android's main thread).
     *
     * @param timeoutMillis the longest wait, in milliseconds.
     * @throws RoomError as [ready] throws it, or `timed_out` after [timeoutMillis].
     */
    fun ready(timeoutMillis: Long) {
        val latch = CountDownLatch(1)
        var result: RoomError? = null
        whenSettled { error ->
            result = error
            latch.countDown()
        }
        if (!latch.await(timeoutMillis, TimeUnit.MILLISECONDS)) throw RoomError("timed_out", "not joined within $timeoutMillis ms")
        result?.let { throw it }
    }

    /** Leaves the room: `room_leave` is sent, it is never rejoined, `bird.room(name)` is `null`. */
    fun leave() {
        if (owner.read { owner.isCurrent(this) }) owner.leave(name)
    }

    /**
     * Sends an event into the room (where its rule lets members send). The server keeps it and
     * sends it to every member, this client included; a refusal arrives as an `error` event.
     *
     * @param event the event name: 1…200 bytes, none of the room's own names.
     * @param data a [JsonValue], or a value [JsonValue.from] converts (`ByteArray` travels as
     *   `{"$binary"}`); at most 10 KiB of JSON.
     * @throws RoomError `not_joined` (not joined now), `not_allowed` (a reserved name),
     *   `bad_request` (too large), `left`.
     * @throws IllegalArgumentException when [data] is not convertible to JSON.
     */
    fun send(event: String, data: Any?) {
        if (!owner.read { owner.isCurrent(this) }) throw RoomError("left", "the room was left")
        owner.send(name, event, JsonValue.from(data).toString())?.let { throw it }
    }

    /**
     * A page of the room's history (rooms seed, "Paging back"): the newest [limit] events
     * before [before], oldest first. Waits until the room is joined.
     *
     * @param before an event id (`page.events.first().meta.id`), or `null` for the newest.
     * @param limit 1…100.
     * @return the page; `more` when older events are kept.
     * @throws RoomError `no_history`, `bad_request`, `not_joined`, `disconnected`, `timed_out`,
     *   `rate_limited` (16 in flight), the room's error.
     */
    suspend fun history(before: Long? = null, limit: Int = 50): HistoryPage {
        ready()
        return suspendCoroutine { continuation ->
            owner.history(name, before, limit) { page, error ->
                owner.post { if (page != null) continuation.resume(page) else continuation.resumeWithException(error ?: RoomError("unknown", "no page")) }
            }
        }
    }

    /**
     * [history] with a callback, told once on the options' executor: the page, or the error.
     *
     * @param before an event id, or `null` for the newest.
     * @param limit 1…100.
     * @param callback told `(page, null)` or `(null, error)`.
     */
    fun history(before: Long?, limit: Int, callback: (HistoryPage?, RoomError?) -> Unit) {
        whenSettled { readyError ->
            if (readyError != null) {
                owner.post { callback(null, readyError) }
            } else {
                owner.history(name, before, limit) { page, error -> owner.post { callback(page, error) } }
            }
        }
    }

    /** Runs [done] (on the draining thread) when the room is joined or has failed. */
    private fun whenSettled(done: (RoomError?) -> Unit) {
        var now: RoomError? = null
        var settled = false
        synchronized(owner.lock) {
            when (state) {
                RoomState.JOINED -> settled = true
                RoomState.LEFT -> {
                    settled = true
                    now = RoomError("left", "the room was left")
                }
                RoomState.FAILED -> {
                    settled = true
                    now = error ?: RoomError("unknown", "failed")
                }
                RoomState.JOINING -> {
                    // The connection will not come back by itself: a waiter would wait until the
                    // app calls connect(), so it is answered now, as those waiting when it ended were.
                    val connection = owner.read { it.state }
                    if (connection == ConnectionState.FAILED || connection == ConnectionState.DISCONNECTED) {
                        settled = true
                        now = RoomError("disconnected",
                            if (connection == ConnectionState.FAILED) "the connection failed: the room joins after connect()"
                            else "disconnect() was called: the room joins after connect()")
                    } else {
                        waiters.add(done)
                    }
                }
            }
        }
        if (settled) done(now)
    }

    /** Answers the `ready()` waiters: `null` when joined. */
    internal fun settle(error: RoomError?) {
        val ended = synchronized(owner.lock) {
            val list = waiters.toList()
            waiters.clear()
            list
        }
        for (waiter in ended) waiter(error)
    }

    /** Runs the handlers of one event on the executor (the client's drain, in arrival order). */
    internal fun deliver(event: String, data: JsonValue, meta: RoomEventMeta) {
        owner.post {
            val snapshot = listeners.current
            for (index in snapshot.indices) if (snapshot[index].event == event) call(snapshot[index], event, data, meta)
            for (index in snapshot.indices) if (snapshot[index].event == null) call(snapshot[index], event, data, meta)
        }
    }

    private fun call(listener: RoomListener, event: String, data: JsonValue, meta: RoomEventMeta) {
        if (!listeners.contains(listener)) return
        try {
            listener.handler(event, data, meta)
        } catch (error: Exception) {
            owner.handlerFailed(error, "$event in $name")
        }
    }

    private fun add(listener: RoomListener): RoomListener {
        listeners.add(listener)
        return listener
    }
}
