package com.bird.realtime

import java.util.concurrent.Executor
import java.util.concurrent.RejectedExecutionException

/**
 * Hands deliveries to the app's executor, one task per event, in order, and counts those not
 * yet run: past [maxBacklog] the socket's reader waits (TCP pushes back on the server) instead
 * of memory growing without bound behind a slow handler. Only the reader waits: timers, app
 * calls and auth answers never do.
 */
internal class DeliveryOutbox(private val executor: Executor, private val maxBacklog: Int) {
    private val lock = Object()
    private var backlog = 0

    /** Deliveries handed to the executor and not yet run. */
    val pending: Int get() = synchronized(lock) { backlog }

    /**
     * Runs [task] on the executor.
     *
     * @return false when the executor refused it (shut down): nothing ran.
     */
    fun post(task: () -> Unit): Boolean {
        synchronized(lock) { backlog += 1 }
        return try {
            executor.execute {
                try {
                    task()
                } finally {
                    done()
                }
            }
            true
        } catch (error: RejectedExecutionException) {
            done()
            false
        }
    }

    private fun done() {
        synchronized(lock) {
            backlog -= 1
            if (backlog < maxBacklog) lock.notifyAll()
        }
    }

    /** Waits while the backlog is at its bound and [stillWanted] holds (checked every 50 ms). */
    fun awaitRoom(stillWanted: () -> Boolean) {
        synchronized(lock) {
            while (backlog >= maxBacklog && stillWanted()) {
                try {
                    lock.wait(50)
                } catch (error: InterruptedException) {
                    Thread.currentThread().interrupt()
                    return
                }
            }
        }
    }
}
