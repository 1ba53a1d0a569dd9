package com.bird.realtime

// Signin on the connection machine (realtime-connection-lifecycle seed, "What happens to your
// channels": after `signin()` the client signs in on every new connection and reports later
// failures through `signin_error`; DESIGN.md "Signin": POST `socket_id` to the user
// authentication endpoint, then `bird:signin`; success `bird:signin_success`, refusal
// `bird:error` 4009).

/** The user authentication's answer (`{auth, user_data}`), or why there is none. */
internal sealed class UserAuthResult {
    data class Answered(val auth: String?, val userData: String?) : UserAuthResult()
    data class Failed(val failure: AuthFailure) : UserAuthResult()
}

internal class SigninMachine(private val connection: ConnectionMachine) {
    private sealed class Stage {
        data class Authenticating(val request: Long) : Stage()
        data class AwaitingServer(val request: Long) : Stage()
        data class SignedIn(val userData: String) : Stage()
    }

    /** `signin()` was called: sign in on every connection. */
    var requested = false
        private set
    private var current: Stage? = null

    /** The user data the server accepted on this connection. */
    val userData: String? get() = (current as? Stage.SignedIn)?.userData

    /** `signin()`: now if connected and not signed in, and on every later connection. */
    fun request(now: Long): List<Action> {
        requested = true
        if (connection.socketId == null || current != null) return emptyList()
        return start(now)
    }

    /** The handshake: a signin when one was asked for. */
    fun connected(now: Long): List<Action> = if (requested) start(now) else emptyList()

    /** The socket ended: the signin in flight is dropped. */
    fun disconnected(): List<Action> {
        val stage = current
        current = null
        val request = when (stage) {
            is Stage.Authenticating -> stage.request
            is Stage.AwaitingServer -> stage.request
            else -> return emptyList()
        }
        return listOf(Action.Cancel(TimerKey(TimerKind.SIGNIN, request = request)), Action.CancelRequest(request))
    }

    private fun start(now: Long): List<Action> {
        val socketId = connection.socketId ?: return emptyList()
        val request = connection.nextRequest()
        current = Stage.Authenticating(request)
        return listOf(
            Action.Schedule(TimerKey(TimerKind.SIGNIN, request = request), now + connection.config.authTimeout),
            Action.Authenticate(socketId, request)
        )
    }

    /**
     * The user authentication answered: `bird:signin` is sent (the server's answer gets the
     * same deadline), or the failure reported.
     */
    fun authenticated(request: Long, result: UserAuthResult, now: Long): List<Action> {
        val stage = current as? Stage.Authenticating ?: return emptyList()
        if (stage.request != request) return emptyList()
        val answered = when (result) {
            is UserAuthResult.Failed -> return failed(request, result.failure)
            is UserAuthResult.Answered -> result
        }
        val auth = answered.auth
        val userData = answered.userData
        if (auth == null || userData == null) {
            return failed(request, AuthFailure(AuthFailure.Kind.INVALID, null, "the user authentication's answer is not {auth, user_data}"))
        }
        current = Stage.AwaitingServer(request)
        val payload = LinkedHashMap<String, JsonValue>()
        payload["auth"] = JsonString(auth)
        payload["user_data"] = JsonString(userData)
        return listOf<Action>(Action.Schedule(TimerKey(TimerKind.SIGNIN, request = request), now + connection.config.authTimeout)) +
            connection.sendProtocol("signin", JsonObject(payload))
    }

    /** The signin [request] failed (or timed out). */
    fun failed(request: Long?, failure: AuthFailure): List<Action> {
        val pending = when (val stage = current) {
            is Stage.Authenticating -> stage.request
            is Stage.AwaitingServer -> stage.request
            else -> return emptyList()
        }
        if (pending != request) return emptyList()
        current = null
        return listOf(Action.Cancel(TimerKey(TimerKind.SIGNIN, request = request)), Action.CancelRequest(request), Action.SigninError(failure))
    }

    /** `bird:signin_success`'s data: `{user_data}`. */
    fun succeeded(data: String?): List<Action> {
        val stage = current as? Stage.AwaitingServer ?: return connection.protocolError("signin_success without a signin, ignored")
        current = Stage.SignedIn(Frame.parseObject(data)?.get("user_data")?.string ?: data ?: "")
        return listOf(Action.Cancel(TimerKey(TimerKind.SIGNIN, request = stage.request)))
    }

    /**
     * `bird:error` 4009 while the server's answer to a signin is awaited is that answer.
     *
     * @return the actions, or `null` when the error is not the signin's.
     */
    fun refused(data: String?): List<Action>? {
        val stage = current as? Stage.AwaitingServer ?: return null
        val payload = Frame.parseObject(data)
        if (payload?.get("code")?.int != CloseCode.UNAUTHORIZED.rawValue) return null
        val message = payload["message"]?.string ?: ""
        return failed(stage.request, AuthFailure(AuthFailure.Kind.REFUSED, null, "the server refused the signin: $message"))
    }
}
