package com.bird.realtime

import java.net.URLEncoder
import java.util.concurrent.Executor

/**
 * How the client connects (seed: `BirdRealtime(BirdRealtimeOptions(appKey = "your-app-key",
 * region = "us1"))`). Durations in milliseconds.
 *
 * A self-hosted server: `BirdRealtimeOptions(appKey, host = "10.0.2.2", port = 6001)` (plain
 * `ws://` unless `useTLS = true`), or a full `url`.
 *
 * Handlers run on [executor]. On Android the default is the main looper; to pass it yourself
 * (or another context): `executor = ContextCompat.getMainExecutor(context)` (AndroidX), or
 * `context.mainExecutor` (API 28+), or `Executor { Handler(Looper.getMainLooper()).post(it) }`.
 * On the JVM the default is one shared daemon thread ([HandlerExecutors.background]). Whatever
 * the executor, handlers run one at a time in arrival order (an executor with several threads
 * included): the client queues deliveries and hands the executor one task at a time.
 */
data class BirdRealtimeOptions(
    /** The app's public key (the path `/app/{key}`). */
    val appKey: String,
    /** A hosted region (`us1`): the host is `ws-{region}.realtime.bird.com`, over TLS. */
    val region: String? = null,
    /** A self-hosted server's host (`127.0.0.1`, `realtime.example.com`); it wins over [region]. */
    val host: String? = null,
    /** The server's port (the scheme's default when `null`). */
    val port: Int? = null,
    /** `wss://` (default: true with a [region], false with a [host]). */
    val useTLS: Boolean? = null,
    /** A full endpoint (`ws://127.0.0.1:6001/app/app-key?namespace=bird&protocol=7`), used as it is. */
    val url: String? = null,
    /** The protocol namespace (`bird`; `pusher` for Pusher-compatible servers). */
    val namespace: String = BirdProtocol.NAMESPACE,
    /** Where private and presence channels are authorised (one form POST of `socket_id`, `channel_name` per channel). */
    val authEndpoint: String? = null,
    /** Where `signin()` authenticates the user (a form POST of `socket_id`, answered `{auth, user_data}`). */
    val userAuthEndpoint: String? = null,
    /** Where room tokens are asked for (one JSON POST of `{"rooms": […]}` per moment; docs/rooms-protocol.md "Auth route"). */
    val roomAuthEndpoint: String? = null,
    /** Headers of every auth request (rooms seed: "with the headers your RealtimeOptions give"): a bearer token, a session. */
    val authHeaders: Map<String, String> = emptyMap(),
    /** The backend's `config()`: public rooms join with these grants, with no auth request. */
    val grants: RoomGrants? = null,
    /** Where handlers run, one event after another in arrival order (see the class comment). */
    val executor: Executor = HandlerExecutors.default,
    /** Silence before a ping when the handshake gives no `activity_timeout` (120 s, seed). */
    val activityTimeoutMillis: Long = 120_000,
    /** Wait for any frame after a ping before the socket is closed with 4201 (30 s, seed). */
    val pongTimeoutMillis: Long = 30_000,
    /** The pong deadline when the network changes or is lost, or the process resumes (1 s). */
    val verifyPongTimeoutMillis: Long = 1_000,
    /** An attempt with no handshake after this is given up and retried (30 s). */
    val connectTimeoutMillis: Long = 30_000,
    /** An auth request, signin, room join or history request (10 s). */
    val authTimeoutMillis: Long = 10_000,
    /** Bytes queued on the socket before it is dropped as stuck and retried (1 MiB). */
    val maxQueuedBytes: Long = 1L shl 20,
    /**
     * Deliveries handed to [executor] and not yet run before the client stops reading the socket
     * until they drain (10,000): a slow handler slows the socket, never memory without bound.
     */
    val maxDeliveryBacklog: Int = 10_000
) {
    /** The endpoint the client opens: `ws(s)://host[:port]/app/{key}?namespace=…&client=kotlin&protocol=7`. */
    val endpointURL: String
        get() {
            url?.let { return it }
            val region = region ?: ""
            val named = host ?: if (REGION.matches(region)) HOST_TEMPLATE.replace("{region}", region) else "invalid-region.invalid"
            val tls = useTLS ?: (host == null)
            val bracketed = if (named.contains(':') && !named.startsWith("[")) "[$named]" else named
            val portPart = if (port != null) ":$port" else ""
            val key = URLEncoder.encode(appKey, "UTF-8").replace("+", "%20")
            return "${if (tls) "wss" else "ws"}://$bracketed$portPart/app/$key?namespace=$namespace&client=kotlin&protocol=${BirdProtocol.VERSION}"
        }

    /** The hosted regions' host. */
    companion object {
        /** The host template of hosted regions. */
        const val HOST_TEMPLATE: String = "ws-{region}.realtime.bird.com"
        private val REGION = Regex("^[A-Za-z0-9-]{1,63}$")
    }
}
