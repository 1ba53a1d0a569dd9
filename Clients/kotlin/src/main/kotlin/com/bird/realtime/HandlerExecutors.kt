package com.bird.realtime

import java.util.concurrent.Executor
import java.util.concurrent.Executors
import java.util.concurrent.ThreadFactory

/**
 * Where handlers run by default (realtime-connection-lifecycle seed: "handlers run on Android's
 * main looper when available; pass an Executor for another context").
 */
object HandlerExecutors {
    /**
     * Android's main looper when the process has one (found by reflection, so the library needs
     * no Android dependency), else [background].
     */
    @JvmStatic
    val default: Executor by lazy { androidMainLooper() ?: background }

    /** [background]'s executor, made on first use (an Android app that never uses it starts no thread). */
    private val backgroundThread = lazy {
        Executors.newSingleThreadExecutor(ThreadFactory { task -> Thread(task, "bird-realtime-handlers").apply { isDaemon = true } })
    }

    /** One shared daemon thread, `bird-realtime-handlers`: handlers run there one at a time, in order. */
    @JvmStatic
    val background: Executor by backgroundThread

    /**
     * Whether [executor] is [background], asked without making it. That thread is the client's
     * own, so a drain of deliveries may linger there for the next one (`DeliveryOutbox`): no
     * looper or app work of its own waits behind it (another client's drain sharing it waits
     * at most that linger).
     */
    internal fun isBackground(executor: Executor): Boolean = backgroundThread.isInitialized() && executor === backgroundThread.value

    /**
     * Runs handlers at once on the thread that delivers the event (tests; an app that posts
     * itself). Still one at a time, in order: an event delivered while another thread runs
     * handlers waits for that thread, which runs it next.
     */
    @JvmField
    val DIRECT: Executor = Executor { it.run() }

    private fun androidMainLooper(): Executor? = try {
        val looperClass = Class.forName("android.os.Looper")
        val looper = looperClass.getMethod("getMainLooper").invoke(null)
        if (looper == null) null else {
            val handlerClass = Class.forName("android.os.Handler")
            val handler = handlerClass.getConstructor(looperClass).newInstance(looper)
            val post = handlerClass.getMethod("post", Runnable::class.java)
            Executor { task -> post.invoke(handler, task) }
        }
    } catch (error: ReflectiveOperationException) {
        null
    } catch (error: LinkageError) {
        null
    } catch (error: RuntimeException) {
        null
    }
}
