package com.bird.realtime

import okhttp3.Call
import okhttp3.Callback
import okhttp3.HttpUrl
import okhttp3.MediaType
import okhttp3.OkHttpClient
import okhttp3.Request
import okhttp3.RequestBody
import okhttp3.Response
import java.io.IOException

/** How an HTTP POST ended: an answer (any status), or no answer. */
sealed class HttpOutcome {
    /** The server answered [status] with [body] (at most [AuthHttpClient.MAX_ANSWER_SIZE] + 1 bytes read). */
    data class Answered(
        /** The HTTP status. */
        val status: Int,
        /** The answer's text (UTF-8). */
        val body: String
    ) : HttpOutcome()

    /** No answer: the endpoint cannot be reached, or the request failed. */
    data class Failed(
        /** What happened. */
        val message: String
    ) : HttpOutcome()
}

/**
 * POSTs to the app's auth endpoints (channel authorisation, user authentication, room tokens).
 * Implemented with OkHttp by [OkHttpAuthClient]; tests use a fake.
 */
interface AuthHttpClient {
    /**
     * POSTs [body] to [url] with [headers] and `Content-Type: [contentType]`, and calls
     * [callback] once, on any thread, unless cancelled first.
     *
     * @param url the endpoint.
     * @param headers the options' `authHeaders`, plus `Accept: application/json`.
     * @param contentType `application/x-www-form-urlencoded` or `application/json`.
     * @param body the body.
     * @param callback told how it ended.
     * @return the request, to cancel it.
     */
    fun post(url: String, headers: Map<String, String>, contentType: String, body: String, callback: (HttpOutcome) -> Unit): Cancellable

    /** The answer size the client reads. */
    companion object {
        /** The longest answer read (1 MiB): a room answer for 100 rooms is a few tens of KiB. */
        const val MAX_ANSWER_SIZE: Long = 1L shl 20
    }
}

/**
 * [AuthHttpClient] on OkHttp: asynchronous calls on OkHttp's dispatcher, answers read up to
 * [AuthHttpClient.MAX_ANSWER_SIZE] + 1 bytes.
 */
class OkHttpAuthClient @JvmOverloads constructor(
    /** The OkHttp client requests are made with. */
    val client: OkHttpClient = RealtimeEnvironment.sharedOkHttpClient
) : AuthHttpClient {
    override fun post(url: String, headers: Map<String, String>, contentType: String, body: String, callback: (HttpOutcome) -> Unit): Cancellable {
        val parsed = HttpUrl.parse(url)
        if (parsed == null) {
            callback(HttpOutcome.Failed("not an http(s) URL: ${url.take(200)}"))
            return NOTHING
        }
        val builder = Request.Builder().url(parsed).post(RequestBody.create(MediaType.parse(contentType), body))
        try {
            for ((name, value) in headers) builder.header(name, value)
        } catch (error: IllegalArgumentException) {
            callback(HttpOutcome.Failed("an auth header OkHttp refuses: ${error.message}"))
            return NOTHING
        }
        val call = client.newCall(builder.build())
        call.enqueue(object : Callback {
            override fun onFailure(call: Call, e: IOException) {
                callback(HttpOutcome.Failed("${e.javaClass.simpleName}: ${e.message ?: "no message"}"))
            }

            override fun onResponse(call: Call, response: Response) {
                val outcome = try {
                    HttpOutcome.Answered(response.code(), response.peekBody(AuthHttpClient.MAX_ANSWER_SIZE + 1).string())
                } catch (error: IOException) {
                    HttpOutcome.Failed("${error.javaClass.simpleName}: ${error.message ?: "no message"}")
                } finally {
                    response.close()
                }
                callback(outcome)
            }
        })
        return object : Cancellable {
            override fun cancel() = call.cancel()
        }
    }

    private companion object {
        val NOTHING = object : Cancellable {
            override fun cancel() {}
        }
    }
}
