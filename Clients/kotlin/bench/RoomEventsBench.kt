package com.bird.realtime.bench

// Room events a second through `room.on`, against OkHttp's WebSocketListener counting the
// frames of the same stream (issue 37's benchmark; the browser client's bench/chromium_bench.py
// measures the same in Chromium). Built and run by `./build.sh bench [--events N] [--runs R] [--warmups W] [--only KIND]`.
//
// A firehose on loopback (a WebSocket server written here on a ServerSocket: RFC 6455's
// handshake, then pre-encoded unmasked frames in one write, so the sender is never the
// bottleneck) serves each connection `bird:connection_established`, then, after the client's
// first frame (the room join), `joined` and N `bird:room_event` frames for `bench:1`, the
// reference server's bytes (data {"p":1.5,"seq":N}, meta with ids 1…N). In turn, each run:
//   - bare: an OkHttp `WebSocketListener` that sends the join itself and counts the frames after
//     `joined`, parsing nothing;
//   - room.on: `BirdRealtime` (OkHttp, handlers on the default executor: one background thread
//     on the JVM) joining `bench:1` with a public grant (no auth request), a `room.on("tick")`
//     handler counting events;
//   - room.on, DIRECT: the same with handlers run on OkHttp's reader thread (no hand-off);
//   - alone: the same client fed the same frames by a fake transport on one thread (no
//     network, no OkHttp): the client's own ceiling.
// The rate is N / (time from the first event to the last), measured where they are counted; a
// W warm-up runs of each first (3: the JIT recompiles the hot path when a new client's handshake
// and join take branches it had not seen, for the first 2-3 runs), then R runs. Target: room.on
// ≥ 50 % of bare. Every wait is
// bounded (60 s a run); loopback only.

import com.bird.realtime.AuthHttpClient
import com.bird.realtime.BirdRealtime
import com.bird.realtime.BirdRealtimeOptions
import com.bird.realtime.Cancellable
import com.bird.realtime.HandlerExecutors
import com.bird.realtime.HttpOutcome
import com.bird.realtime.NetworkMonitor
import com.bird.realtime.OkHttpTransportFactory
import com.bird.realtime.RealtimeClock
import com.bird.realtime.RealtimeEnvironment
import com.bird.realtime.RoomGrant
import com.bird.realtime.RoomGrants
import com.bird.realtime.Transport
import com.bird.realtime.TransportFactory
import com.bird.realtime.TransportListener
import okhttp3.OkHttpClient
import okhttp3.Request
import okhttp3.Response
import okhttp3.WebSocket
import okhttp3.WebSocketListener
import java.io.ByteArrayOutputStream
import java.io.Closeable
import java.io.InputStream
import java.net.InetAddress
import java.net.ServerSocket
import java.net.Socket
import java.security.MessageDigest
import java.util.Base64
import java.util.concurrent.CountDownLatch
import java.util.concurrent.Executor
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicReference
import kotlin.system.exitProcess

private const val ROOM = "bench:1"
private const val APP_KEY = "app-key"
private const val GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11" // RFC 6455 §1.3
private const val RUN_LIMIT_SECONDS = 60L

/** One unmasked text frame, as a server sends it (RFC 6455 §5.2). */
private fun frame(text: String): ByteArray {
    val payload = text.toByteArray(Charsets.UTF_8)
    val n = payload.size
    val head = when {
        n < 126 -> byteArrayOf(0x81.toByte(), n.toByte())
        n < 65536 -> byteArrayOf(0x81.toByte(), 126, (n shr 8).toByte(), n.toByte())
        else -> byteArrayOf(0x81.toByte(), 127, 0, 0, 0, 0, (n shr 24).toByte(), (n shr 16).toByte(), (n shr 8).toByte(), n.toByte())
    }
    return head + payload
}

/** A JSON string literal of [text] (the inner payload is JSON text inside the frame's JSON). */
private fun quoted(text: String): String = "\"" + text.replace("\\", "\\\\").replace("\"", "\\\"") + "\""

/** A `bird:room_event` frame's text for `bench:1`, keys sorted as the reference server writes them. */
private fun roomEventText(inner: String): String = """{"channel":"$ROOM","data":${quoted(inner)},"event":"bird:room_event"}"""

private const val HANDSHAKE = """{"event":"bird:connection_established","data":"{\"socket_id\":\"1.1\",\"activity_timeout\":120}"}"""
private val JOINED = roomEventText("""{"data":{"count":1,"epoch":"e1","id":0},"event":"joined"}""")
private const val JOIN = """{"event":"bird:room_join","data":"{\"room\":\"$ROOM\",\"token\":\"t\"}"}"""

/** The N events' frame texts. */
private fun eventTexts(count: Int): List<String> {
    val at = System.currentTimeMillis()
    return (1..count).map { seq -> roomEventText("""{"data":{"p":1.5,"seq":$seq},"event":"tick","meta":{"at":$at,"from":null,"id":$seq}}""") }
}

/** The firehose: a WebSocket server on loopback serving the whole stream to every connection. */
private class Firehose(texts: List<String>) : Closeable {
    private val server = ServerSocket(0, 50, InetAddress.getLoopbackAddress())
    private val handshake = frame(HANDSHAKE)
    private val stream: ByteArray
    val port: Int get() = server.localPort

    init {
        val out = ByteArrayOutputStream()
        out.write(frame(JOINED))
        for (text in texts) out.write(frame(text))
        stream = out.toByteArray()
        Thread {
            while (!server.isClosed) {
                val socket = try { server.accept() } catch (error: java.io.IOException) { break }
                Thread { serve(socket) }.apply { isDaemon = true }.start()
            }
        }.apply { isDaemon = true; name = "firehose" }.start()
    }

    private fun serve(socket: Socket) {
        try {
            socket.soTimeout = 30_000
            socket.tcpNoDelay = true
            val input = socket.getInputStream()
            val output = socket.getOutputStream()
            val head = readHead(input) ?: return
            val key = head.split("\r\n").firstOrNull { it.toLowerCase().startsWith("sec-websocket-key:") }?.substringAfter(':')?.trim() ?: return
            val accept = Base64.getEncoder().encodeToString(MessageDigest.getInstance("SHA-1").digest((key + GUID).toByteArray()))
            output.write("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: $accept\r\n\r\n".toByteArray())
            output.write(handshake)
            output.flush()
            // The first frame: a join is all it can be here.
            if (readFrame(input) < 0) return
            output.write(stream)
            output.flush()
            // Then frames are read and dropped; a close frame is answered and the socket closed.
            while (true) {
                val opcode = readFrame(input)
                if (opcode < 0) return
                if (opcode == 0x8) {
                    output.write(byteArrayOf(0x88.toByte(), 0))
                    output.flush()
                    return
                }
            }
        } catch (error: java.io.IOException) {
        } finally {
            try { socket.close() } catch (error: java.io.IOException) { }
        }
    }

    /** Reads one client frame and drops its payload: its opcode, or -1 at the end of the stream. */
    private fun readFrame(input: InputStream): Int {
        val first = input.read()
        val second = input.read()
        if (first < 0 || second < 0) return -1
        var length = (second and 0x7f).toLong()
        if (length == 126L) {
            length = ((input.read() shl 8) or input.read()).toLong()
        } else if (length == 127L) {
            length = 0
            repeat(8) { length = (length shl 8) or input.read().toLong() }
        }
        val masked = second and 0x80 != 0
        if (!skip(input, length + if (masked) 4 else 0)) return -1
        return first and 0x0f
    }

    private fun readHead(input: InputStream): String? {
        val bytes = ByteArrayOutputStream()
        while (bytes.size() < 16384) {
            val next = input.read()
            if (next < 0) return null
            bytes.write(next)
            val size = bytes.size()
            if (size >= 4) {
                val all = bytes.toByteArray()
                if (all[size - 4] == '\r'.toByte() && all[size - 3] == '\n'.toByte() && all[size - 2] == '\r'.toByte() && all[size - 1] == '\n'.toByte()) {
                    return String(all, Charsets.ISO_8859_1)
                }
            }
        }
        return null
    }

    private fun skip(input: InputStream, count: Long): Boolean {
        var left = count
        while (left > 0) {
            if (input.read() < 0) return false
            left -= 1
        }
        return true
    }

    override fun close() {
        server.close()
    }
}

/** Counts [count] events; the rate is taken from the first to the last. */
private class Counter(private val count: Int) {
    @Volatile private var seen = 0
    private var first = 0L
    private var last = 0L
    private val done = CountDownLatch(1)

    /** One event (from one thread at a time). */
    fun tick() {
        val n = seen + 1
        seen = n
        if (n == 1) first = System.nanoTime()
        if (n == count) {
            last = System.nanoTime()
            done.countDown()
        }
    }

    /** Events a second, or an error when they did not all come in time. */
    fun await(what: String): Double {
        if (!done.await(RUN_LIMIT_SECONDS, TimeUnit.SECONDS)) throw IllegalStateException("$what: $seen of $count events in $RUN_LIMIT_SECONDS s")
        return count / ((last - first) / 1e9)
    }
}

private val okHttp: OkHttpClient by lazy { OkHttpClient.Builder().readTimeout(0, TimeUnit.MILLISECONDS).build() }

/** The bare listener: sends the join itself, counts frames after `joined`, parses nothing. */
private fun bare(url: String, count: Int): Double {
    val counter = Counter(count)
    val failure = AtomicReference<String?>(null)
    val socket = okHttp.newWebSocket(Request.Builder().url(url).build(), object : WebSocketListener() {
        private var joined = false

        override fun onMessage(webSocket: WebSocket, text: String) {
            if (joined) {
                counter.tick()
                return
            }
            if (text.contains("bird:connection_established")) webSocket.send(JOIN)
            else if (text.contains("\\\"event\\\":\\\"joined\\\"")) joined = true
        }

        override fun onFailure(webSocket: WebSocket, t: Throwable, response: Response?) {
            failure.set(t.toString())
        }
    })
    try {
        return counter.await("bare OkHttp listener${failure.get()?.let { " ($it)" } ?: ""}")
    } finally {
        socket.cancel()
    }
}

/** No auth requests: `bench:1` joins with the public grant. */
private object NoAuth : AuthHttpClient {
    override fun post(url: String, headers: Map<String, String>, contentType: String, body: String, callback: (HttpOutcome) -> Unit): Cancellable =
        throw IllegalStateException("the bench asks no auth route")
}

/** `BirdRealtime` on [transport], `room.on("tick")` counting, handlers on [executor]. */
private fun client(transport: TransportFactory, url: String, count: Int, executor: Executor, what: String): Double {
    val now = System.currentTimeMillis()
    val grants = RoomGrants(now, listOf(RoomGrant("bench:{id}", "t", now + 3_600_000)))
    val bird = BirdRealtime(
        BirdRealtimeOptions(appKey = APP_KEY, url = url, grants = grants, executor = executor),
        RealtimeEnvironment(transport, NoAuth, RealtimeClock.SYSTEM, { 0.5 }, NetworkMonitor.NONE)
    )
    val counter = Counter(count)
    val errors = StringBuffer()
    bird.onError { error -> errors.append("${error.code} ${error.message}; ") }
    bird.join(ROOM).on("tick") { _, _ -> counter.tick() }
    bird.connect()
    try {
        return counter.await("$what${if (errors.isEmpty()) "" else " ($errors)"}")
    } finally {
        bird.close()
    }
}

/**
 * A transport that plays the firehose's frames to the client on one thread: no network. The
 * player's CPU time and bytes allocated over the events are kept for the last run.
 */
private class FakeFirehose(private val texts: List<String>) : TransportFactory {
    @Volatile var cpuNanos = 0L
    @Volatile var allocatedBytes = 0L

    override fun open(url: String, listener: TransportListener): Transport {
        val transport = object : Transport {
            @Volatile var closed = false
            override val queuedBytes: Long get() = 0

            override fun send(text: String): Boolean {
                if (text.contains("bird:room_join")) {
                    Thread {
                        listener.onText(JOINED)
                        val threads = java.lang.management.ManagementFactory.getThreadMXBean() as com.sun.management.ThreadMXBean
                        val id = Thread.currentThread().id
                        val cpu = threads.currentThreadCpuTime
                        val allocated = threads.getThreadAllocatedBytes(id)
                        for (frame in texts) {
                            if (closed) break
                            listener.onText(frame)
                        }
                        cpuNanos = threads.currentThreadCpuTime - cpu
                        allocatedBytes = threads.getThreadAllocatedBytes(id) - allocated
                    }.apply { isDaemon = true }.start()
                }
                return true
            }

            override fun close(code: Int?, reason: String?) {
                closed = true
            }
        }
        Thread { listener.onText(HANDSHAKE) }.apply { isDaemon = true }.start()
        return transport
    }
}

private fun median(values: List<Double>): Double {
    val sorted = values.sorted()
    val middle = sorted.size / 2
    return if (sorted.size % 2 == 1) sorted[middle] else (sorted[middle - 1] + sorted[middle]) / 2
}

private fun rate(value: Double): String = String.format("%,.0f", value)

private fun percent(value: Double): String = String.format("%.0f %%", value * 100)

fun main(args: Array<String>) {
    var count = 1_000_000
    var runs = 3
    var only: String? = null
    var warmups = 3
    var index = 0
    while (index < args.size) {
        when (args[index]) {
            "--events" -> count = args.getOrNull(index + 1)?.toIntOrNull()?.takeIf { it > 0 } ?: usage()
            "--runs" -> runs = args.getOrNull(index + 1)?.toIntOrNull()?.takeIf { it > 0 } ?: usage()
            "--warmups" -> warmups = args.getOrNull(index + 1)?.toIntOrNull()?.takeIf { it >= 0 } ?: usage()
            "--only" -> only = args.getOrNull(index + 1)?.takeIf { it in ONLY_KINDS } ?: usage()
            else -> usage()
        }
        index += 2
    }
    val texts = eventTexts(count)
    val kinds = if (only == null) KINDS else listOf(only)
    val rows = kinds.associate { it to ArrayList<Double>() }
    val costs = kinds.associate { it to ArrayList<Pair<Double, Double>>() }
    val firehose = Firehose(texts)
    val url = "ws://127.0.0.1:${firehose.port}/app/$APP_KEY?namespace=bird&client=kotlin&protocol=7"
    val fake = FakeFirehose(texts)
    try {
        for (run in 1 - warmups..runs) { // runs up to 0 are the warm-ups
            for (kind in kinds) {
                fake.cpuNanos = 0 // set again by the player when its frames are played
                val measured = when (kind) {
                    "bare" -> bare(url, count)
                    "client" -> client(OkHttpTransportFactory(okHttp), url, count, HandlerExecutors.default, "room.on")
                    "direct" -> client(OkHttpTransportFactory(okHttp), url, count, HandlerExecutors.DIRECT, "room.on, DIRECT")
                    "alone" -> client(fake, "ws://127.0.0.1:9/fake", count, HandlerExecutors.default, "room.on, fake transport")
                    else -> client(fake, "ws://127.0.0.1:9/fake", count, HandlerExecutors.DIRECT, "room.on, fake transport, handlers DIRECT")
                }
                if (run > 0 && (kind == "alone" || kind == "one-thread")) {
                    // The reader's cost per event (with DIRECT, the handler's too), read after the player ends.
                    val until = System.nanoTime() + 5_000_000_000L
                    while (fake.cpuNanos == 0L && System.nanoTime() < until) Thread.sleep(1)
                    costs.getValue(kind).add(Pair(fake.cpuNanos.toDouble() / count, fake.allocatedBytes.toDouble() / count))
                }
                if (run > 0) rows.getValue(kind).add(measured)
            }
        }
    } catch (error: IllegalStateException) {
        System.err.println("bench: ${error.message}")
        exitProcess(1)
    } finally {
        firehose.close()
    }

    println("Java ${System.getProperty("java.version")}, Kotlin ${KotlinVersion.CURRENT}, OkHttp ${okhttp3.internal.Version.userAgent()}, " +
        "${Runtime.getRuntime().availableProcessors()} cores; $count room events a run, $runs runs after $warmups warm-ups\n")
    if (only != null) {
        // One column alone (for a profiler): its runs and their median.
        val values = rows.getValue(only)
        println("$only, events/s: ${values.joinToString(", ") { rate(it) }}; median ${rate(median(values))}")
        val spent = costs.getValue(only)
        if (spent.isNotEmpty()) {
            println("$only, the reader's CPU ns an event: ${spent.joinToString(", ") { String.format("%.0f", it.first) }}; median ${String.format("%.0f", median(spent.map { it.first }))}")
            println("$only, bytes allocated an event on the reader: ${spent.joinToString(", ") { String.format("%.0f", it.second) }}; median ${String.format("%.0f", median(spent.map { it.second }))}")
        }
        exitProcess(0)
    }
    println("| run | bare OkHttp listener, frames/s | room.on, events/s | room.on / bare | target | room.on, handlers DIRECT, events/s | room.on, fake transport (the client alone), events/s |")
    println("|---|---|---|---|---|---|---|")
    fun row(label: String, bare: Double, client: Double, direct: Double, alone: Double) =
        println("| $label | ${rate(bare)} | ${rate(client)} | ${percent(client / bare)} | ≥ 50 % | ${rate(direct)} | ${rate(alone)} |")
    for (run in 0 until runs) {
        row("${run + 1}", rows.getValue("bare")[run], rows.getValue("client")[run], rows.getValue("direct")[run], rows.getValue("alone")[run])
    }
    row("median", median(rows.getValue("bare")), median(rows.getValue("client")), median(rows.getValue("direct")), median(rows.getValue("alone")))
    // OkHttp's dispatcher and WebSocket threads are not daemons: the process ends here.
    exitProcess(0)
}

/**
 * The columns: bare listener, client on OkHttp, handlers direct, fake transport; and, with
 * --only, "one-thread" (the fake transport with handlers direct: the whole client on one thread).
 */
private val KINDS = listOf("bare", "client", "direct", "alone")
private val ONLY_KINDS = KINDS + "one-thread"

private fun usage(): Nothing {
    System.err.println("usage: ./build.sh bench [--events N] [--runs R] [--warmups W] [--only bare|client|direct|alone|one-thread]")
    exitProcess(2)
}
