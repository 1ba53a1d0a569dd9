package com.bird.realtime

import java.util.concurrent.Executor
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.atomic.AtomicInteger
import java.util.concurrent.atomic.AtomicReference

/**
 * Hands deliveries to the app's executor as a serial queue on it: deliveries wait here in
 * arrival order, and one drain task at a time (queued or running) runs them, at most [batch]
 * before it hands the rest to a new task. So an executor with several threads still runs them
 * one after another, in order; a burst costs one task per [batch] events instead of one each;
 * and a busy room never keeps Android's main looper from its other work for more than a batch.
 *
 * Nothing is locked on the way: a post is one compare-and-set onto a stack and one atomic count;
 * a drain takes everything posted with one swap and runs it oldest first. Few wake-ups of the
 * executor's thread: a poster hands the executor a drain task only when the count was 0 (no
 * drain queued or running; the thread may be asleep then). With [lingerNanos], a drain that
 * has run everything it was given watches for a post that long before it ends:
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
    /** A posted delivery; [next] links the posted stack (newest first) and then the ready list (oldest first). */
    private class Node(val task: () -> Unit) {
        var next: Node? = null
    }

    /** Deliveries posted and not yet taken by a drain: a stack pushed with one compare-and-set each, newest first. */
    private val posted = AtomicReference<Node?>()
    /** Deliveries taken from [posted], oldest first: read and written by the one drain that owns the backlog. */
    private var ready: Node? = null
    /**
     * Deliveries posted and not yet run (counted after each is pushed, counted out as each one
     * ends). Who raises it from 0 owns the drain: it schedules one, and that drain runs until
     * its own count-out brings it back to 0, so one drain at a time runs, with nothing locked.
     */
    private val backlog = AtomicInteger()
    /** Where a reader waits at the bound ([awaitRoom]). */
    private val lock = Object()

    /** Whether this thread is inside [drain], whether a nested drain asked it to go on, and whether a throw left deliveries. */
    private class Here {
        var active = false
        var again = false
        var rest = false
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
        val node = Node(task)
        while (true) {
            val head = posted.get()
            node.next = head
            if (posted.compareAndSet(head, node)) break
        }
        if (backlog.getAndIncrement() != 0) return true
        return schedule()
    }

    /** Hands the executor a drain (the caller owns the backlog); refused, everything counted is dropped. */
    private fun schedule(): Boolean = try {
        executor.execute { drain() }
        true
    } catch (error: RejectedExecutionException) {
        // Still the owner: each delivery counted is taken and counted out; one posted meanwhile
        // that raises the count from 0 again schedules (and is refused) on its own.
        do {
            nextReady()
            val left = countOut()
        } while (left > 0)
        false
    }

    private fun drain() {
        val state = here.get()
        if (state.active) {
            state.again = true // an executor that runs at once: the drain below this frame goes on
            return
        }
        state.active = true
        state.rest = false
        var thrown: Throwable? = null
        try {
            do {
                state.again = false
                runBatch(state)
            } while (state.again)
        } catch (error: Throwable) {
            thrown = error
        } finally {
            state.active = false
        }
        if (thrown != null) {
            // A task threw (the client's tasks catch the app's errors: this is a bug or an
            // Error): the rest still runs, in order, in a new drain, and the executor sees the throw.
            if (state.rest) schedule()
            throw thrown
        }
    }

    /**
     * Runs deliveries in order until the backlog is 0 (the drain ends: the next post schedules
     * one) or [batch] have run (it schedules the next drain behind the executor's other work).
     * With [lingerNanos], the last delivery is counted out only after a look for the next.
     */
    private fun runBatch(state: Here) {
        var ran = 0
        while (true) {
            // The backlog is above 0 and nothing runs: a delivery was posted and not yet run.
            val task = nextReady()
            ran += 1
            try {
                task()
            } catch (error: Throwable) {
                state.rest = countOut() > 0
                throw error
            }
            if (lingerNanos > 0 && ready == null) linger()
            if (countOut() == 0) return
            if (ran >= batch) {
                schedule()
                return
            }
        }
    }

    /** The oldest delivery not yet run (only the backlog's owner calls this: one is there). */
    private fun nextReady(): () -> Unit {
        var node = ready
        if (node == null) {
            // The posted stack, newest first, turned into the ready list.
            var taken: Node? = posted.getAndSet(null) ?: throw IllegalStateException("a delivery is counted and none was posted")
            var reversed: Node? = null
            while (taken != null) {
                val next = taken.next
                taken.next = reversed
                reversed = taken
                taken = next
            }
            node = reversed!!
        }
        ready = node.next
        node.next = null
        return node.task
    }

    /** One delivery over: the backlog left. The one that brings it under its bound wakes a reader that may wait. */
    private fun countOut(): Int {
        val left = backlog.decrementAndGet()
        if (left == maxBacklog - 1) synchronized(lock) { lock.notifyAll() }
        return left
    }

    /**
     * Looks for a post for up to [lingerNanos] before the drain counts out its last delivery
     * (so a post meanwhile finds the drain still running and schedules none).
     */
    private fun linger() {
        val start = System.nanoTime()
        while (posted.get() == null && System.nanoTime() - start < lingerNanos) {
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
