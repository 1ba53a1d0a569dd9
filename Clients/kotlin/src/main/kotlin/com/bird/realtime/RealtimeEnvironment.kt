package com.bird.realtime

import okhttp3.Dispatcher
import okhttp3.OkHttpClient
import java.security.SecureRandom
import java.util.concurrent.SynchronousQueue
import java.util.concurrent.ThreadPoolExecutor
import java.util.concurrent.TimeUnit

/**
 * Everything the client uses from the outside world, injectable (STYLE.md: seams with fakes):
 * sockets, auth requests, time and timers, the backoff's random source, the network monitor.
 */
class RealtimeEnvironment(
    /** Opens WebSockets. */
    val transport: TransportFactory,
    /** POSTs to the auth endpoints. */
    val http: AuthHttpClient,
    /** Time and timers. */
    val clock: RealtimeClock,
    /** Numbers in [0, 1) for the backoff's full jitter. */
    val random: () -> Double,
    /** Tells the client when the network returns, changes or goes. */
    val networkMonitor: NetworkMonitor
) {
    /** The defaults. */
    companion object {
        /**
         * The OkHttp client the defaults share: 10 s to connect, 30 s to read an auth answer;
         * WebSockets clear the read timeout once open (the client's own stale check watches them).
         * Its dispatcher's threads are daemons, so a program that has closed its clients exits at
         * once (OkHttp's own are not, and kept the JVM up for their 60 s keep-alive).
         */
        @JvmStatic
        val sharedOkHttpClient: OkHttpClient by lazy {
            val executor = ThreadPoolExecutor(0, Int.MAX_VALUE, 60, TimeUnit.SECONDS, SynchronousQueue<Runnable>()) { task ->
                Thread(task, "bird-realtime OkHttp").apply { isDaemon = true }
            }
            OkHttpClient.Builder()
                .dispatcher(Dispatcher(executor))
                .connectTimeout(10, TimeUnit.SECONDS)
                .readTimeout(30, TimeUnit.SECONDS)
                .writeTimeout(30, TimeUnit.SECONDS)
                .build()
        }

        private val secureRandom: SecureRandom by lazy { SecureRandom() }

        /**
         * The real world: OkHttp for sockets and auth requests, the wall clock with a shared
         * timer thread, `SecureRandom`.
         *
         * @param networkMonitor the network monitor ([NetworkMonitor.NONE]; on Android, the
         *   README's `ConnectivityManager` adapter).
         * @param okHttpClient the OkHttp client (shared by default).
         * @return the environment.
         */
        @JvmStatic
        @JvmOverloads
        fun system(networkMonitor: NetworkMonitor = NetworkMonitor.NONE, okHttpClient: OkHttpClient = sharedOkHttpClient): RealtimeEnvironment =
            RealtimeEnvironment(
                OkHttpTransportFactory(okHttpClient), OkHttpAuthClient(okHttpClient), RealtimeClock.SYSTEM,
                { secureRandom.nextDouble() }, networkMonitor
            )
    }
}
