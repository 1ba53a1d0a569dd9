package com.bird.realtime

import okhttp3.OkHttpClient
import okhttp3.Request
import okhttp3.Response
import okhttp3.WebSocket
import okhttp3.WebSocketListener
import okio.ByteString
import java.util.concurrent.atomic.AtomicBoolean

/**
 * Opens sockets with OkHttp's WebSocket (OkHttp 3.13, the WebSocket client Android apps use).
 *
 * @property client the OkHttp client (its dispatcher, TLS and proxy settings); the default is
 *   shared by every client made without one.
 */
class OkHttpTransportFactory @JvmOverloads constructor(
    /** The OkHttp client sockets are opened with. */
    val client: OkHttpClient = RealtimeEnvironment.sharedOkHttpClient
) : TransportFactory {
    override fun open(url: String, listener: TransportListener): Transport {
        val request = try {
            Request.Builder().url(url).build()
        } catch (error: IllegalArgumentException) {
            listener.onFailure("not a WebSocket URL: ${url.take(200)}")
            return ClosedTransport
        }
        val ended = AtomicBoolean(false)
        val socket = client.newWebSocket(request, object : WebSocketListener() {
            override fun onMessage(webSocket: WebSocket, text: String) {
                if (!ended.get()) listener.onText(text)
            }

            override fun onMessage(webSocket: WebSocket, bytes: ByteString) {
                if (!ended.get()) listener.onBinary(bytes.size())
            }

            override fun onClosing(webSocket: WebSocket, code: Int, reason: String) {
                // The server's close frame: answered (OkHttp leaves that to the app), reported now.
                webSocket.close(CloseCode.NORMAL_CLOSURE.rawValue, null)
                if (ended.compareAndSet(false, true)) listener.onClosed(code, reason)
            }

            override fun onClosed(webSocket: WebSocket, code: Int, reason: String) {
                if (ended.compareAndSet(false, true)) listener.onClosed(code, reason)
            }

            override fun onFailure(webSocket: WebSocket, t: Throwable, response: Response?) {
                if (!ended.compareAndSet(false, true)) return
                val status = if (response != null) " (HTTP ${response.code()})" else ""
                listener.onFailure("${t.javaClass.simpleName}: ${t.message ?: "no message"}$status")
            }
        })
        return OkHttpTransport(socket, ended)
    }
}

private class OkHttpTransport(private val socket: WebSocket, private val ended: AtomicBoolean) : Transport {
    override fun send(text: String): Boolean = socket.send(text)

    override val queuedBytes: Long get() = socket.queueSize()

    override fun close(code: Int?, reason: String?) {
        ended.set(true)
        if (code == null) {
            socket.cancel()
            return
        }
        try {
            if (!socket.close(code, reason?.take(100))) socket.cancel()
        } catch (error: IllegalArgumentException) {
            // A code OkHttp will not send (RFC 6455 §7.4.2 reserved): the socket goes anyway.
            socket.cancel()
        }
    }
}

private object ClosedTransport : Transport {
    override fun send(text: String): Boolean = false
    override val queuedBytes: Long get() = 0
    override fun close(code: Int?, reason: String?) {}
}
