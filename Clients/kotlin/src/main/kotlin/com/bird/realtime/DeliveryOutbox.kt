package com.bird.realtime

import java.util.ArrayDeque
import java.util.concurrent.Executor
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.atomic.AtomicInteger

/**
 * Hands deliveries to the app's executor as a serial queue on it: deliveries wait here in
 * arrival order, and one drain task at a time (queued or running) runs them, at most [batch]
 * before it hands the rest to a new task. So an executor with several threads still runs them
 * one after another, in order; a burst costs one task per [batch] events instead of one each;
 * and a busy room never keeps Android's main looper from its other work for more than a batch.
 *
 * Few wake-ups of the executor's thread: a poster hands the executor a drain task only when no
 * drain is queued or running (the thread may be asleep then); a drain takes every delivery
 * queued, up to what is left of its batch, at one hold of the lock and runs them outside it.
 * With [lingerNanos], a drain that finds the queue empty watches it that long before it ends:
 * events that come closer together than that (a busy room: 1–2 µs apart) are run by a thread
 * that stays awake, instead of one that sleeps and is woken every few events (waking a parked
 * thread costs the poster a system call and both threads several microseconds).
 *
 * It counts deliveries not yet run: past [maxBacklog] the socket's reader waits (TCP pushes back
 * on the server) instead of memory growing without bound behind a slow handler. Only the reader
 * waits: timers, app calls and auth answers never do.
 *
 * An executor that runs tasks at once on the caller's thread ([HandlerExecutors.DIRECT]) is
 * served without recursion: a drain started inside a drain on the same thread is left to the
 * outer one, so a long backlog never deepens the stack.
 *
 * @param executor where the deliveries run.
 * @param maxBacklog deliveries queued or running past which [awaitRoom] waits.
 * @param batch deliveries a drain task runs at most before it queues the next one behind the
 *   executor's other work.
 * @param lingerNanos how long a drain that finds the queue empty keeps looking (a loop on an
 *   atomic read, at most this long) before it ends; 0, the default, ends it at once. Only for
 *   an executor whose threads do nothing else that waits on them (the client's own
 *   [HandlerExecutors.background]): a drain run on a poster's thread or Android's main looper
 *   would spend that time there. [LINGER_NANOS] is the client's.
 */
internal class DeliveryOutbox(
    private val executor: Executor,
    private val maxBacklog: Int,
    private val batch: Int = 64,
    private val lingerNanos: Long = 0
) {
    private val lock = Object()
    /** Deliveries not yet taken by a drain, oldest first. Guarded by [lock]. */
    private val queue = ArrayDeque<() -> Unit>()
    /** A drain task is queued on the executor or running. Guarded by [lock]. */
    private var draining = false
    /**
     * Deliveries queued or running: raised under [lock] with each post, lowered without it as
     * each one ends. An atomic, so neither a lingering drain nor the reader's check
     * ([awaitRoom]) takes the lock to read it.
     */
    private val backlog = AtomicInteger()

    /** Whether this thread is inside [drain], and whether a nested drain asked it to go on. */
    private class Here {
        var active = false
        var again = false
    }

    private val here = object : ThreadLocal<Here>() {
        override fun initialValue() = Here()
    }

    /** Deliveries handed to the outbox and not yet run. */
    val pending: Int get() = backlog.get()

    /**
     * Queues [task] to run on the executor after every task posted before it.
     *
     * @return false when the executor refused the drain (shut down): nothing queued runs, and it
     *   is counted out.
     */
    fun post(task: () -> Unit): Boolean {
        synchronized(lock) {
            queue.addLast(task)
            backlog.incrementAndGet()
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
            backlog.addAndGet(-queue.size)
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

    /**
     * Runs up to [batch] deliveries, taking all that are queued at each hold of the lock; with
     * more left, schedules the next drain. An empty queue ends the drain, after one [linger]
     * since the last delivery it took.
     */
    private fun runBatch() {
        val taken = arrayOfNulls<() -> Unit>(batch)
        var mayLinger = lingerNanos > 0
        var ran = 0
        while (ran < batch) {
            val count = synchronized(lock) {
                var count = 0
                while (ran + count < batch) {
                    taken[count] = queue.pollFirst() ?: break
                    count += 1
                }
                if (count == 0 && !mayLinger) {
                    // Ended under the lock: a post from now on sees it and schedules a drain.
                    draining = false
                    return
                }
                count
            }
            if (count == 0) {
                linger()
                mayLinger = false // the next look that finds nothing ends the drain
                continue
            }
            mayLinger = lingerNanos > 0
            run(taken, count)
            ran += count
        }
        schedule()
    }

    /**
     * Runs [taken]'s first [count] deliveries in order, each counted out as it ends. When one
     * throws, those after it go back to the front of the queue, in order, before the throw
     * leaves: the next drain runs them first.
     */
    private fun run(taken: Array<(() -> Unit)?>, count: Int) {
        var next = 0
        try {
            while (next < count) {
                val task = taken[next]!!
                taken[next] = null
                next += 1
                try {
                    task()
                } finally {
                    // The one that brings the backlog under its bound wakes a reader that may wait.
                    if (backlog.decrementAndGet() == maxBacklog - 1) synchronized(lock) { lock.notifyAll() }
                }
            }
        } finally {
            if (next < count) {
                synchronized(lock) {
                    for (index in count - 1 downTo next) queue.addFirst(taken[index]!!)
                }
                for (index in next until count) taken[index] = null
            }
        }
    }

    /**
     * Looks for a delivery for up to [lingerNanos]: nothing this drain took is left running, so
     * a backlog above 0 is a delivery queued. The caller then takes it under the lock, or ends.
     */
    private fun linger() {
        val start = System.nanoTime()
        while (backlog.get() == 0 && System.nanoTime() - start < lingerNanos) {
            // Nothing to do but look again, for at most lingerNanos.
        }
    }

    /** Waits while the backlog is at its bound and [stillWanted] holds (checked every 50 ms). */
    fun awaitRoom(stillWanted: () -> Boolean) {
        if (backlog.get() < maxBacklog) return
        synchronized(lock) {
            while (backlog.get() >= maxBacklog && stillWanted()) {
                try {
                    lock.wait(50)
                } catch (error: InterruptedException) {
                    Thread.currentThread().interrupt()
                    return
                }
            }
        }
    }

    /** The client's setting. */
    companion object {
        /**
         * How long a drain on the client's own handler thread looks for the next delivery
         * before it ends: 20 µs. A busy room's events reach the outbox 1–2 µs apart, so its
         * drain stays awake through the burst; the price is at most 20 µs of that thread's CPU
         * each time a drain ends (a stream of events 20–40 µs apart keeps it about half busy),
         * and as long for other work queued on that thread. Kept short: on a machine whose
         * cores are all busy, the poster may be waiting for the very core the drain spins on.
         */
        const val LINGER_NANOS: Long = 20_000
    }
}
