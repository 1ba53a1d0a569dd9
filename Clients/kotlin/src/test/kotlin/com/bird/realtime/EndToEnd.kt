package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.fail
import org.junit.jupiter.api.Assumptions.assumeTrue
import java.io.BufferedReader
import java.io.File
import java.io.InputStreamReader
import java.net.HttpURLConnection
import java.net.InetAddress
import java.net.ServerSocket
import java.net.Socket
import java.net.URL
import java.security.MessageDigest
import java.util.Collections
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.CountDownLatch
import java.util.concurrent.ExecutorService
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import javax.crypto.Mac
import javax.crypto.spec.SecretKeySpec

// The end-to-end tests' harness: `realtime-server` and the sample `room-backend` (and the Swift
// CLI, `realtime`) from REALTIME_SERVER, ROOM_BACKEND and REALTIME_CLI, on free loopback ports;
// the Kotlin client's socket through a TCP proxy the tests cut; everything bounded.

internal object EndToEnd {
    const val APP_ID = "1"
    const val APP_KEY = "app-key"
    const val APP_SECRET = "app-secret"

    /** Each wait of the tests, at most (ms). */
    const val WAIT = 10_000L

    private val binaries = mapOf(
        "REALTIME_SERVER" to "realtime-server",
        "ROOM_BACKEND" to "room-backend",
        "REALTIME_CLI" to "realtime (the Swift CLI)"
    )

    /**
     * The binary [variable] names; for REALTIME_CLI, when unset, `realtime` beside
     * REALTIME_SERVER (one build makes both: the Swift suite's KotlinClientTests names only the
     * server and the backend).
     */
    fun binary(variable: String): String? {
        val named = System.getenv(variable)
        if (named != null || variable != "REALTIME_CLI") return named
        val server = System.getenv("REALTIME_SERVER") ?: return null
        val beside = File(File(server).absoluteFile.parentFile, "realtime")
        return if (beside.canExecute()) beside.path else null
    }

    /**
     * Skips the test when a binary it needs is not named by its environment variable (fails it
     * instead when CI=true).
     *
     * @param variables the variables (REALTIME_SERVER, ROOM_BACKEND, REALTIME_CLI).
     */
    fun requireBinaries(vararg variables: String) {
        val why = variables.asSequence().mapNotNull { variable ->
            val path = binary(variable)
            if (path == null || !File(path).canExecute()) "$variable does not name ${binaries[variable] ?: "a binary"} (${path ?: "unset"})" else null
        }.firstOrNull()
        if (why != null && System.getenv("CI") == "true") fail<Unit>("the end-to-end test cannot run: $why")
        assumeTrue(why == null, why)
    }

    /**
     * Waits until [predicate] holds, checking every 10 ms, at most [timeoutMillis].
     *
     * @param what said when the wait fails.
     */
    fun until(what: String, timeoutMillis: Long = WAIT, predicate: () -> Boolean) {
        val deadline = System.currentTimeMillis() + timeoutMillis
        while (!predicate()) {
            if (System.currentTimeMillis() > deadline) fail<Unit>("timed out waiting for $what")
            Thread.sleep(10)
        }
    }

    /**
     * Pusher's signed REST request (auth_version 1.0), as the server's HTTP API checks it.
     *
     * @return the status and the answer's text.
     */
    fun signed(port: Int, method: String, path: String, body: String): Pair<Int, String> {
        val md5 = MessageDigest.getInstance("MD5").digest(body.toByteArray()).joinToString("") { String.format("%02x", it) }
        val query = "auth_key=$APP_KEY&auth_timestamp=${System.currentTimeMillis() / 1000}&auth_version=1.0&body_md5=$md5"
        val mac = Mac.getInstance("HmacSHA256").apply { init(SecretKeySpec(APP_SECRET.toByteArray(), "HmacSHA256")) }
        val signature = mac.doFinal("$method\n$path\n$query".toByteArray()).joinToString("") { String.format("%02x", it) }
        val connection = URL("http://127.0.0.1:$port$path?$query&auth_signature=$signature").openConnection() as HttpURLConnection
        connection.requestMethod = method
        connection.connectTimeout = 5000
        connection.readTimeout = 5000
        if (method == "POST") {
            connection.doOutput = true
            connection.setRequestProperty("Content-Type", "application/json")
            connection.outputStream.use { it.write(body.toByteArray()) }
        }
        val status = connection.responseCode
        val answer = (if (status < 400) connection.inputStream else connection.errorStream)?.bufferedReader()?.readText() ?: ""
        return status to answer
    }
}

/** A binary started on a free port: it prints `port N`. */
internal class Started(val process: Process, val port: Int) {
    companion object {
        /**
         * Starts [command] and waits for its `port N` line (10 s); `null` when it exits first.
         * Its other output lines go to [lines].
         */
        fun tryStart(command: List<String>, lines: MutableList<String>? = null): Started? {
            val process = ProcessBuilder(command).redirectError(ProcessBuilder.Redirect.DISCARD).start()
            val reader = BufferedReader(InputStreamReader(process.inputStream))
            val found = CountDownLatch(1)
            var port = 0
            Thread {
                while (true) {
                    val line = try { reader.readLine() } catch (error: java.io.IOException) { null } ?: break
                    val match = Regex("^port (\\d+)$").find(line.trim())
                    if (match != null && port == 0) {
                        port = match.groupValues[1].toInt()
                        found.countDown()
                    } else {
                        lines?.add(line)
                    }
                }
                found.countDown()
            }.apply { isDaemon = true }.start()
            if (!found.await(10, TimeUnit.SECONDS) || port == 0) {
                process.destroyForcibly()
                process.waitFor(5, TimeUnit.SECONDS)
                return null
            }
            return Started(process, port)
        }

        fun start(vararg command: String): Started = tryStart(command.toList()) ?: fail<Started>("${command[0]} printed no port")
    }

    fun stop() {
        process.destroy()
        if (!process.waitFor(5, TimeUnit.SECONDS)) {
            process.destroyForcibly()
            process.waitFor(5, TimeUnit.SECONDS)
        }
    }
}

/** A TCP proxy on loopback whose connections the test cuts, and which can refuse new ones. */
internal class Proxy(private val target: Int) {
    private val server = ServerSocket(0, 50, InetAddress.getLoopbackAddress())
    private val sockets = Collections.synchronizedSet(HashSet<Socket>())
    @Volatile private var refusing = false
    val port: Int get() = server.localPort
    /** Connections accepted and forwarded (the client's attempts that reached the server). */
    val forwarded = AtomicInteger(0)
    /** Connections accepted at all (refused ones too): the client's attempts. */
    val accepted = AtomicInteger(0)

    init {
        Thread {
            while (!server.isClosed) {
                val client = try { server.accept() } catch (error: java.io.IOException) { break }
                accepted.incrementAndGet()
                if (refusing) {
                    client.close()
                    continue
                }
                val upstream = try { Socket(InetAddress.getLoopbackAddress(), target) } catch (error: java.io.IOException) { client.close(); continue }
                forwarded.incrementAndGet()
                sockets.add(client)
                sockets.add(upstream)
                pump(client, upstream)
                pump(upstream, client)
            }
        }.apply { isDaemon = true }.start()
    }

    private fun pump(from: Socket, to: Socket) {
        Thread {
            val buffer = ByteArray(16384)
            try {
                while (true) {
                    val read = from.getInputStream().read(buffer)
                    if (read < 0) break
                    to.getOutputStream().write(buffer, 0, read)
                }
            } catch (error: java.io.IOException) {
            }
            from.close()
            to.close()
            sockets.remove(from)
            sockets.remove(to)
        }.apply { isDaemon = true }.start()
    }

    /** Closes every connection and refuses new ones until [reopen]. */
    fun cut() {
        refusing = true
        synchronized(sockets) { sockets.toList() }.forEach { it.close() }
    }

    fun reopen() {
        refusing = false
    }

    fun close() {
        cut()
        server.close()
    }
}

/** The room auth route through OkHttp, counting requests and keeping their bodies. */
internal class CountingAuth : AuthHttpClient {
    private val real = OkHttpAuthClient()
    val requests = AtomicInteger(0)
    val bodies = CopyOnWriteArrayList<String>()

    override fun post(url: String, headers: Map<String, String>, contentType: String, body: String, callback: (HttpOutcome) -> Unit): Cancellable {
        requests.incrementAndGet()
        bodies.add(body)
        return real.post(url, headers, contentType, body, callback)
    }
}

/**
 * `realtime-server` and `room-backend` (with [rules]) on free ports, a proxy in front of the
 * server, one handler thread, and the clients made by [client]; [close] ends them all.
 */
internal class Stack(vararg rules: String) : java.io.Closeable {
    @Volatile var server: Started = Started.start(*serverCommand(0).toTypedArray())
        private set
    val backend: Started
    val proxy: Proxy
    val handlers: ExecutorService = Executors.newSingleThreadExecutor()
    private val clients = CopyOnWriteArrayList<BirdRealtime>()

    init {
        val backendCommand = arrayListOf(System.getenv("ROOM_BACKEND"), "--port", "0", "--app-id", EndToEnd.APP_ID,
            "--app-key", EndToEnd.APP_KEY, "--app-secret", EndToEnd.APP_SECRET)
        for (rule in rules) backendCommand.addAll(listOf("--room", rule))
        backend = try { Started.start(*backendCommand.toTypedArray()) } catch (error: Throwable) { server.stop(); throw error }
        proxy = Proxy(server.port)
    }

    private fun serverCommand(port: Int) = listOf(System.getenv("REALTIME_SERVER"), "--port", "$port", "--app-id", EndToEnd.APP_ID,
        "--app-key", EndToEnd.APP_KEY, "--app-secret", EndToEnd.APP_SECRET, "--memory", "--quiet")

    val authEndpoint: String get() = "http://127.0.0.1:${backend.port}/rooms/auth"

    /** The server's own URL for clients that bypass the proxy (the Swift CLI). */
    val directURL: String get() = "ws://127.0.0.1:${server.port}/app/${EndToEnd.APP_KEY}"

    /**
     * A client through the proxy, as [user] (the backend's `X-User`); its handlers on the stack's
     * thread; the backoff's jitter [jitter] (a small one keeps repeated drops quick).
     */
    fun client(auth: AuthHttpClient, user: String = "ann", jitter: Double = 0.01): BirdRealtime {
        val bird = BirdRealtime(
            BirdRealtimeOptions(
                appKey = EndToEnd.APP_KEY,
                url = "ws://127.0.0.1:${proxy.port}/app/${EndToEnd.APP_KEY}?namespace=bird&client=kotlin&protocol=7",
                roomAuthEndpoint = authEndpoint, authHeaders = mapOf("X-User" to user), executor = handlers
            ),
            RealtimeEnvironment(OkHttpTransportFactory(), auth, RealtimeClock.SYSTEM, { jitter }, NetworkMonitor.NONE)
        )
        clients.add(bird)
        return bird
    }

    /** Publishes one room event through the signed HTTP API; [data] is the event's JSON text. */
    fun publish(room: String, event: String, data: String) {
        val body = JsonObject(linkedMapOf<String, JsonValue>("name" to JsonString(event), "room" to JsonString(room), "data" to JsonString(data)))
        val (status, answer) = EndToEnd.signed(server.port, "POST", "/apps/${EndToEnd.APP_ID}/room_events", body.toString())
        assertEquals(200, status, answer)
    }

    /** Kills the server (SIGKILL: its memory, and every room's history, goes) and starts a new one on the same port. */
    fun restartServer() {
        val port = server.port
        server.process.destroyForcibly()
        if (!server.process.waitFor(5, TimeUnit.SECONDS)) fail<Unit>("realtime-server did not die")
        // The port is free once the process is gone; a bind that still fails is tried again.
        val deadline = System.currentTimeMillis() + 5_000
        while (true) {
            val started = Started.tryStart(serverCommand(port))
            if (started != null) {
                assertEquals(port, started.port)
                server = started
                return
            }
            if (System.currentTimeMillis() > deadline) fail<Unit>("realtime-server could not start again on port $port")
            Thread.sleep(100)
        }
    }

    override fun close() {
        for (bird in clients) bird.close()
        proxy.close()
        handlers.shutdown()
        server.stop()
        backend.stop()
    }
}
