package com.bird.realtime

import java.util.concurrent.ConcurrentHashMap
import java.util.concurrent.CopyOnWriteArrayList

/**
 * The Kotlin client: the connection lifecycle of the realtime-connection-lifecycle
 * seed, Pusher-compatible channels and presence, and the rooms of the rooms seed, with the
 * rules of the Swift and browser clients.
 *
 * ```kotlin
 * val bird = BirdRealtime(BirdRealtimeOptions(appKey = "your-app-key", region = "us1"))
 * bird.onConnectionStateChange { previous, current -> println("$previous -> $current") }
 * bird.connect()
 * ```
 *
 * Nothing happens until [connect] (as the Swift client). It decides in a plain-value machine
 * (`ConnectionMachine`, with channel, signin and room sub-machines: events and the clock's
 * instants in, actions out) and performs the actions here, in order, outside its lock: one
 * event's actions after another's, whatever thread the event came from (a socket's reader, a
 * timer, an auth answer, the app). Handlers run on the options' executor, one event after
 * another. Thread-safe.
 *
 * @param options how to connect.
 * @param environment the outside world: sockets, auth requests, clock, random, network monitor
 *   (fakes in tests).
 */
class BirdRealtime @JvmOverloads constructor(
    /** The options, as given. */
    val options: BirdRealtimeOptions,
    private val environment: RealtimeEnvironment = RealtimeEnvironment.system()
) {
    private val lock = Any()
    private val machine = ConnectionMachine(
        MachineConfig(
            namespace = options.namespace,
            activityTimeout = options.activityTimeoutMillis,
            pongTimeout = options.pongTimeoutMillis,
            verifyPongTimeout = options.verifyPongTimeoutMillis,
            connectTimeout = options.connectTimeoutMillis,
            authTimeout = options.authTimeoutMillis
        ),
        environment.random
    )
    private val outbox = DeliveryOutbox(
        options.executor,
        Math.max(1, options.maxDeliveryBacklog),
        // Only the client's own handler thread lingers for the next delivery (DeliveryOutbox.lingerNanos).
        lingerNanos = if (HandlerExecutors.isBackground(options.executor)) DeliveryOutbox.LINGER_NANOS else 0
    )
    private val auth = AuthRequests(options, environment.http)

    // Guarded by `lock`.
    private val pending = java.util.ArrayDeque<Action>()
    private var draining = false
    private val channels = LinkedHashMap<String, Channel>()
    private val rooms = LinkedHashMap<String, Room>()
    private val historyWaiters = HashMap<Long, (HistoryPage?, RoomError?) -> Unit>()

    private class Slot(val generation: Long, val transport: Transport)

    @Volatile private var socket: Slot? = null
    private class ArmedTimer(val at: Long) {
        @Volatile var handle: Cancellable? = null
    }
    private val timers = ConcurrentHashMap<TimerKey, ArmedTimer>()
    private class InFlight {
        @Volatile var handle: Cancellable? = null
    }
    private val requests = ConcurrentHashMap<Long, InFlight>()

    private val stateHandlers = CopyOnWriteArrayList<(ConnectionState, ConnectionState) -> Unit>()
    private val errorHandlers = CopyOnWriteArrayList<(RealtimeError) -> Unit>()
    private val signinHandlers = CopyOnWriteArrayList<(AuthFailure) -> Unit>()

    private val channelOwner = object : ChannelOwner {
        override val namespace: String get() = options.namespace
        override fun <T> read(body: (ConnectionMachine) -> T): T = this@BirdRealtime.read(body)
        override fun trigger(channel: String, event: String, data: JsonValue): Boolean {
            var sent = false
            dispatch { machine ->
                val actions = if (channels.containsKey(channel)) machine.channels.trigger(channel, event, data) else null
                sent = actions != null
                actions ?: emptyList()
            }
            return sent
        }
        override fun unsubscribe(channel: String) = this@BirdRealtime.unsubscribe(channel)
        override fun post(task: () -> Unit) = this@BirdRealtime.post(task)
        override fun handlerFailed(error: Throwable, event: String) = this@BirdRealtime.handlerFailed(error, event)
    }

    private val roomOwner = object : RoomOwner {
        override val lock: Any get() = this@BirdRealtime.lock
        override fun <T> read(body: (ConnectionMachine) -> T): T = this@BirdRealtime.read(body)
        override fun isCurrent(room: Room): Boolean = synchronized(this@BirdRealtime.lock) { rooms[room.name] === room }
        override fun leave(room: String) = this@BirdRealtime.leave(room)
        override fun send(room: String, event: String, text: String): RoomError? {
            var refused: RoomError? = null
            dispatch { machine ->
                val (error, actions) = machine.rooms.send(room, event, text)
                refused = error?.toError()
                actions
            }
            return refused
        }
        override fun history(room: String, before: Long?, limit: Int, done: (HistoryPage?, RoomError?) -> Unit) {
            dispatch { machine ->
                val (request, actions) = RoomHistory.request(machine.rooms, room, before, limit, now())
                historyWaiters[request] = done
                actions
            }
        }
        override fun post(task: () -> Unit) = this@BirdRealtime.post(task)
        override fun handlerFailed(error: Throwable, event: String) = this@BirdRealtime.handlerFailed(error, event)
    }

    private val networkListener = object : NetworkMonitor.Listener {
        override fun networkAvailable() = dispatch { it.networkAvailable(now()) }
        override fun networkLost() = dispatch { it.networkLost(now()) }
        override fun networkChanged() = dispatch { it.networkChanged(now()) }
    }

    init {
        require(options.appKey.isNotEmpty()) { "BirdRealtimeOptions needs an appKey" }
        options.grants?.let { grants -> synchronized(lock) { machine.rooms.setGrants(grants, now()) } }
        environment.networkMonitor.start(networkListener)
    }

    // Connection

    /** The current state (seed, "The six states"). A handler's `current` is the state it reports; this is the state now. */
    val connectionState: ConnectionState get() = read { it.state }

    /** The socket id (`"123.456"`), set by the handshake before the state becomes `CONNECTED`; `null` otherwise. */
    val connectionId: String? get() = read { it.socketId }

    /** The user data the server accepted after [signin] on this connection, or `null`. */
    val userData: String? get() = read { it.signin.userData }

    /**
     * Calls [handler] with `(previous, current)` for every state change, on the options' executor
     * (seed: "Swift and Kotlin use a single observer for every transition, so branch on current").
     *
     * @param handler the handler.
     * @return the registration, to unbind it.
     */
    fun onConnectionStateChange(handler: (previous: ConnectionState, current: ConnectionState) -> Unit): Binding {
        stateHandlers.add(handler)
        return Binding { stateHandlers.remove(handler) }
    }

    /**
     * Calls [handler] for every error that belongs to no channel (seed: `bird.onError { error ->
     * if (error.code == 4009) showSignedOutScreen() }`): closes with their code, drops, missed
     * pongs, server errors, frames the client cannot use, handlers that threw.
     *
     * @param handler the handler; one that throws is not reported again.
     * @return the registration, to unbind it.
     */
    fun onError(handler: (RealtimeError) -> Unit): Binding {
        errorHandlers.add(handler)
        return Binding { errorHandlers.remove(handler) }
    }

    /**
     * Calls [handler] when a signin fails, on any connection after [signin] (seed:
     * `bird.onSigninError { error -> println("connection has no identity: ${error.message}") }`).
     *
     * @param handler the handler.
     * @return the registration, to unbind it.
     */
    fun onSigninError(handler: (AuthFailure) -> Unit): Binding {
        signinHandlers.add(handler)
        return Binding { signinHandlers.remove(handler) }
    }

    /**
     * Opens the connection unless one is opening or open: from `INITIALIZED`, `DISCONNECTED` or
     * `FAILED` a new connection (authorised anew); from `UNAVAILABLE` an attempt now instead of
     * after the backoff. Channels and rooms are resubscribed and rejoined after the handshake.
     */
    fun connect() = dispatch { it.connect(now()) }

    /** Closes the socket (1000) and schedules nothing: state `DISCONNECTED`; channels and rooms are kept for a later [connect]. */
    fun disconnect() = dispatch { it.disconnect() }

    /** Signs in now (if connected) and on every later connection; failures reach [onSigninError]. */
    fun signin() = dispatch { it.requestSignin(now()) }

    /** [disconnect], and stops listening to the network monitor: the client is done. */
    fun close() {
        disconnect()
        environment.networkMonitor.stop()
    }

    // Channels

    /**
     * Subscribes to a channel (a [PresenceChannel] for `presence-` names): at once when
     * connected, after every handshake from then on. The same object for the same name.
     *
     * @param name the channel name.
     * @return the channel.
     */
    fun subscribe(name: String): Channel {
        val channel = synchronized(lock) {
            channels[name]?.let { return it }
            val made = if (name.startsWith("presence-")) PresenceChannel(name, channelOwner) else Channel(name, channelOwner)
            channels[name] = made
            made
        }
        dispatch { it.channels.add(name, now()) }
        return channel
    }

    /**
     * Unsubscribes: the channel is never resubscribed.
     *
     * @param name the channel name.
     */
    fun unsubscribe(name: String) {
        if (synchronized(lock) { channels.remove(name) } == null) return
        dispatch { it.channels.remove(name) }
    }

    /**
     * @param name a channel name.
     * @return the subscribed channel, or `null`.
     */
    fun channel(name: String): Channel? = synchronized(lock) { channels[name] }

    // Rooms

    /**
     * Joins a room (rooms seed, "Joining"): the same room for the same name until it is left; a
     * failed room joined again tries again. Every room joined within 10 ms shares one auth request.
     *
     * @param name the room name (`order:1042`).
     * @return the room.
     */
    fun join(name: String): Room {
        val room = synchronized(lock) { rooms.getOrPut(name) { Room(name, roomOwner) } }
        dispatch { it.rooms.join(name, now()) }
        return room
    }

    /**
     * @param name a room name.
     * @return the room joined under that name, or `null`.
     */
    fun room(name: String): Room? = synchronized(lock) { rooms[name] }

    /**
     * Leaves a room: `room_leave` is sent, it is never rejoined, its `ready()` waiters end with `left`.
     *
     * @param name the room name.
     */
    fun leave(name: String) {
        val room = synchronized(lock) { rooms.remove(name) } ?: return
        dispatch { it.rooms.leave(name) }
        room.settle(RoomError("left", "the room was left"))
    }

    /**
     * Replaces the public grants (the backend's `config()`), with which public rooms join with no auth request.
     *
     * @param grants the grants.
     */
    fun setGrants(grants: RoomGrants) {
        synchronized(lock) { machine.rooms.setGrants(grants, now()) }
    }

    // Performing

    private fun now(): Long = environment.clock.now()

    private fun <T> read(body: (ConnectionMachine) -> T): T = synchronized(lock) { body(machine) }

    /** Hands [task] to the options' executor (refused only by an executor shut down: then nothing reaches the app). */
    private fun post(task: () -> Unit) {
        outbox.post(task)
    }

    /**
     * Applies an event to the machine under the lock and performs its actions after those
     * already queued, outside the lock; the first thread in drains for every other.
     */
    private inline fun dispatch(event: (ConnectionMachine) -> List<Action>) {
        // Inline: a frame's event is no object of its own (a busy room's reader makes a million a second).
        val actions = synchronized(lock) {
            val decided = try {
                event(machine)
            } catch (error: RuntimeException) {
                // A decision that threw (a bug): told, and the client goes on with the next event.
                listOf(Action.Error(RealtimeError(RealtimeError.Type.PROTOCOL, null, "an event the client could not handle: $error", error)))
            }
            if (draining) {
                for (index in decided.indices) pending.addLast(decided[index])
                return
            }
            draining = true
            if (pending.isEmpty()) decided else {
                // Behind the actions an Error left: they are performed first.
                for (index in decided.indices) pending.addLast(decided[index])
                emptyList<Action>()
            }
        }
        performAll(actions)
    }

    /**
     * Performs [first] (this thread now drains: nothing was queued before them), then the actions
     * queued meanwhile, in order, outside the lock, until none is left.
     */
    private fun performAll(first: List<Action>) {
        var finished = false
        var done = 0
        try {
            while (done < first.size) performTold(first[done++])
            while (true) {
                val next = synchronized(lock) {
                    val action = pending.pollFirst()
                    if (action == null) draining = false
                    action
                } ?: break
                performTold(next)
            }
            finished = true
        } finally {
            // An Error thrown out of a seam must not leave the client draining forever: the next
            // event drains, [first]'s actions not yet performed first.
            if (!finished) synchronized(lock) {
                for (index in first.size - 1 downTo done) pending.addFirst(first[index])
                draining = false
            }
        }
    }

    /** Performs [action]; a seam that throws (a transport, an HTTP client, a clock) is told, and the next action goes on. */
    private fun performTold(action: Action) {
        try {
            perform(action)
        } catch (error: RuntimeException) {
            val message = "performing ${action.javaClass.simpleName} failed: $error"
            if (action !is Action.Error) {
                synchronized(lock) { pending.addLast(Action.Error(RealtimeError(RealtimeError.Type.TRANSPORT, null, message, error))) }
            }
        }
    }

    private fun handlerFailed(error: Throwable, event: String) {
        val message = "a handler of $event threw: $error"
        dispatch { listOf(Action.Error(RealtimeError(RealtimeError.Type.HANDLER, null, message, error))) }
    }

    private fun perform(action: Action) {
        when (action) {
            is Action.Open -> open(action.generation)
            is Action.Send -> {
                val slot = socket
                if (slot == null || slot.generation != action.generation) return
                if (slot.transport.queuedBytes > options.maxQueuedBytes) {
                    dispatch { it.socketFailed(action.generation, "send queue over ${options.maxQueuedBytes} bytes: the server does not read", now()) }
                    return
                }
                // false: closing or failed; the transport's listener tells why.
                slot.transport.send(action.text)
            }
            is Action.Close -> {
                val slot = socket
                if (slot == null || slot.generation != action.generation) return
                socket = null
                slot.transport.close(action.code, action.reason)
            }
            is Action.Schedule -> schedule(action.timer, action.at)
            is Action.Cancel -> timers.remove(action.timer)?.handle?.cancel()
            is Action.Authorize -> request(action.request) { done ->
                auth.authorizeChannel(action.socketId, action.channel) { result ->
                    done { it.channels.authorized(action.channel, action.request, result) }
                }
            }
            is Action.Authenticate -> request(action.request) { done ->
                auth.authenticateUser(action.socketId) { result -> done { it.signin.authenticated(action.request, result, now()) } }
            }
            is Action.AuthorizeRooms -> request(action.request) { done ->
                auth.authorizeRooms(action.rooms) { result -> done { it.rooms.authorized(action.request, result, now()) } }
            }
            is Action.CancelRequest -> requests.remove(action.request)?.handle?.cancel()
            is Action.StateChange -> {
                val handlers = stateHandlers.toList()
                post {
                    for (handler in handlers) {
                        try {
                            handler(action.previous, action.current)
                        } catch (error: Exception) {
                            handlerFailed(error, "a state change")
                        }
                    }
                }
            }
            is Action.Error -> {
                val handlers = errorHandlers.toList()
                post {
                    // A throwing error handler is not reported again: that would never end.
                    for (handler in handlers) try {
                        handler(action.error)
                    } catch (error: Exception) {
                    }
                }
            }
            is Action.SigninError -> {
                val handlers = signinHandlers.toList()
                post {
                    for (handler in handlers) {
                        try {
                            handler(action.error)
                        } catch (error: Exception) {
                            handlerFailed(error, "a signin error")
                        }
                    }
                }
            }
            is Action.ChannelEvent -> synchronized(lock) { channels[action.channel] }?.deliver(action.event, action.data, action.userId)
            is Action.RoomEvent -> synchronized(lock) { rooms[action.room] }?.deliver(action.event, action.data, action.meta)
            is Action.SettleRoom -> synchronized(lock) { rooms[action.room] }?.settle(action.error?.toError())
            is Action.History -> {
                val waiter = synchronized(lock) { historyWaiters.remove(action.request) } ?: return
                waiter(action.page, if (action.page == null) (action.error?.toError() ?: RoomError("unknown", "no page")) else null)
            }
        }
    }

    /** Opens the socket of [generation]; its events reach the machine, which ignores them once it is not current. */
    private fun open(generation: Long) {
        val listener = object : TransportListener {
            override fun onText(text: String) {
                // Backpressure: a slow app slows this socket's reader, never memory without bound.
                outbox.awaitRoom { socket?.generation == generation }
                if (text.length > Frame.MAX_SIZE) {
                    dispatch { listOf(Action.Error(RealtimeError(RealtimeError.Type.PROTOCOL, null, "a frame of ${text.length} characters, over ${Frame.MAX_SIZE}, ignored"))) }
                } else {
                    dispatch { it.textReceived(generation, text, now()) }
                }
            }

            override fun onBinary(size: Int) = dispatch { it.binaryReceived(generation, size, now()) }

            override fun onClosed(code: Int, reason: String) {
                clearSocket(generation)
                dispatch { it.socketClosed(generation, code, reason, now()) }
            }

            override fun onFailure(message: String) {
                clearSocket(generation)
                dispatch { it.socketClosed(generation, CloseCode.ABNORMAL_CLOSURE.rawValue, "the connection dropped: $message", now()) }
            }
        }
        val transport = try {
            environment.transport.open(options.endpointURL, listener)
        } catch (error: RuntimeException) {
            dispatch { it.socketFailed(generation, "cannot open a WebSocket: $error", now()) }
            return
        }
        if (read { it.generation } == generation) socket = Slot(generation, transport) else transport.close(null, null)
    }

    private fun clearSocket(generation: Long) {
        synchronized(lock) { if (socket?.generation == generation) socket = null }
    }

    /**
     * Arms a timer; one that fires at least 5 s late means the process was frozen or the device
     * asleep, and the connection is verified at once (Swift client: `resumedAfterFreeze`).
     */
    private fun schedule(key: TimerKey, at: Long) {
        val entry = ArmedTimer(at)
        timers.put(key, entry)?.handle?.cancel()
        entry.handle = environment.clock.schedule(at - now()) {
            if (timers.remove(key, entry)) {
                val fired = now()
                dispatch { machine ->
                    val actions = machine.timerFired(key, fired)
                    if (fired - at >= ConnectionMachine.FROZEN_TIMER_LATENESS) actions + machine.resumed(fired) else actions
                }
            }
        }
    }

    /**
     * Starts a request; its answer reaches the machine unless it was cancelled (the machine also
     * drops answers it no longer awaits).
     */
    private fun request(id: Long, start: (done: ((ConnectionMachine) -> List<Action>) -> Unit) -> Cancellable?) {
        val entry = InFlight()
        requests[id] = entry
        val handle = start { answered -> if (requests.remove(id, entry)) dispatch(answered) }
        entry.handle = handle
    }
}
