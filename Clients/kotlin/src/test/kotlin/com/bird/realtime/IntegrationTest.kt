package com.bird.realtime

import com.bird.realtime.EndToEnd.until
import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertNotEquals
import org.junit.jupiter.api.Assertions.assertThrows
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Assertions.fail
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import java.io.BufferedReader
import java.io.InputStreamReader
import java.util.concurrent.CopyOnWriteArrayList
import java.util.concurrent.CountDownLatch
import java.util.concurrent.TimeUnit

/**
 * Against the real server: `realtime-server` and the sample `room-backend` on free loopback
 * ports (their paths from REALTIME_SERVER and ROOM_BACKEND; the Swift CLI from REALTIME_CLI),
 * the client's socket through a TCP proxy the test cuts, OkHttp for everything (EndToEnd.kt).
 * Skipped without the binaries, failed when CI=true. Every wait is bounded.
 */
class IntegrationTest {
    private data class Seen(val n: Long?, val id: Long, val replayed: Boolean, val from: String?)

    /** Records a room's `updated` events. */
    private fun recordUpdates(room: Room): CopyOnWriteArrayList<Seen> {
        val seen = CopyOnWriteArrayList<Seen>()
        room.on("updated") { data, meta -> seen.add(Seen(data["n"]?.long, meta.id, meta.replayed, meta.from)) }
        return seen
    }

    private fun connected(bird: BirdRealtime) {
        bird.connect()
        until("connected") { bird.connectionState == ConnectionState.CONNECTED }
    }

    @Test
    @Timeout(120)
    fun `against realtime-server - a room joined with room-backend's token, a cut connection replayed in order, once, with no new auth request`() {
        EndToEnd.requireBinaries("REALTIME_SERVER", "ROOM_BACKEND")
        Stack("order:{id},history=20").use { stack ->
            val auth = CountingAuth()
            val bird = stack.client(auth, jitter = 0.1)
            val states = CopyOnWriteArrayList<ConnectionState>()
            bird.onConnectionStateChange { _, current -> states.add(current) }
            connected(bird)
            assertTrue(Regex("^\\d+\\.\\d+$").matches(bird.connectionId ?: ""), bird.connectionId)

            val order = bird.join("order:1042")
            val seen = recordUpdates(order)
            order.ready(10_000)
            val room = { n: Int -> stack.publish("order:1042", "updated", """{"n":$n}""") }
            room(1)
            room(2)
            until("two live room events") { seen.size == 2 }
            assertEquals(1, auth.requests.get(), "one auth request for the join")

            stack.proxy.cut()
            until("the drop") { bird.connectionState != ConnectionState.CONNECTED }
            for (n in 3..5) room(n)
            stack.proxy.reopen()
            until("the replay") { seen.size == 5 && bird.connectionState == ConnectionState.CONNECTED }
            room(6)
            until("a live event after the replay") { seen.size == 6 }

            assertEquals(listOf(1L, 2L, 3L, 4L, 5L, 6L), seen.map { it.n }, "in order, none twice")
            assertEquals(listOf(false, false, true, true, true, false), seen.map { it.replayed })
            assertEquals(listOf(1L, 2L, 3L, 4L, 5L, 6L), seen.map { it.id })
            assertTrue(seen.all { it.from == null }, "sent by the app's server")
            assertEquals(1, auth.requests.get(), "the rejoin used the kept token: no auth request")
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
        }
    }

    @Test
    @Timeout(120)
    fun `five drop cycles, each missing room events published through the signed API - all replayed in order, none twice, no new auth request`() {
        EndToEnd.requireBinaries("REALTIME_SERVER", "ROOM_BACKEND")
        Stack("order:{id},history=50").use { stack ->
            val auth = CountingAuth()
            val bird = stack.client(auth)
            val connections = CopyOnWriteArrayList<String>()
            bird.onConnectionStateChange { _, current -> if (current == ConnectionState.CONNECTED) connections.add(bird.connectionId ?: "?") }
            connected(bird)
            val order = bird.join("order:5")
            val seen = recordUpdates(order)
            val errors = CopyOnWriteArrayList<String>()
            order.on("error") { data, _ -> errors.add(data.toString()) }
            order.ready(10_000)

            var n = 0
            val publish = { n += 1; stack.publish("order:5", "updated", """{"n":$n}""") }
            publish()
            until("the first live event") { seen.size == 1 }
            val missed = ArrayList<Long>()
            for (cycle in 1..5) {
                stack.proxy.cut()
                until("drop $cycle") { bird.connectionState != ConnectionState.CONNECTED }
                repeat(cycle + 1) { publish(); missed.add(n.toLong()) }
                stack.proxy.reopen()
                until("the replay of drop $cycle") { seen.size >= n && bird.connectionState == ConnectionState.CONNECTED && order.state == RoomState.JOINED }
            }
            publish()
            until("a live event after the last replay") { seen.size >= n }

            assertEquals((1L..n.toLong()).toList(), seen.map { it.n }, "every event, in order, none twice")
            assertEquals((1L..n.toLong()).toList(), seen.map { it.id }, "ids one after another")
            assertEquals(missed, seen.filter { it.replayed }.map { it.n }, "exactly the missed events replayed")
            assertEquals(22, n, "1 live, 2+3+4+5+6 missed, 1 live")
            assertEquals(6, connections.size, "one connection, then one per drop: $connections")
            assertEquals(6, connections.toSet().size, "a new socket id each time")
            assertEquals(1, auth.requests.get(), "every rejoin used the kept token")
            assertEquals(emptyList<String>(), errors, "no gap told")
        }
    }

    @Test
    @Timeout(120)
    fun `a server restart - the client comes back, is told not_recovered with epoch_changed, and gets the events published after it`() {
        EndToEnd.requireBinaries("REALTIME_SERVER", "ROOM_BACKEND")
        Stack("order:{id},history=20").use { stack ->
            val auth = CountingAuth()
            val bird = stack.client(auth)
            connected(bird)
            val firstSocket = bird.connectionId
            val order = bird.join("order:9")
            val seen = recordUpdates(order)
            val errors = CopyOnWriteArrayList<JsonValue>()
            val joins = CopyOnWriteArrayList<JsonValue>()
            order.on("error") { data, _ -> errors.add(data) }
            order.on("joined") { data, _ -> joins.add(data) }
            order.ready(10_000)
            stack.publish("order:9", "updated", """{"n":1}""")
            stack.publish("order:9", "updated", """{"n":2}""")
            until("two live events") { seen.size == 2 }
            val before = order.position
            assertEquals(2L, before?.id)

            stack.restartServer()
            until("the gap told after the restart") { errors.isNotEmpty() }
            until("connected and joined again") { bird.connectionState == ConnectionState.CONNECTED && order.state == RoomState.JOINED }
            stack.publish("order:9", "updated", """{"n":3}""")
            stack.publish("order:9", "updated", """{"n":4}""")
            until("the events published after the restart") { seen.size >= 4 }

            assertEquals(listOf(1L, 2L, 3L, 4L), seen.map { it.n })
            assertEquals(listOf(1L, 2L, 1L, 2L), seen.map { it.id }, "the new server's stream starts again at 1")
            assertTrue(seen.none { it.replayed }, "nothing replayed: the history went with the old server")
            assertEquals(1, errors.size, "one gap told: $errors")
            assertEquals("not_recovered", errors[0]["code"]?.string)
            assertEquals("epoch_changed", errors[0]["reason"]?.string)
            assertEquals(2, joins.size)
            assertEquals(false, joins[1]["recovered"]?.bool)
            assertEquals("epoch_changed", joins[1]["reason"]?.string)
            val after = order.position
            assertNotEquals(before?.epoch, after?.epoch, "a new epoch")
            assertEquals(2L, after?.id)
            assertEquals("not_recovered", order.error?.code)
            assertEquals("epoch_changed", order.error?.reason)
            assertNotEquals(firstSocket, bird.connectionId)
            assertEquals(1, auth.requests.get(), "the token outlives the server: no auth request")
        }
    }

    @Test
    @Timeout(60)
    fun `4009 through the server's terminate API - FAILED, no retry for 2 s, then connect() connects and rejoins`() {
        EndToEnd.requireBinaries("REALTIME_SERVER", "ROOM_BACKEND")
        Stack("order:{id},history=20").use { stack ->
            val auth = CountingAuth()
            val bird = stack.client(auth)
            val codes = CopyOnWriteArrayList<Int?>()
            bird.onError { error -> codes.add(error.code) }
            connected(bird)
            val order = bird.join("order:3")
            order.ready(10_000)
            val terminated = bird.connectionId ?: fail<String>("no socket id")
            val attempts = stack.proxy.accepted.get()

            val (status, answer) = EndToEnd.signed(stack.server.port, "POST", "/apps/${EndToEnd.APP_ID}/connections/$terminated/terminate", "")
            assertEquals(200, status, answer)
            until("FAILED") { bird.connectionState == ConnectionState.FAILED }
            until("the 4009 told") { codes.contains(4009) }
            val waitingReady = assertThrows(RoomError::class.java) { order.ready(1_000) }
            assertEquals("disconnected", waitingReady.code)

            Thread.sleep(2_000)
            assertEquals(ConnectionState.FAILED, bird.connectionState, "still FAILED")
            assertEquals(attempts, stack.proxy.accepted.get(), "no attempt in 2 s")
            assertEquals(null, bird.connectionId)

            bird.connect()
            until("CONNECTED after connect()") { bird.connectionState == ConnectionState.CONNECTED }
            assertNotEquals(terminated, bird.connectionId)
            until("the room joined again") { order.state == RoomState.JOINED }
            assertEquals(attempts + 1, stack.proxy.accepted.get(), "one attempt: connect()'s")
            assertEquals(listOf<Int?>(4009), codes, "the 4009, and nothing else")
            assertEquals(1, auth.requests.get(), "the room's token is kept across FAILED")
        }
    }

    @Test
    @Timeout(60)
    fun `40 rooms joined at once - one auth request, and inbox of bob joined as ann fails alone with forbidden`() {
        EndToEnd.requireBinaries("REALTIME_SERVER", "ROOM_BACKEND")
        Stack("order:{id},history=20", "inbox:{user},owner=user").use { stack ->
            val auth = CountingAuth()
            val bird = stack.client(auth, user = "ann")
            connected(bird)
            val names = (1..38).map { "order:$it" } + "inbox:ann" + "inbox:bob"
            val started = System.nanoTime()
            val rooms = names.map { bird.join(it) }
            val joinMillis = (System.nanoTime() - started) / 1_000_000.0
            val refusals = CopyOnWriteArrayList<Pair<String, String?>>()
            for (room in rooms) room.on("error") { data, _ -> refusals.add(room.name to data["code"]?.string) }

            until("every room settled") { rooms.none { it.state == RoomState.JOINING } }
            assertEquals(1, auth.requests.get(), "one auth request for the 40 rooms (joined in $joinMillis ms)")
            val asked = JsonValue.parse(auth.bodies[0])["rooms"]?.array?.map { it.string }
            assertEquals(names, asked, "the request names every room, in join order")
            assertEquals(names.dropLast(1), rooms.filter { it.state == RoomState.JOINED }.map { it.name }, "39 joined")
            val inbox = bird.room("inbox:bob") ?: fail<Room>("inbox:bob")
            assertEquals(RoomState.FAILED, inbox.state)
            assertEquals("forbidden", inbox.error?.code)
            val thrown = assertThrows(RoomError::class.java) { inbox.ready(1_000) }
            assertEquals("forbidden", thrown.code)
            until("the refusal told") { refusals.isNotEmpty() }
            Thread.sleep(100)
            assertEquals(listOf<Pair<String, String?>>("inbox:bob" to "forbidden"), refusals, "only inbox:bob refused, told once")
            assertEquals(ConnectionState.CONNECTED, bird.connectionState)
            assertEquals(1, auth.requests.get(), "the refusal is final: nothing asked again")
        }
    }

    @Test
    @Timeout(60)
    fun `the Kotlin client and the Swift CLI in one presence room - each sees the other join, a Kotlin send reaches the CLI, the CLI's leave reaches Kotlin`() {
        EndToEnd.requireBinaries("REALTIME_SERVER", "ROOM_BACKEND", "REALTIME_CLI")
        Stack("chat:{id},history=20,presence,members-send").use { stack ->
            val auth = CountingAuth()
            val bird = stack.client(auth, user = "ann")
            connected(bird)
            val chat = bird.join("chat:1")
            val memberEvents = CopyOnWriteArrayList<String>()
            chat.on("join") { data, _ -> memberEvents.add("join ${data["id"]?.string} ${data["info"]?.get("name")?.string}") }
            chat.on("leave") { data, _ -> memberEvents.add("leave ${data["id"]?.string}") }
            val own = CopyOnWriteArrayList<Seen>()
            chat.on("said") { data, meta -> own.add(Seen(data["n"]?.long, meta.id, meta.replayed, meta.from)) }
            chat.ready(10_000)
            assertEquals(listOf("ann"), chat.members.map { it.id })

            val lines = CopyOnWriteArrayList<JsonValue>()
            val cli = ProcessBuilder(EndToEnd.binary("REALTIME_CLI"), "join", stack.directURL, "chat:1",
                "--auth-endpoint", stack.authEndpoint, "--header", "X-User: bob", "--json")
                .redirectError(ProcessBuilder.Redirect.DISCARD).start()
            try {
                Thread {
                    val reader = BufferedReader(InputStreamReader(cli.inputStream))
                    while (true) {
                        val line = try { reader.readLine() } catch (error: java.io.IOException) { null } ?: break
                        JsonValue.parseOrNull(line)?.let { lines.add(it) }
                    }
                }.apply { isDaemon = true }.start()
                fun cliSaw(kind: String, event: String) = lines.filter { it["kind"]?.string == kind && it["event"]?.string == event }

                until("the CLI joined") { cliSaw("room-state", "joined").isNotEmpty() }
                val cliMembers = cliSaw("room-state", "joined")[0]["data"]?.get("members")?.array?.map { it["id"]?.string }
                assertEquals(listOf("ann", "bob"), cliMembers, "the CLI's joined lists ann, who was there")
                until("Kotlin sees bob join") { memberEvents.contains("join bob bob") }
                until("bob among Kotlin's members") { chat.members.map { it.id } == listOf("ann", "bob") }

                chat.send("said", mapOf("n" to 7, "text" to "hello bob"))
                until("the CLI got ann's event") { cliSaw("room", "said").isNotEmpty() }
                val said = cliSaw("room", "said")[0]
                assertEquals(7L, said["data"]?.get("n")?.long)
                assertEquals("hello bob", said["data"]?.get("text")?.string)
                assertEquals("ann", said["meta"]?.get("from")?.string, "sent by ann, as the server vouches")
                assertEquals(false, said["meta"]?.get("replayed")?.bool)
                until("Kotlin's own event back") { own.size == 1 }
                assertEquals(Seen(7L, said["meta"]?.get("id")?.long ?: -1, false, "ann"), own[0])

                // SIGTERM: the CLI disconnects and exits 0. Through its handle: Process.destroy()
                // also closes the pipe, and the CLI's last line would be lost.
                assertTrue(cli.toHandle().destroy(), "SIGTERM sent")
                assertTrue(cli.waitFor(10, TimeUnit.SECONDS), "the CLI ended on SIGTERM")
                assertEquals(0, cli.exitValue())
                until("Kotlin sees bob leave") { memberEvents.contains("leave bob") }
                assertEquals(listOf("join bob bob", "leave bob"), memberEvents)
                assertEquals(listOf("ann"), chat.members.map { it.id })
                until("the CLI's last line: disconnected") { lines.any { it["kind"]?.string == "state" && it["current"]?.string == "disconnected" } }
            } finally {
                cli.destroyForcibly()
                cli.waitFor(5, TimeUnit.SECONDS)
            }
        }
    }
}
