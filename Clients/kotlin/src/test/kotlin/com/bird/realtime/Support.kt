package com.bird.realtime

// Fakes for the client's seams (STYLE.md: fakes over sleeps), as the browser client's
// test/support.js: a manual clock, a scripted socket, a scripted HTTP client, a network monitor
// the test drives, and a client wired to them with handlers run at once.

import java.net.URLDecoder
import kotlin.coroutines.startCoroutine

/** A clock whose time moves only when the test says so; timers fire in deadline order. */
class ManualClock(var time: Long = 1_000_000) : RealtimeClock {
    private class Entry(val id: Long, val at: Long, val task: () -> Unit)

    private var lastId = 0L
    private val timers = ArrayList<Entry>()

    override fun now(): Long = time

    override fun schedule(delayMillis: Long, task: () -> Unit): Cancellable {
        lastId += 1
        val entry = Entry(lastId, time + Math.max(0L, delayMillis), task)
        timers.add(entry)
        return object : Cancellable {
            override fun cancel() {
                timers.remove(entry)
            }
        }
    }

    /** Moves time forward by [ms], firing every timer due on the way, each at its own deadline. */
    fun advance(ms: Long) {
        val target = time + ms
        while (true) {
            val due = timers.filter { it.at <= target }.minWith(compareBy<Entry>({ it.at }, { it.id })) ?: break
            timers.remove(due)
            time = Math.max(time, due.at)
            due.task()
        }
        time = target
    }

    /** Moves time forward without firing anything (a frozen process, a sleeping device); `advance(0)` then fires the late timers. */
    fun freeze(ms: Long) {
        time += ms
    }

    /** The deadlines armed, relative to now, sorted. */
    fun pending(): List<Long> = timers.map { it.at - time }.sorted()
}

/** A frame the client sent, with its data parsed. */
data class SentFrame(val event: String, val channel: String?, val data: JsonValue?)

/** A scripted socket: records what the client sends; the test makes the server speak. */
class FakeSocket(val url: String, private val listener: TransportListener) : Transport {
    val sent = ArrayList<String>()
    var closed: Pair<Int?, String?>? = null
    override var queuedBytes: Long = 0

    override fun send(text: String): Boolean {
        check(closed == null) { "send on a closed socket" }
        sent.add(text)
        return true
    }

    override fun close(code: Int?, reason: String?) {
        closed = code to reason
    }

    /** The server sends a frame (`data` JSON-encoded as the protocol does). */
    fun receive(event: String, data: Any?, channel: String? = null) {
        val text = if (data is String) data else JsonValue.from(data).toString()
        listener.onText(Frame.encodeText(event, text, channel))
    }

    /** A raw text frame. */
    fun receiveText(text: String) = listener.onText(text)

    fun handshake(socketId: String = "1.1", activityTimeout: Int = 120) =
        receive("bird:connection_established", mapOf("socket_id" to socketId, "activity_timeout" to activityTimeout))

    /** The server (or the network: 1006) ends the socket. */
    fun drop(code: Int = 1006, reason: String = "") {
        if (code == 1006) listener.onFailure("EOFException: connection reset") else listener.onClosed(code, reason)
    }

    fun frames(): List<SentFrame> = sent.map {
        val value = JsonValue.parse(it)
        SentFrame(value["event"]!!.string!!, value["channel"]?.string, value["data"]?.string?.let { data -> JsonValue.parseOrNull(data) ?: JsonString(data) })
    }

    fun framesOf(event: String): List<SentFrame> = frames().filter { it.event == event }
}

/** Opens [FakeSocket]s and keeps them all. */
class FakeTransportFactory : TransportFactory {
    val sockets = ArrayList<FakeSocket>()
    override fun open(url: String, listener: TransportListener): Transport = FakeSocket(url, listener).also { sockets.add(it) }
}

/** A request the client made, its body parsed (a form into a map, JSON into a value). */
class HttpCall(val url: String, val headers: Map<String, String>, val contentType: String, val body: String, private val callback: (HttpOutcome) -> Unit) {
    val form: Map<String, String> by lazy {
        if (contentType != AuthRequests.FORM) emptyMap() else body.split("&").filter { it.isNotEmpty() }.associate {
            val (key, value) = it.split("=", limit = 2)
            URLDecoder.decode(key, "UTF-8") to URLDecoder.decode(value, "UTF-8")
        }
    }
    val json: JsonValue? by lazy { if (contentType == AuthRequests.JSON) JsonValue.parse(body) else null }
    var cancelled = false
    var answered = false

    /** Answers the call (later than it was made: a held call). */
    fun answer(outcome: HttpOutcome) {
        if (cancelled || answered) return
        answered = true
        callback(outcome)
    }

    /** The room names of a room auth request. */
    val rooms: List<String> get() = json?.get("rooms")?.array?.map { it.string!! } ?: emptyList()
}

/** A scripted HTTP client: [answer] gives the outcome at once, or `null` to hold the call for the test. */
class FakeHttp(var answer: (HttpCall) -> HttpOutcome?) : AuthHttpClient {
    val calls = ArrayList<HttpCall>()

    override fun post(url: String, headers: Map<String, String>, contentType: String, body: String, callback: (HttpOutcome) -> Unit): Cancellable {
        val call = HttpCall(url, headers, contentType, body, callback)
        calls.add(call)
        answer(call)?.let { call.answer(it) }
        return object : Cancellable {
            override fun cancel() {
                call.cancelled = true
            }
        }
    }
}

/** The test double of [NetworkMonitor]: the test says when the network comes, goes or changes. */
class FakeNetworkMonitor : NetworkMonitor {
    var listener: NetworkMonitor.Listener? = null
    var stopped = false
    override fun start(listener: NetworkMonitor.Listener) {
        this.listener = listener
    }
    override fun stop() {
        stopped = true
    }
    fun available() = listener!!.networkAvailable()
    fun lost() = listener!!.networkLost()
    fun changed() = listener!!.networkChanged()
}

/** Tokens for the rooms a room auth request names; [refuse] maps a room to an error code. */
fun roomAuthAnswer(call: HttpCall, time: Long = 5_000_000, life: Long = 3_600_000, refuse: Map<String, String> = emptyMap()): HttpOutcome {
    val rooms = LinkedHashMap<String, Any?>()
    for (name in call.rooms) {
        rooms[name] = refuse[name]?.let { mapOf("error" to it) } ?: mapOf("token" to "token-$name", "expires" to time + life)
    }
    return HttpOutcome.Answered(200, JsonValue.from(mapOf("time" to time, "rooms" to rooms)).toString())
}

/** An answer with a JSON body. */
fun json(status: Int, body: Any?): HttpOutcome = HttpOutcome.Answered(status, if (body is String) body else JsonValue.from(body).toString())

/**
 * A client on fakes, not connected yet: handlers run at once on the thread that delivers
 * (`HandlerExecutors.DIRECT`), so everything happens inside the test's calls.
 */
class TestClient(
    configure: (BirdRealtimeOptions) -> BirdRealtimeOptions = { it },
    answer: (HttpCall) -> HttpOutcome? = { roomAuthAnswer(it) }
) {
    val clock = ManualClock()
    val transport = FakeTransportFactory()
    val http = FakeHttp(answer)
    val network = FakeNetworkMonitor()
    var draw = 0.5
    val bird = BirdRealtime(
        configure(
            BirdRealtimeOptions(
                appKey = "app-key", host = "127.0.0.1", port = 6001,
                authEndpoint = "/auth", userAuthEndpoint = "/user-auth", roomAuthEndpoint = "/rooms/auth",
                executor = HandlerExecutors.DIRECT
            )
        ),
        RealtimeEnvironment(transport, http, clock, { draw }, network)
    )
    val states = ArrayList<ConnectionState>()
    val errors = ArrayList<RealtimeError>()

    init {
        bird.onConnectionStateChange { _, current -> states.add(current) }
        bird.onError { errors.add(it) }
    }

    val sockets: List<FakeSocket> get() = transport.sockets
    val socket: FakeSocket get() = transport.sockets.last()
    val calls: List<HttpCall> get() = http.calls

    /** `connect()` and answer the handshake. */
    fun connectNow(socketId: String = "1.1", activityTimeout: Int = 120): FakeSocket {
        bird.connect()
        socket.handshake(socketId, activityTimeout)
        return socket
    }
}

/** JUnit's `assertThrows`, reified (the Kotlin helpers are not in Debian's console launcher jar). */
inline fun <reified T : Throwable> assertThrows(noinline block: () -> Unit): T =
    org.junit.jupiter.api.Assertions.assertThrows(T::class.java) { block() }

/** How a coroutine started by [startSuspending] ended, once [done]. */
class Outcome<T> {
    var done = false
    var value: T? = null
    var error: Throwable? = null
}

/**
 * Starts [block] with the standard library alone (Debian's kotlinx-coroutines 1.0.1 jar does not
 * run: its atomicfu dependency is not packaged), resumed on whatever thread resumes it: with
 * the tests' direct executor, inside the test's own calls.
 */
fun <T> startSuspending(block: suspend () -> T): Outcome<T> {
    val outcome = Outcome<T>()
    block.startCoroutine(object : kotlin.coroutines.Continuation<T> {
        override val context: kotlin.coroutines.CoroutineContext get() = kotlin.coroutines.EmptyCoroutineContext
        override fun resumeWith(result: Result<T>) {
            outcome.done = true
            outcome.value = result.getOrNull()
            outcome.error = result.exceptionOrNull()
        }
    })
    return outcome
}
