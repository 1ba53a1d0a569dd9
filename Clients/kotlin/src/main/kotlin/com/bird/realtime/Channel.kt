package com.bird.realtime


/** One event on a channel, as `channel.bind(event) { event -> … }` hears it. */
data class ChannelEvent(
    /** The channel (`presence-room-1`). */
    val channel: String,
    /** The event name (`price-update`, `bird:subscription_succeeded`). */
    val event: String,
    /** The data: its JSON parsed, or the text as a [JsonString] when it is not JSON (Pusher's convention). */
    val data: JsonValue?,
    /** The sender of a client event on a presence channel (Pusher's `user_id`), else `null`. */
    val userId: String?
)

/** A presence member: the user id and the info from the authorisation's `channel_data`. */
data class PresenceMember(
    /** The user id. */
    val id: String,
    /** The user's info, or `null`. */
    val info: JsonValue?
)

/** What a channel needs from its client. */
internal interface ChannelOwner {
    val namespace: String
    fun <T> read(body: (ConnectionMachine) -> T): T
    fun trigger(channel: String, event: String, data: JsonValue): Boolean
    fun unsubscribe(channel: String)
    fun post(task: () -> Unit)
    fun handlerFailed(error: Throwable, event: String)
}

/**
 * A channel (`bird.subscribe(name)`): bind handlers by event name; they survive reconnects
 * (realtime-connection-lifecycle seed, "What happens to your channels": the client keeps every
 * channel object, resubscribes after the next `CONNECTED`, and keeps its handlers).
 *
 * Protocol events arrive in the client's namespace: `bird:subscription_succeeded` after every
 * successful (re)subscription, `bird:subscription_error` (a refused authorisation:
 * `{"type": "AuthError", "error", "status"}`; a server refusal: `{"message", "code"}`);
 * bind them with [BirdProtocol.Event].
 */
open class Channel internal constructor(
    /** The channel name (`presence-room-1`). */
    val name: String,
    internal val owner: ChannelOwner
) {
    private class Listener(val event: String?, val handler: (ChannelEvent) -> Unit)

    private val listeners = HandlerList<Listener>()

    /** The server confirmed the subscription on the current connection (seed: check it before `trigger`). */
    val subscribed: Boolean get() = owner.read { it.channels.records[name]?.subscribed ?: false }

    /**
     * Calls [handler] for every [event] on this channel, on the options' executor, in order.
     *
     * @param event the event name (`price-update`, or a protocol event's full name).
     * @param handler receives the event: its data and, on presence channels' client events, the sender.
     * @return the registration, to unbind it.
     */
    fun bind(event: String, handler: (ChannelEvent) -> Unit): Binding = add(Listener(event, handler))

    /**
     * Calls [handler] with the data of every protocol [event] (seed:
     * `room.bind(BirdProtocol.Event.SUBSCRIPTION_SUCCEEDED) { renderMembers(room.members) }`,
     * `room.bind(BirdProtocol.Event.SUBSCRIPTION_ERROR) { error -> println("could not join: $error") }`).
     *
     * @param event the protocol event.
     * @param handler receives the event's data (see [BirdProtocol.Event]'s constants), or `null`.
     * @return the registration, to unbind it.
     */
    fun bind(event: BirdProtocol.Event, handler: (JsonValue?) -> Unit): Binding =
        add(Listener(event.fullName(owner.namespace)) { handler(it.data) })

    /**
     * Calls [handler] for every event on this channel, after that event's own handlers.
     *
     * @param handler receives every event.
     * @return the registration, to unbind it.
     */
    fun bindAll(handler: (ChannelEvent) -> Unit): Binding = add(Listener(null, handler))

    /** Removes every handler of [event] (bound by name or as a [BirdProtocol.Event]'s full name). */
    fun unbind(event: String) {
        listeners.removeAll { it.event == event }
    }

    /**
     * Sends a client event to the channel's other members (Pusher's rule: a `client-` name, on a
     * private or presence channel). Seed: returns false while reconnecting, and sends nothing.
     *
     * @param event the event name, starting with `client-`.
     * @param data the data: a [JsonValue], or a value [JsonValue.from] converts.
     * @return whether it was sent: only while connected and subscribed.
     * @throws IllegalArgumentException when [data] is not convertible to JSON.
     */
    fun trigger(event: String, data: Any?): Boolean = owner.trigger(name, event, JsonValue.from(data))

    /** Unsubscribes: the channel is never resubscribed, and `bird.channel(name)` is `null`. */
    fun unsubscribe() = owner.unsubscribe(name)

    private fun add(listener: Listener): Binding {
        listeners.add(listener)
        return Binding { listeners.remove(listener) }
    }

    /** Runs the handlers of one event on the executor (the client's drain, in arrival order). */
    internal open fun deliver(event: String, data: JsonValue?, userId: String?) {
        val delivered = ChannelEvent(name, event, data, userId)
        owner.post {
            val snapshot = listeners.current
            for (index in snapshot.indices) if (snapshot[index].event == event) call(snapshot[index], delivered)
            for (index in snapshot.indices) if (snapshot[index].event == null) call(snapshot[index], delivered)
        }
    }

    private fun call(listener: Listener, event: ChannelEvent) {
        if (!listeners.contains(listener)) return
        try {
            listener.handler(event)
        } catch (error: Exception) {
            owner.handlerFailed(error, "${event.event} on $name")
        }
    }
}

/**
 * A presence channel (`presence-…`): [members] after `bird:subscription_succeeded`, kept by
 * `bird:member_added` / `bird:member_removed` (whose data is `{"id", "info"}`); replaced at every
 * subscription, so a member who left while the client was away is gone.
 */
class PresenceChannel internal constructor(name: String, owner: ChannelOwner) : Channel(name, owner) {
    /** The members, in the server's order (at most 10,000 listed). */
    val members: List<PresenceMember>
        get() = owner.read { machine -> machine.channels.records[name]?.members?.map { PresenceMember(it.key, it.value) } ?: emptyList() }

    /** How many members are listed. */
    val memberCount: Int get() = owner.read { it.channels.records[name]?.members?.size ?: 0 }

    /** This connection's member, from the authorisation's `channel_data`. */
    val me: PresenceMember? get() = owner.read { it.channels.records[name]?.me }

    /**
     * One member.
     *
     * @param id the user id.
     * @return the member, or `null`.
     */
    fun member(id: String): PresenceMember? = owner.read { machine ->
        val members = machine.channels.records[name]?.members
        if (members != null && members.containsKey(id)) PresenceMember(id, members[id]) else null
    }
}
