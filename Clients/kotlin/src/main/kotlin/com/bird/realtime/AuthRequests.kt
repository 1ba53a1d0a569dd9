package com.bird.realtime

import java.net.URLEncoder

// The app's auth endpoints (DESIGN.md "The wire protocol"; docs/rooms-protocol.md "Auth route";
// the browser client's auth.js):
// - channels: one form POST of `socket_id` and `channel_name` per channel, as Pusher does, so the
//   app's existing Pusher-style endpoint answers unchanged (`{auth, channel_data?}`);
// - signin: a form POST of `socket_id` (`{auth, user_data}`);
// - rooms: one JSON POST of `{"rooms": [names]}` for every room joined in the same moment.

internal class AuthRequests(private val options: BirdRealtimeOptions, private val http: AuthHttpClient) {
    private fun headers(): Map<String, String> = options.authHeaders + ("Accept" to "application/json")

    private fun form(fields: List<Pair<String, String>>): String =
        fields.joinToString("&") { "${URLEncoder.encode(it.first, "UTF-8")}=${URLEncoder.encode(it.second, "UTF-8")}" }

    /** POSTs and reads a JSON object answer, or the failure. */
    private fun post(url: String, contentType: String, body: String, done: (JsonObject?, AuthFailure?) -> Unit): Cancellable =
        http.post(url, headers(), contentType, body) { outcome ->
            when (outcome) {
                is HttpOutcome.Failed -> done(null, AuthFailure(AuthFailure.Kind.TRANSPORT, null, "the auth endpoint cannot be reached: ${outcome.message}"))
                is HttpOutcome.Answered -> {
                    val text = outcome.body
                    when {
                        outcome.status !in 200..299 ->
                            done(null, AuthFailure(AuthFailure.Kind.HTTP, outcome.status, "the auth endpoint answered ${outcome.status}: ${text.take(200)}"))
                        text.length > AuthHttpClient.MAX_ANSWER_SIZE ->
                            done(null, AuthFailure(AuthFailure.Kind.INVALID, null, "an answer longer than ${AuthHttpClient.MAX_ANSWER_SIZE} bytes"))
                        else -> {
                            val value = JsonValue.parseOrNull(text) as? JsonObject
                            if (value == null) done(null, AuthFailure(AuthFailure.Kind.INVALID, null, "the answer is not a JSON object: ${text.take(200)}"))
                            else done(value, null)
                        }
                    }
                }
            }
        }

    private fun notConfigured(what: String): AuthFailure = AuthFailure(AuthFailure.Kind.NOT_CONFIGURED, null, "no $what is configured")

    /** Authorises one channel subscription for a socket id (the signature covers it). */
    fun authorizeChannel(socketId: String, channel: String, done: (ChannelAuthResult) -> Unit): Cancellable? {
        val endpoint = options.authEndpoint
        if (endpoint == null) {
            done(ChannelAuthResult.Failed(notConfigured("authEndpoint")))
            return null
        }
        return post(endpoint, FORM, form(listOf("socket_id" to socketId, "channel_name" to channel))) { value, failure ->
            if (value == null) done(ChannelAuthResult.Failed(failure!!))
            else done(ChannelAuthResult.Answered(value["auth"]?.string, value["channel_data"]?.string))
        }
    }

    /** Authenticates the user for `signin()` on a socket id. */
    fun authenticateUser(socketId: String, done: (UserAuthResult) -> Unit): Cancellable? {
        val endpoint = options.userAuthEndpoint
        if (endpoint == null) {
            done(UserAuthResult.Failed(notConfigured("userAuthEndpoint")))
            return null
        }
        return post(endpoint, FORM, form(listOf("socket_id" to socketId))) { value, failure ->
            if (value == null) done(UserAuthResult.Failed(failure!!))
            else done(UserAuthResult.Answered(value["auth"]?.string, value["user_data"]?.string))
        }
    }

    /** Asks the room auth route for every room of a batch (at most 100). */
    fun authorizeRooms(rooms: List<String>, done: (RoomAuthResult) -> Unit): Cancellable? {
        val endpoint = options.roomAuthEndpoint
        if (endpoint == null) {
            done(RoomAuthResult.Failed(notConfigured("roomAuthEndpoint")))
            return null
        }
        val body = JsonObject(mapOf("rooms" to JsonArray(rooms.map { JsonString(it) }))).toString()
        return post(endpoint, JSON, body) { value, failure ->
            when {
                value == null -> done(RoomAuthResult.Failed(failure!!))
                value["rooms"] !is JsonObject -> done(RoomAuthResult.Failed(AuthFailure(AuthFailure.Kind.INVALID, null, "the answer is not {time, rooms}")))
                else -> done(RoomAuthResult.Answered(value))
            }
        }
    }

    companion object {
        const val FORM = "application/x-www-form-urlencoded"
        const val JSON = "application/json"
    }
}
