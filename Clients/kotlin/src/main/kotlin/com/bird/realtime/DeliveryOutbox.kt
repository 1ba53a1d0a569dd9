package com.bird.realtime

import java.util.ArrayDeque
import java.util.concurrent.Executor
import java.util.concurrent.RejectedExecutionException

/**
 * Hands deliveries to the app's executor as a serial queue on it: deliveries wait here in
 * arrival order, and one drain task at a time (queued or running) runs them, at most [batch]
 * before it hands the rest to a new task. So an executor with several threads still runs them
 * one after another, in order; a burst costs one task per [batch] events instead of one each;
 * and a busy room never keeps Android's main looper from its other work for more than a batch.
 *
 * It counts deliveries not yet run: past [maxBacklog] the socket's reader waits (TCP pushes back
 * on the server) instead of memory growing without bound behind a slow handler. Only the reader
 * waits: timers, app calls and auth answers never do.
 *
 * An executor that runs tasks at once on the caller's thread ([HandlerExecutors.DIRECT]) is
 * served without recursion: a drain started inside a drain on the same thread is left to the
 * outer one, so a long backlog never deepens the stack.
 */
internal class DeliveryOutbox(private val executor: Executor, private val maxBacklog: Int, private val batch: Int = 64) {
    private val lock = Object()
    private val queue = ArrayDeque<() -> Unit>()
    /** Deliveries queued or running. */
    private var backlog = 0
    /** A drain task is queued on the executor or running. */
    private var draining = false

    /** Whether this thread is inside [drain], and whether a nested drain asked it to go on. */
    private class Here {
        var active = false
        var again = false
    }

    private val here = object : ThreadLocal<Here>() {
        override fun initialValue() = Here()
    }

    /** Deliveries handed to the outbox and not yet run. */
    val pending: Int get() = synchronized(lock) { backlog }

    /**
     * Queues [task] to run on the executor after every task posted before it.
     *
     * @return false when the executor refused the drain (shut down): nothing queued runs, and it
     *   is counted out.
     */
    fun post(task: () -> Unit): Boolean {
        synchronized(lock) {
            queue.addLast(task)
            backlog += 1
            if (draining) return true
            draining = true
        }
        return schedule()
    }

    private fun schedule(): Boolean = try {
        executor.execute { drain() }
        true
    } catch (error: RejectedExecutionException) {
        synchronized(lock) {
            backlog -= queue.size
            queue.clear()
            draining = false
            lock.notifyAll()
        }
        false
    }

    private fun drain() {
        val state = here.get()
        if (state.active) {
            state.again = true // an executor that runs at once: the drain below this frame goes on
            return
        }
        state.active = true
        var thrown: Throwable? = null
        try {
            do {
                state.again = false
                runBatch()
            } while (state.again)
        } catch (error: Throwable) {
            thrown = error
        } finally {
            state.active = false
        }
        if (thrown != null) {
            // A task threw (the client's tasks catch the app's errors: this is a bug or an
            // Error): the rest still runs, in a new drain, and the executor sees the throw.
            schedule()
            throw thrown
        }
    }

    /** Runs up to [batch] deliveries; with more left, schedules the next drain. */
    private fun runBatch() {
        var ran = 0
        while (true) {
            val task = synchronized(lock) {
                if (queue.isEmpty()) {
                    draining = false
                    return
                }
                if (ran == batch) null else queue.pollFirst()
            } ?: break
            try {
                task()
            } finally {
                synchronized(lock) {
                    backlog -= 1
                    if (backlog == maxBacklog - 1) lock.notifyAll() // it was at the bound: a reader may wait
                }
                ran += 1
            }
        }
        schedule()
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
