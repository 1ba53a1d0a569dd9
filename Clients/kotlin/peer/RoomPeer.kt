package com.bird.realtime.peer

// A peer for interop tests: the Kotlin client in one room, speaking the line protocol of the
// browser client's peers (Tests/peers/js_room_peer.mjs in Node, browser_room_peer.py in
// Chromium). It prints one JSON line per thing it sees and takes commands on stdin, one a line:
//   send EVENT JSON   room.send(EVENT, the parsed JSON)
//   leave             room.leave()
//   quit              bird.disconnect(), then exit 0
// Built by `./build.sh peer`; usage: RoomPeerKt PORT APP_KEY AUTH_URL USER ROOM

import com.bird.realtime.BirdRealtime
import com.bird.realtime.BirdRealtimeOptions
import com.bird.realtime.JsonValue
import com.bird.realtime.RoomError
import kotlin.system.exitProcess

private val out = Object()

private fun print(vararg fields: Pair<String, Any?>) {
    val line = JsonValue.from(linkedMapOf(*fields)).toString()
    synchronized(out) {
        println(line)
        System.out.flush()
    }
}

fun main(args: Array<String>) {
    if (args.size != 5) {
        System.err.println("usage: RoomPeerKt PORT APP_KEY AUTH_URL USER ROOM")
        exitProcess(64)
    }
    val (port, appKey, authURL, user, name) = args
    val bird = BirdRealtime(BirdRealtimeOptions(appKey = appKey, host = "127.0.0.1", port = port.toInt(),
        roomAuthEndpoint = authURL, authHeaders = mapOf("X-User" to user)))
    bird.onError { error -> print("error" to mapOf("code" to error.code, "message" to error.message)) }
    val room = bird.join(name)
    room.onAny { event, data, meta ->
        print("event" to event, "data" to data, "from" to meta.from, "id" to meta.id, "replayed" to meta.replayed)
    }
    room.ready { error ->
        if (error == null) print("ready" to true, "members" to room.members.map { it.id }.sorted())
        else print("failed" to error.code)
    }
    bird.connect()
    lines@ while (true) {
        val line = readLine() ?: break
        val parts = line.split(" ", limit = 3)
        when (parts[0]) {
            "send" -> try {
                room.send(parts[1], JsonValue.parse(parts.getOrElse(2) { "null" }))
                print("sent" to parts[1])
            } catch (error: RoomError) {
                print("sendFailed" to error.code)
            } catch (error: Exception) {
                print("sendFailed" to error.toString())
            }
            "leave" -> {
                room.leave()
                print("left" to name)
            }
            "quit" -> break@lines
        }
    }
    bird.disconnect()
    exitProcess(0)
}
