package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Assertions.fail
import org.junit.jupiter.api.Assumptions.assumeTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
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
import java.util.concurrent.Executors
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger
import javax.crypto.Mac
import javax.crypto.spec.SecretKeySpec

/**
 * Against the real server: `realtime-server` and the sample `room-backend` on free loopback
 * ports (their paths from REALTIME_SERVER and ROOM_BACKEND), the client's socket through a TCP
 * proxy the test cuts, OkHttp for everything. Skipped without the binaries, failed when CI=true.
 */
class IntegrationTest {
    private val appId = "1"
    private val appKey = "app-key"
    private val appSecret = "app-secret"

    /** Why the test cannot run, or `null`. */
    private fun missing(): String? {
        val server = System.getenv("REALTIME_SERVER")
        val backend = System.getenv("ROOM_BACKEND")
        if (server == null || !File(server).canExecute()) return "REALTIME_SERVER does not name realtime-server (${server ?: "unset"})"
        if (backend == null || !File(backend).canExecute()) return "ROOM_BACKEND does not name room-backend (${backend ?: "unset"})"
        return null
    }

    /** A binary started on a free port: it prints `port N`. */
    private class Started(val process: Process, val port: Int)

    private fun start(vararg command: String): Started {
        val process = ProcessBuilder(*command).redirectError(ProcessBuilder.Redirect.DISCARD).start()
        val lines = BufferedReader(InputStreamReader(process.inputStream))
        val found = CountDownLatch(1)
        var port = 0
        Thread {
            while (true) {
                val line = try { lines.readLine() } catch (error: java.io.IOException) { null } ?: break
                val match = Regex("port (\\d+)").find(line)
                if (match != null && port == 0) {
                    port = match.groupValues[1].toInt()
                    found.countDown()
                }
            }
        }.apply { isDaemon = true }.start()
        if (!found.await(10, TimeUnit.SECONDS)) {
            process.destroyForcibly()
            fail<Unit>("${command[0]} printed no port")
        }
        return Started(process, port)
    }

    /** A TCP proxy on loopback whose connections the test cuts, and which can refuse new ones. */
    private class Proxy(private val target: Int) {
        private val server = ServerSocket(0, 50, InetAddress.getLoopbackAddress())
        private val sockets = Collections.synchronizedSet(HashSet<Socket>())
        @Volatile private var refusing = false
        val port: Int get() = server.localPort

        init {
            Thread {
                while (!server.isClosed) {
                    val client = try { server.accept() } catch (error: java.io.IOException) { break }
                    if (refusing) {
                        client.close()
                        continue
                    }
                    val upstream = try { Socket(InetAddress.getLoopbackAddress(), target) } catch (error: java.io.IOException) { client.close(); continue }
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

    /** Pusher's signed REST request (auth_version 1.0), as the server's HTTP API checks it. */
    private fun publish(port: Int, path: String, body: String) {
        val md5 = MessageDigest.getInstance("MD5").digest(body.toByteArray()).joinToString("") { String.format("%02x", it) }
        val query = "auth_key=$appKey&auth_timestamp=${System.currentTimeMillis() / 1000}&auth_version=1.0&body_md5=$md5"
        val mac = Mac.getInstance("HmacSHA256").apply { init(SecretKeySpec(appSecret.toByteArray(), "HmacSHA256")) }
        val signature = mac.doFinal("POST\n$path\n$query".toByteArray()).joinToString("") { String.format("%02x", it) }
        val connection = URL("http://127.0.0.1:$port$path?$query&auth_signature=$signature").openConnection() as HttpURLConnection
        connection.requestMethod = "POST"
        connection.doOutput = true
        connection.setRequestProperty("Content-Type", "application/json")
        connection.connectTimeout = 5000
        connection.readTimeout = 5000
        connection.outputStream.use { it.write(body.toByteArray()) }
        val status = connection.responseCode
        val answer = (if (status < 400) connection.inputStream else connection.errorStream)?.bufferedReader()?.readText()
        assertEquals(200, status, answer)
    }

    private fun until(what: String, predicate: () -> Boolean) {
        val deadline = System.currentTimeMillis() + 10_000
        while (!predicate()) {
            if (System.currentTimeMillis() > deadline) fail<Unit>("timed out waiting for $what")
            Thread.sleep(10)
        }
    }

    private data class Seen(val n: Long?, val id: Long, val replayed: Boolean, val from: String?)

    @Test
    @Timeout(120)
    fun `against realtime-server - a room joined with room-backend's token, a cut connection replayed in order, once, with no new auth request`() {
        val why = missing()
        if (why != null && System.getenv("CI") == "true") fail<Unit>("the end-to-end test cannot run: $why")
        assumeTrue(why == null, why)

        val server = start(System.getenv("REALTIME_SERVER"), "--port", "0", "--app-id", appId, "--app-key", appKey, "--app-secret", appSecret, "--quiet")
        val backend = start(System.getenv("ROOM_BACKEND"), "--port", "0", "--app-id", appId, "--app-key", appKey, "--app-secret", appSecret, "--room", "order:{id},history=20")
        val proxy = Proxy(server.port)
        val handlers = Executors.newSingleThreadExecutor()
        val authRequests = AtomicInteger(0)
        val counting = object : AuthHttpClient {
            private val real = OkHttpAuthClient()
            override fun post(url: String, headers: Map<String, String>, contentType: String, body: String, callback: (HttpOutcome) -> Unit): Cancellable {
                authRequests.incrementAndGet()
                return real.post(url, headers, contentType, body, callback)
            }
        }
        val bird = BirdRealtime(
            BirdRealtimeOptions(
                appKey = appKey, url = "ws://127.0.0.1:${proxy.port}/app/$appKey?namespace=bird&client=kotlin&protocol=7",
                roomAuthEndpoint = "http://127.0.0.1:${backend.port}/rooms/auth", authHeaders = mapOf("X-User" to "ann"),
                executor = handlers
            ),
            RealtimeEnvironment(OkHttpTransportFactory(), counting, RealtimeClock.SYSTEM, { 0.1 }, NetworkMonitor.NONE)
        )
        try {
            val states = CopyOnWriteArrayList<ConnectionState>()
            bird.onConnectionStateChange { _, current -> states.add(current) }
            bird.connect()
            until("connected") { bird.connectionState == ConnectionState.CONNECTED }
            assertTrue(Regex("^\\d+\\.\\d+$").matches(bird.connectionId ?: ""), bird.connectionId)

            val order = bird.join("order:1042")
            val seen = CopyOnWriteArrayList<Seen>()
            order.on("updated") { data, meta -> seen.add(Seen(data["n"]?.long, meta.id, meta.replayed, meta.from)) }
            order.ready(10_000)
            val room = { n: Int -> publish(server.port, "/apps/$appId/room_events", """{"name":"updated","room":"order:1042","data":"{\"n\":$n}"}""") }
            room(1)
            room(2)
            until("two live room events") { seen.size == 2 }
            assertEquals(1, authRequests.get(), "one auth request for the join")

            proxy.cut()
            until("the drop") { bird.connectionState != ConnectionState.CONNECTED }
            for (n in 3..5) room(n)
            proxy.reopen()
            until("the replay") { seen.size == 5 && bird.connectionState == ConnectionState.CONNECTED }
            room(6)
            until("a live event after the replay") { seen.size == 6 }

            assertEquals(listOf(1L, 2L, 3L, 4L, 5L, 6L), seen.map { it.n }, "in order, none twice")
            assertEquals(listOf(false, false, true, true, true, false), seen.map { it.replayed })
            assertEquals(listOf(1L, 2L, 3L, 4L, 5L, 6L), seen.map { it.id })
            assertTrue(seen.all { it.from == null }, "sent by the app's server")
            assertEquals(1, authRequests.get(), "the rejoin used the kept token: no auth request")
            assertTrue(states.contains(ConnectionState.UNAVAILABLE) || states.count { it == ConnectionState.CONNECTING } > 1)

            val page = CountDownLatch(1)
            var events: List<Long?> = emptyList()
            var more = false
            order.history(null, 3) { answer, error ->
                events = answer?.events?.map { it.data["n"]?.long } ?: listOf(null, error?.code?.length?.toLong())
                more = answer?.more ?: false
                page.countDown()
            }
            assertTrue(page.await(10, TimeUnit.SECONDS))
            assertEquals(listOf(4L, 5L, 6L), events)
            assertTrue(more)
        } finally {
            bird.close()
            proxy.close()
            handlers.shutdown()
            server.process.destroy()
            backend.process.destroy()
            server.process.waitFor(5, TimeUnit.SECONDS)
            backend.process.waitFor(5, TimeUnit.SECONDS)
        }
    }
}
