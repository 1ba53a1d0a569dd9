package com.bird.realtime

// The connection's decisions, without I/O (the browser client's connection-machine.js, the
// Swift client's `ConnectionStateMachine`): the six states, the close-code reactions, the
// stale-connection check, the network monitor's hints, signin on every connection; channels
// and rooms are sub-machines it owns. Events and the clock's instants in, actions out; the
// owner performs them.
//
// Every socket has a generation: frames of an older socket, timers armed for it and answers to
// requests made for it are ignored (a late frame of the old socket, an old pong deadline
// killing the new connection, an auth answer from before a drop).

/** The machine's settings; durations in milliseconds. */
internal data class MachineConfig(
    /** The protocol namespace (`bird`). */
    val namespace: String = BirdProtocol.NAMESPACE,
    /** Silence before a ping when the handshake gives none (120 s, seed). */
    val activityTimeout: Long = 120_000,
    /** Wait for any frame after a ping (30 s, seed). */
    val pongTimeout: Long = 30_000,
    /** The short pong deadline of a verification (network lost or changed, a late timer: 1 s). */
    val verifyPongTimeout: Long = 1_000,
    /** An attempt without a handshake after this is given up (30 s). */
    val connectTimeout: Long = 30_000,
    /** An authorisation, signin, room join or history request (10 s). */
    val authTimeout: Long = 10_000,
    /** A connection up this long resets the backoff (5 s). */
    val stableConnectionDuration: Long = 5_000,
    /** Shorter connections that still reset it, one back per [stableConnectionDuration] (5). */
    val shortConnectionAllowance: Int = 5,
    /** Between two attempt starts (100 ms). */
    val minimumAttemptInterval: Long = 100,
    /** Full jitter, 1 s base, 30 s cap. */
    val backoff: Backoff = Backoff(),
    /** Joins this close share one auth request (10 ms). */
    val roomAuthBatchWindow: Long = 10
)

/** What the connection is doing. */
internal sealed class Phase {
    object Idle : Phase()
    data class Opening(val generation: Long) : Phase()
    data class Connected(val generation: Long, val socketId: String) : Phase()
}

internal class ConnectionMachine(val config: MachineConfig, random: () -> Double) {
    companion object {
        /** How late a timer must fire to mean that the process was frozen or the device asleep (5 s, as the Swift client). */
        const val FROZEN_TIMER_LATENESS = 5_000L

        /** The handshake's `activity_timeout` is clamped to 1 s … 1 day (Swift client: a hostile 1e-300 made 7,300 pings a second). */
        const val MIN_ACTIVITY_TIMEOUT = 1_000L
        const val MAX_ACTIVITY_TIMEOUT = 86_400_000L
    }

    var state = ConnectionState.INITIALIZED
        private set
    var phase: Phase = Phase.Idle
        private set
    var activity: ActivityMonitor? = null
        private set
    private var lastGeneration = 0L
    private var lastRequest = 0L

    /** A retry timer is armed (the state is `UNAVAILABLE`). */
    var waiting = false
        private set
    val schedule = ReconnectSchedule(config.backoff, config.stableConnectionDuration, config.minimumAttemptInterval, random, config.shortConnectionAllowance)
    val signin = SigninMachine(this)
    val channels = ChannelMachine(this)
    val rooms = RoomMachine(this)

    // Reads

    /** The current socket's generation, or `null`. */
    val generation: Long?
        get() = when (val current = phase) {
            is Phase.Idle -> null
            is Phase.Opening -> current.generation
            is Phase.Connected -> current.generation
        }

    /** The socket id, only while connected (seed: set before `CONNECTED`). */
    val socketId: String? get() = (phase as? Phase.Connected)?.socketId

    /** A new request id. */
    fun nextRequest(): Long {
        lastRequest += 1
        return lastRequest
    }

    /** A protocol frame on the connected socket, if there is one. */
    fun sendProtocol(name: String, payload: JsonValue, channel: String? = null): List<Action> {
        val connected = phase as? Phase.Connected ?: return emptyList()
        return listOf(Action.Send(Frame.encode("${config.namespace}:$name", payload, channel), connected.generation))
    }

    // App commands

    /**
     * `connect()`: opens a socket unless one is opening or open; a wait for a retry ends. Works
     * after `FAILED` and `DISCONNECTED` (seed "Handling close code 4009": `connect()` starts anew).
     */
    fun connect(now: Long): List<Action> {
        if (phase !is Phase.Idle) return emptyList()
        schedule.manualStart()
        return cancelWait() + startAttempt(now)
    }

    /** `disconnect()`: close with 1000, `DISCONNECTED`, nothing scheduled; channels and rooms kept. */
    fun disconnect(): List<Action> {
        if (state == ConnectionState.DISCONNECTED) return emptyList()
        val actions = ArrayList<Action>()
        val current = generation
        if (current != null) {
            actions.add(Action.Close(current, CloseCode.NORMAL_CLOSURE.rawValue, "disconnect()"))
            actions.add(Action.Cancel(TimerKey(TimerKind.CONNECT, generation = current)))
        }
        actions.addAll(endSocket())
        actions.addAll(cancelWait())
        actions.addAll(set(ConnectionState.DISCONNECTED))
        actions.addAll(rooms.settleJoining("disconnect() was called: the room joins after connect()"))
        return actions
    }

    /** `signin()`: now if connected and not signed in, and on every later connection. */
    fun requestSignin(now: Long): List<Action> = signin.request(now)

    // Reachability (the NetworkMonitor's hints)

    /**
     * The network is gone: a connected socket is verified at once with the short pong
     * deadline; a failure backs off (the network is known to be gone).
     */
    fun networkLost(now: Long): List<Action> = verify(now, true)

    /**
     * The network is back: a wait for a retry ends at once, a hanging attempt is replaced, a
     * connected socket is verified (the path may have changed).
     */
    fun networkAvailable(now: Long): List<Action> {
        if (waiting) return cancelWait() + startAttempt(now)
        val opening = phase as? Phase.Opening
        if (opening != null) {
            val current = opening.generation
            return listOf(Action.Close(current), Action.Cancel(TimerKey(TimerKind.CONNECT, generation = current))) +
                endSocket() + startAttempt(now)
        }
        return verify(now, true)
    }

    /** The network changed under the connection (another interface, address or route): verified at once. */
    fun networkChanged(now: Long): List<Action> = verify(now, true)

    /**
     * The process came back (a timer that fired far too late: the device slept or the app was
     * frozen): a connected socket is verified at once; a wait for a retry ends at once.
     */
    fun resumed(now: Long): List<Action> {
        if (waiting) return cancelWait() + startAttempt(now)
        return verify(now, false)
    }

    private fun verify(now: Long, pathChange: Boolean): List<Action> {
        if (phase !is Phase.Connected) return emptyList()
        val monitor = activity ?: return emptyList()
        return monitorActions(monitor.ping(config.verifyPongTimeout, pathChange, now))
    }

    // Socket events

    /** The socket of [generation] closed (1006 when it dropped without a close frame). */
    fun socketClosed(generation: Long, code: Int, reason: String, now: Long): List<Action> {
        if (this.generation != generation) return emptyList()
        val transport = code == CloseCode.ABNORMAL_CLOSURE.rawValue
        val message = if (reason.isNotEmpty()) reason else if (transport) "the connection dropped without a close frame" else "closed with $code"
        val actions = ArrayList<Action>()
        actions.add(Action.Error(RealtimeError(if (transport) RealtimeError.Type.TRANSPORT else RealtimeError.Type.CLOSED, code, message)))
        actions.add(Action.Cancel(TimerKey(TimerKind.CONNECT, generation = generation)))
        actions.addAll(endSocket())
        when (CloseCode.reaction(code)) {
            CloseReaction.FAIL -> {
                // Nothing joins until the app calls connect(): a ready() waiting would wait forever.
                actions.addAll(set(ConnectionState.FAILED))
                val why = if (reason.isNotEmpty()) "$code $reason" else "$code"
                actions.addAll(rooms.settleJoining("the connection failed ($why): the room joins after connect()"))
            }
            CloseReaction.RECONNECT_NOW -> actions.addAll(retryLater(now, true))
            CloseReaction.BACK_OFF -> actions.addAll(retryLater(now, false))
        }
        return actions
    }

    /** A socket failed without a close code the client can read (could not open, send queue over its bound). */
    fun socketFailed(generation: Long, message: String, now: Long): List<Action> {
        if (this.generation != generation) return emptyList()
        return listOf(
            Action.Close(generation),
            Action.Error(RealtimeError(RealtimeError.Type.TRANSPORT, null, message)),
            Action.Cancel(TimerKey(TimerKind.CONNECT, generation = generation))
        ) + endSocket() + retryLater(now, false)
    }

    /** A text frame on the socket of [generation]. */
    fun textReceived(generation: Long, text: String, now: Long): List<Action> {
        if (this.generation != generation) return emptyList()
        val monitored = activity?.let { monitorActions(it.frameReceived(now)) } ?: emptyList()
        val frame = Frame.parse(text)
            ?: return monitored + protocolError("a frame that is not {event, channel?, data}, ignored")
        val name = Frame.protocolName(frame.event, config.namespace)
        if (phase !is Phase.Connected) {
            return monitored + when (name) {
                "connection_established" -> handshake(generation, frame.data, now)
                "error" -> serverError(frame.data)
                else -> protocolError("${frame.event.take(64)} before the handshake, ignored")
            }
        }
        val decided = when (name) {
            null -> channels.frame(frame, null)
            "ping" -> sendProtocol("pong", JsonObject(emptyMap()))
            "pong" -> emptyList()
            "room_event", "room_history" -> rooms.frame(frame, name, now)
            "signin_success" -> signin.succeeded(frame.data)
            "connection_established" -> protocolError("a second handshake on one connection, ignored")
            "error" ->
                if (frame.channel != null && channels.has(frame.channel)) channels.frame(frame, name)
                else signin.refused(frame.data) ?: serverError(frame.data)
            else -> channels.frame(frame, name)
        }
        // Most frames re-arm nothing: their actions as they are, not copied into a new list.
        return if (monitored.isEmpty()) decided else monitored + decided
    }

    /** A binary frame: the protocol is text, so it is told and ignored. */
    fun binaryReceived(generation: Long, size: Int, now: Long): List<Action> {
        if (this.generation != generation) return emptyList()
        val actions = ArrayList<Action>()
        activity?.let { actions.addAll(monitorActions(it.frameReceived(now))) }
        actions.addAll(protocolError("a binary frame of $size bytes, ignored (the protocol is text)"))
        return actions
    }

    // Timers

    /** A timer fired at [now]. */
    fun timerFired(fired: TimerKey, now: Long): List<Action> = when (fired.kind) {
        TimerKind.RETRY -> {
            if (!waiting) emptyList() else {
                waiting = false
                startAttempt(now)
            }
        }
        TimerKind.CONNECT -> {
            val opening = phase as? Phase.Opening
            if (opening == null || opening.generation != fired.generation) emptyList()
            else listOf(
                Action.Close(opening.generation),
                Action.Error(RealtimeError(RealtimeError.Type.TRANSPORT, null, "no handshake within the connect timeout (${config.connectTimeout} ms)"))
            ) + endSocket() + retryLater(now, false)
        }
        TimerKind.ACTIVITY -> {
            val connected = phase as? Phase.Connected
            val monitor = activity
            if (connected == null || connected.generation != fired.generation || monitor == null) emptyList()
            else monitorActions(monitor.checkDue(now, config.pongTimeout))
        }
        TimerKind.PONG -> pongDeadlinePassed(fired, now)
        TimerKind.SIGNIN -> signin.failed(fired.request, AuthFailure(AuthFailure.Kind.TIMEOUT, null, "no answer within ${config.authTimeout} ms"))
        TimerKind.CHANNEL_AUTH -> channels.authorized(
            fired.name ?: "", fired.request ?: 0,
            ChannelAuthResult.Failed(AuthFailure(AuthFailure.Kind.TIMEOUT, null, "no answer from the auth endpoint within ${config.authTimeout} ms"))
        )
        else -> rooms.timerFired(fired, now)
    }

    private fun pongDeadlinePassed(fired: TimerKey, now: Long): List<Action> {
        val connected = phase as? Phase.Connected ?: return emptyList()
        val monitor = activity ?: return emptyList()
        if (connected.generation != fired.generation) return emptyList()
        val probe = monitor.pongDeadlinePassed(fired.sequence ?: 0) ?: return emptyList()
        val message = if (probe.pathChange) "no pong after the network changed" else "no pong within the pong timeout"
        // Seed: close with an immediate-retry code; after a network change the path is known to
        // be gone, so the retry backs off (the network's return ends the wait).
        return listOf(
            Action.Error(RealtimeError(RealtimeError.Type.PONG_TIMEOUT, CloseCode.PONG_NOT_RECEIVED.rawValue, message)),
            Action.Close(connected.generation, CloseCode.PONG_NOT_RECEIVED.rawValue, "pong not received")
        ) + endSocket() + retryLater(now, !probe.pathChange)
    }

    // Shared steps

    private fun handshake(generation: Long, data: String?, now: Long): List<Action> {
        val fields = Frame.parseObject(data)
        val socketId = fields?.get("socket_id")?.string
        if (socketId.isNullOrEmpty()) {
            // Seed, "The six states": a handshake without an id is an error; the socket is
            // closed and the connection retries with backoff.
            return listOf(
                Action.Close(generation, null, "handshake without a socket id"),
                Action.Error(RealtimeError(RealtimeError.Type.HANDSHAKE, null, "handshake without a socket id: ${(data ?: "no data").take(200)}")),
                Action.Cancel(TimerKey(TimerKind.CONNECT, generation = generation))
            ) + endSocket() + retryLater(now, false)
        }
        var timeout = config.activityTimeout
        val seconds = fields["activity_timeout"]?.number
        if (seconds != null && !seconds.isNaN() && !seconds.isInfinite() && seconds > 0) {
            timeout = Math.min(Math.max(seconds * 1000, MIN_ACTIVITY_TIMEOUT.toDouble()), MAX_ACTIVITY_TIMEOUT.toDouble()).toLong()
        }
        phase = Phase.Connected(generation, socketId)
        val monitor = ActivityMonitor(timeout, now)
        activity = monitor
        schedule.ready(now)
        return listOf<Action>(Action.Cancel(TimerKey(TimerKind.CONNECT, generation = generation))) +
            set(ConnectionState.CONNECTED) +
            monitorActions(listOf(monitor.start())) +
            channels.connected(now) +
            signin.connected(now) +
            rooms.connected(now)
    }

    private fun startAttempt(now: Long): List<Action> {
        lastGeneration += 1
        val current = lastGeneration
        phase = Phase.Opening(current)
        schedule.attemptStarted(now)
        return set(ConnectionState.CONNECTING) + listOf(
            Action.Open(current),
            Action.Schedule(TimerKey(TimerKind.CONNECT, generation = current), now + config.connectTimeout)
        )
    }

    /**
     * After a socket ended: retry at once, or wait on the backoff in `UNAVAILABLE`. An immediate
     * retry held only by the minimum attempt interval waits in `CONNECTING`, as the Swift client's.
     */
    private fun retryLater(now: Long, immediate: Boolean): List<Action> {
        val delay = schedule.nextDelay(now, immediate)
        if (delay <= 0) return startAttempt(now)
        waiting = true
        val state = if (schedule.retriesAtOnce) ConnectionState.CONNECTING else ConnectionState.UNAVAILABLE
        return set(state) + Action.Schedule(TimerKey(TimerKind.RETRY), now + delay)
    }

    private fun cancelWait(): List<Action> {
        if (!waiting) return emptyList()
        waiting = false
        return listOf(Action.Cancel(TimerKey(TimerKind.RETRY)))
    }

    /** Forgets the current socket: its timers, requests, subscriptions; rooms wait to rejoin. */
    private fun endSocket(): List<Action> {
        val actions = ArrayList<Action>()
        val connected = phase as? Phase.Connected
        if (connected != null) {
            actions.add(Action.Cancel(TimerKey(TimerKind.ACTIVITY, generation = connected.generation)))
            activity?.probe?.let { actions.add(Action.Cancel(TimerKey(TimerKind.PONG, generation = connected.generation, sequence = it.sequence))) }
            actions.addAll(signin.disconnected())
        }
        phase = Phase.Idle
        activity = null
        actions.addAll(channels.disconnected())
        actions.addAll(rooms.disconnected())
        return actions
    }

    private fun set(current: ConnectionState): List<Action> {
        val previous = state
        if (previous == current) return emptyList()
        state = current
        return listOf(Action.StateChange(previous, current))
    }

    private fun monitorActions(requests: List<MonitorAction>): List<Action> {
        if (requests.isEmpty()) return emptyList()
        val current = generation ?: 0
        val actions = ArrayList<Action>()
        for (request in requests) {
            when (request) {
                is MonitorAction.Check -> actions.add(Action.Schedule(TimerKey(TimerKind.ACTIVITY, generation = current), request.at))
                is MonitorAction.Ping -> actions.addAll(sendProtocol("ping", JsonObject(emptyMap())))
                is MonitorAction.PongDeadline ->
                    actions.add(Action.Schedule(TimerKey(TimerKind.PONG, generation = current, sequence = request.sequence), request.at))
                is MonitorAction.CancelPongDeadline ->
                    actions.add(Action.Cancel(TimerKey(TimerKind.PONG, generation = current, sequence = request.sequence)))
            }
        }
        return actions
    }

    /** A frame the client cannot use, told. */
    fun protocolError(message: String): List<Action> =
        listOf(Action.Error(RealtimeError(RealtimeError.Type.PROTOCOL, null, message)))

    /** A `bird:error` frame's data (`{message, code?}`), told on the connection. */
    fun serverError(data: String?): List<Action> {
        val payload = Frame.parseObject(data)
        val code = payload?.get("code")?.int
        val message = payload?.get("message")?.let { it.string ?: it.toString() } ?: data ?: "error without data"
        return listOf(Action.Error(RealtimeError(RealtimeError.Type.SERVER, code, message)))
    }
}
