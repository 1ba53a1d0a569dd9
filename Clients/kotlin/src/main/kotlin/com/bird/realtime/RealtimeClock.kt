package com.bird.realtime

import java.util.concurrent.ScheduledThreadPoolExecutor
import java.util.concurrent.ThreadFactory
import java.util.concurrent.TimeUnit

/**
 * Time and timers, injected so tests move time by hand (STYLE.md: "the machine returns
 * deadlines instead of sleeping; tests use a deterministic manual clock"). Instants in
 * milliseconds.
 */
interface RealtimeClock {
    /**
     * The current instant, in milliseconds. It should advance while the device sleeps (the wall
     * clock), so a timer that fires late is seen as late and the connection verified at once.
     */
    fun now(): Long

    /**
     * Runs [task] once, [delayMillis] milliseconds from now, on any thread.
     *
     * @param delayMillis the delay, in milliseconds (0 or less: as soon as possible).
     * @param task what to run.
     * @return the timer, to cancel it.
     */
    fun schedule(delayMillis: Long, task: () -> Unit): Cancellable

    /** The system's clock. */
    companion object {
        /**
         * The wall clock (`System.currentTimeMillis()`) and one shared daemon timer thread
         * (`bird-realtime-timers`); tasks run on it, so they only hand events to the client.
         */
        @JvmField val SYSTEM: RealtimeClock = SystemClock
    }
}

private object SystemClock : RealtimeClock {
    private val executor: ScheduledThreadPoolExecutor by lazy {
        val threads = ThreadFactory { task -> Thread(task, "bird-realtime-timers").apply { isDaemon = true } }
        ScheduledThreadPoolExecutor(1, threads).apply { removeOnCancelPolicy = true }
    }

    override fun now(): Long = System.currentTimeMillis()

    override fun schedule(delayMillis: Long, task: () -> Unit): Cancellable {
        val future = executor.schedule({ task() }, Math.max(0L, delayMillis), TimeUnit.MILLISECONDS)
        return object : Cancellable {
            override fun cancel() {
                future.cancel(false)
            }
        }
    }
}
