package com.bird.realtime

// Channels on the connection machine (realtime-connection-lifecycle seed, "What happens to your
// channels"): subscriptions belong to the connection, so every handshake resubscribes every
// channel, authorising private and presence ones again for the new socket id (the old signature
// contains the old id); presence members are replaced at every subscription.

/** An authorisation's answer (Pusher's `{auth, channel_data?}`), or why there is none. */
internal sealed class ChannelAuthResult {
    data class Answered(val auth: String?, val channelData: String?) : ChannelAuthResult()
    data class Failed(val failure: AuthFailure) : ChannelAuthResult()
}

/** One channel as the machine keeps it, for the current connection. */
internal class ChannelRecord(val kind: ChannelKind) {
    /** The server confirmed the subscription on this connection. */
    var subscribed = false
    /** `bird:subscribe` was sent on this connection. */
    var requested = false
    /** The authorisation in flight. */
    var authRequest: Long? = null
    /** Presence: the members by id, in the server's order. */
    var members = LinkedHashMap<String, JsonValue?>()
    /** Presence: this connection's member, from `channel_data`. */
    var me: PresenceMember? = null
}

internal class ChannelMachine(private val connection: ConnectionMachine) {
    companion object {
        /** Most members a presence channel lists (Pusher's limit is 100; the bound protects the app). */
        const val MAX_PRESENCE_MEMBERS = 10_000
    }

    /** In subscription order (the resubscription order). */
    val records = LinkedHashMap<String, ChannelRecord>()

    fun has(name: String): Boolean = records.containsKey(name)

    /** `subscribe(name)`: at once when connected, otherwise after the next handshake. */
    fun add(name: String, now: Long): List<Action> {
        if (records.containsKey(name)) return emptyList()
        records[name] = ChannelRecord(ChannelKind.of(name))
        return if (connection.socketId == null) emptyList() else subscribeOrAuthorize(name, now)
    }

    /** `unsubscribe(name)`: never resubscribed; `bird:unsubscribe` sent when connected. */
    fun remove(name: String): List<Action> {
        val record = records.remove(name) ?: return emptyList()
        return cancelAuth(name, record) + connection.sendProtocol("unsubscribe", JsonObject(mapOf("channel" to JsonString(name))))
    }

    /**
     * A client event: sent only while subscribed, on a private or presence channel, with a
     * `client-` name (Pusher's rule; seed: `trigger` returns false while reconnecting).
     *
     * @return the send, or `null` when nothing may be sent.
     */
    fun trigger(name: String, event: String, data: JsonValue): List<Action>? {
        val record = records[name] ?: return null
        if (!record.subscribed || !event.startsWith("client-")) return null
        if (record.kind != ChannelKind.PRIVATE && record.kind != ChannelKind.PRESENCE) return null
        val generation = connection.generation ?: return null
        if (connection.socketId == null) return null
        return listOf(Action.Send(Frame.encode(event, data, name), generation))
    }

    /** The handshake: every channel subscribes again. */
    fun connected(now: Long): List<Action> = records.keys.toList().flatMap { subscribeOrAuthorize(it, now) }

    /** The socket ended: nothing is subscribed, authorisations are dropped. */
    fun disconnected(): List<Action> {
        val actions = ArrayList<Action>()
        for ((name, record) in records) {
            actions.addAll(cancelAuth(name, record))
            record.subscribed = false
            record.requested = false
            record.members = LinkedHashMap()
        }
        return actions
    }

    private fun subscribeOrAuthorize(name: String, now: Long): List<Action> {
        val record = records[name] ?: return emptyList()
        val socketId = connection.socketId ?: return emptyList()
        if (record.kind == ChannelKind.PUBLIC) {
            record.requested = true
            return connection.sendProtocol("subscribe", JsonObject(mapOf("channel" to JsonString(name))))
        }
        if (record.kind == ChannelKind.ENCRYPTED) {
            // XSalsa20-Poly1305 is not in the JDK: not supported yet (README, "Left").
            return listOf(deliver(name, "subscription_error", authError("encrypted channels are not supported by this client yet", null)))
        }
        val actions = ArrayList(cancelAuth(name, record))
        val request = connection.nextRequest()
        record.authRequest = request
        actions.add(Action.Schedule(TimerKey(TimerKind.CHANNEL_AUTH, name = name, request = request), now + connection.config.authTimeout))
        actions.add(Action.Authorize(name, socketId, request))
        return actions
    }

    /**
     * An authorisation answered, failed or timed out; an answer to an older request (another
     * socket id, or replaced) is discarded.
     */
    fun authorized(name: String, request: Long, result: ChannelAuthResult): List<Action> {
        val record = records[name] ?: return emptyList()
        if (record.authRequest != request) return emptyList()
        val actions = ArrayList(cancelAuth(name, record))
        var failure: AuthFailure? = (result as? ChannelAuthResult.Failed)?.failure
        var me: PresenceMember? = null
        val answered = result as? ChannelAuthResult.Answered
        if (answered != null && answered.auth.isNullOrEmpty()) failure = AuthFailure(AuthFailure.Kind.INVALID, null, "an answer without auth")
        if (answered != null && failure == null && record.kind == ChannelKind.PRESENCE) {
            val data = Frame.parseObject(answered.channelData)
            val id = data?.get("user_id")?.let { it.string ?: it.long?.toString() }
            if (id == null) {
                failure = AuthFailure(AuthFailure.Kind.INVALID, null, "a presence authorisation without channel_data holding a user_id")
            } else {
                me = PresenceMember(id, data["user_info"])
            }
        }
        if (failure != null || answered == null) {
            record.subscribed = false
            val reason = failure ?: AuthFailure(AuthFailure.Kind.INVALID, null, "no answer")
            actions.add(deliver(name, "subscription_error", authError(reason.message, reason.status)))
            return actions
        }
        record.me = me
        record.requested = true
        val payload = LinkedHashMap<String, JsonValue>()
        payload["channel"] = JsonString(name)
        payload["auth"] = JsonString(answered.auth ?: "")
        if (answered.channelData != null) payload["channel_data"] = JsonString(answered.channelData)
        actions.addAll(connection.sendProtocol("subscribe", JsonObject(payload)))
        return actions
    }

    /** A frame for a channel: an app event ([name] `null`) or a protocol event. */
    fun frame(frame: Frame, name: String?): List<Action> {
        val channel = frame.channel ?: ""
        val record = records[channel]
        if (record == null) {
            if (name == "subscription_error") return connection.serverError(frame.data)
            // An event in flight when the app unsubscribed, or a server bug: told, never silent.
            return connection.protocolError("${frame.event.take(64)} for ${frame.channel?.take(164) ?: "no channel"}, which is not subscribed")
        }
        return when (name) {
            null -> {
                if (record.kind == ChannelKind.ENCRYPTED) emptyList()
                else listOf(Action.ChannelEvent(channel, frame.event, frame.dataValue(), frame.userId))
            }
            "subscription_succeeded" -> succeeded(channel, record, frame.data)
            "subscription_error" -> {
                record.subscribed = false
                record.members = LinkedHashMap()
                listOf(deliver(channel, "subscription_error", Frame.parseData(frame.data)))
            }
            "member_added", "member_removed" -> memberChanged(channel, record, name, frame.data)
            else -> listOf(deliver(channel, name, frame.dataValue()))
        }
    }

    private fun succeeded(channel: String, record: ChannelRecord, data: String?): List<Action> {
        // A confirmation of nothing asked on this connection (an authorisation still in flight):
        // the channel stays unsubscribed.
        if (!record.requested) return connection.protocolError("subscription_succeeded for $channel, which was not asked on this connection, ignored")
        if (record.kind == ChannelKind.PRESENCE) {
            val presence = Frame.parseObject(data)?.get("presence")
            val ids = presence?.get("ids")?.array
                ?: return connection.protocolError("presence subscription_succeeded for $channel without a member list")
            val hash = presence["hash"]
            val members = LinkedHashMap<String, JsonValue?>()
            for (item in ids) {
                if (members.size >= MAX_PRESENCE_MEMBERS) break
                val id = item.string ?: item.long?.toString() ?: continue
                members[id] = hash?.get(id)
            }
            record.members = members
        }
        record.subscribed = true
        return listOf(deliver(channel, "subscription_succeeded", Frame.parseData(data)))
    }

    private fun memberChanged(channel: String, record: ChannelRecord, name: String, data: String?): List<Action> {
        val payload = Frame.parseObject(data)
        val id = payload?.get("user_id")?.let { it.string ?: it.long?.toString() }
        if (record.kind != ChannelKind.PRESENCE || id == null) {
            return connection.protocolError("$name without a presence channel or member, ignored")
        }
        if (name == "member_added") {
            val known = record.members.containsKey(id)
            if (!known && record.members.size >= MAX_PRESENCE_MEMBERS) return emptyList()
            val info = payload["user_info"]
            record.members[id] = info
            return if (known) emptyList() else listOf(deliver(channel, name, member(id, info)))
        }
        if (!record.members.containsKey(id)) return emptyList()
        val info = record.members.remove(id)
        return listOf(deliver(channel, name, member(id, info)))
    }

    private fun member(id: String, info: JsonValue?): JsonValue {
        val fields = LinkedHashMap<String, JsonValue>()
        fields["id"] = JsonString(id)
        fields["info"] = info ?: JsonNull
        return JsonObject(fields)
    }

    private fun authError(message: String, status: Int?): JsonValue {
        val fields = LinkedHashMap<String, JsonValue>()
        fields["type"] = JsonString("AuthError")
        fields["error"] = JsonString(message)
        fields["status"] = if (status == null) JsonNull else JsonNumber(status.toDouble())
        return JsonObject(fields)
    }

    private fun cancelAuth(name: String, record: ChannelRecord): List<Action> {
        val request = record.authRequest ?: return emptyList()
        record.authRequest = null
        return listOf(Action.Cancel(TimerKey(TimerKind.CHANNEL_AUTH, name = name, request = request)), Action.CancelRequest(request))
    }

    /** A protocol event for the channel's handlers (`bird:subscription_succeeded`). */
    private fun deliver(channel: String, name: String, data: JsonValue?): Action =
        Action.ChannelEvent(channel, "${connection.config.namespace}:$name", data)
}
