package com.bird.realtime

import java.util.concurrent.Executor
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.atomic.AtomicBoolean
import java.util.concurrent.atomic.AtomicLong
import java.util.concurrent.atomic.AtomicReference

/**
 * Hands deliveries to the app's executor as a serial queue on it: deliveries wait here in
 * arrival order, and one drain task at a time (queued or running) runs them, at most [batch]
 * before it hands the rest to a new task. So an executor with several threads still runs them
 * one after another, in order; a burst costs one task per [batch] events instead of one each;
 * and a busy room never keeps Android's main looper from its other work for more than a batch.
 *
 * Nothing is locked on the way, and the poster and the drain share as little memory as they
 * can (each write the other reads moves a cache line between cores, per event): a post is one
 * compare-and-set onto a stack, a count of its own, and a look at whether a drain is active; a
 * drain takes everything posted with one swap, copies it into an array of its own (it writes
 * nothing a poster made) and runs it oldest first. Few wake-ups of the executor's thread: a
 * poster hands the executor a drain task only when none is queued or running (the thread may be
 * asleep then). With [lingerNanos], a drain that has run everything it was given watches for a
 * post that long before it ends:
 * events that come closer together than that (a busy room: 1–2 µs apart) are run by a thread
 * that stays awake, instead of one that sleeps and is woken every few events (waking a parked
 * thread costs the poster a system call and both threads several microseconds).
 *
 * It counts deliveries posted and run: past [maxBacklog] not yet run the socket's reader waits
 * (TCP pushes back on the server) instead of memory growing without bound behind a slow
 * handler; the reader reads the drain's count only when its own says it may be near the bound.
 * Only the reader waits: timers, app calls and auth answers never do.
 *
 * An executor that runs tasks at once on the caller's thread ([HandlerExecutors.DIRECT]) is
 * served without recursion: a drain started inside a drain on the same thread is left to the
 * outer one, so a long backlog never deepens the stack.
 *
 * @param executor where the deliveries run.
 * @param maxBacklog deliveries queued or running past which [awaitRoom] waits.
 * @param batch deliveries a drain task runs at most before it queues the next one behind the
 *   executor's other work.
 * @param lingerNanos how long a drain that finds the queue empty keeps looking (a look at the
 *   stack every 250 ns, at most this long) before it ends; 0, the default, ends it at once. Only for
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
    /** A posted delivery; [next] is the one posted before it. Written by its poster only. */
    private class Node(val task: () -> Unit, val next: Node?)

    /** Deliveries posted and not yet taken by a drain: a stack pushed with one compare-and-set each, newest first. */
    private val posted = AtomicReference<Node?>()
    /**
     * A drain is scheduled or running. Who sets it owns the drain; the drain clears it when it
     * finds nothing more, then looks at [posted] once more (a post in between finds it clear,
     * or the drain finds the post: one of the two schedules or goes on).
     */
    private val active = AtomicBoolean()
    /**
     * Deliveries taken from [posted], the newest at index 0 and the oldest at [readyCount] - 1:
     * read and written by the one drain that runs, never by a poster (a drain writes nothing a
     * poster just made, so the two threads do not pass memory back and forth per delivery).
     */
    private var ready = arrayOfNulls<() -> Unit>(64)
    private var readyCount = 0

    /** Deliveries posted, ever: raised by each poster before its push. */
    private val postedCount = AtomicLong()
    /** Deliveries run, ever: written by the drain that runs (one at a time). */
    private val doneCount = AtomicLong()
    /**
     * The reader's last look at [doneCount] ([awaitRoom] reads that only when this one says it
     * may be at the bound). Volatile: an old socket's reader and a new one may both write it,
     * and a long is not written whole otherwise on a 32-bit JVM.
     */
    @Volatile private var doneSeen = 0L
    /** Readers waiting at the bound (changed under [lock]): the drain wakes them after each delivery. */
    @Volatile private var waiting = 0
    /** Where a reader waits at the bound ([awaitRoom]). */
    private val lock = Object()

    /** Whether this thread is inside [drain], and whether a nested drain asked it to go on. */
    private class Here {
        var active = false
        var again = false
    }

    private val here = object : ThreadLocal<Here>() {
        override fun initialValue() = Here()
    }

    /** Deliveries handed to the outbox and not yet run. */
    val pending: Int get() {
        val done = doneCount.get() // read first: it never passes the posted count read after it
        return (postedCount.get() - done).toInt()
    }

    /**
     * Queues [task] to run on the executor after every task posted before it.
     *
     * @return false when the executor refused the drain (shut down): nothing queued runs, and it
     *   is counted out.
     */
    fun post(task: () -> Unit): Boolean {
        // Counted before it is pushed: the drain never counts it done first, so the backlog
        // ([pending], the bound) never reads below what is there.
        postedCount.incrementAndGet()
        while (true) {
            val head = posted.get()
            if (posted.compareAndSet(head, Node(task, head))) break
        }
        // A drain that runs finds the post (it looks at the stack again after it clears active).
        if (active.get() || !active.compareAndSet(false, true)) return true
        return schedule()
    }

    /** Hands the executor a drain (the caller owns [active]); refused, everything posted is dropped. */
    private fun schedule(): Boolean = try {
        executor.execute { drain() }
        true
    } catch (error: RejectedExecutionException) {
        // Still the owner: what is taken and posted is counted out and dropped; a post meanwhile
        // that finds active clear schedules (and is refused) on its own.
        do {
            var dropped = readyCount.toLong()
            java.util.Arrays.fill(ready, 0, readyCount, null)
            readyCount = 0
            var node = posted.getAndSet(null)
            while (node != null) {
                dropped += 1
                node = node.next
            }
            finished(dropped)
            active.set(false)
        } while (posted.get() != null && active.compareAndSet(false, true))
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
            // Error): the rest still runs, in order, in a new drain (still active), and the
            // executor sees the throw.
            schedule()
            throw thrown
        }
    }

    /**
     * Runs deliveries in order until none is left (the drain ends: the next post schedules one)
     * or [batch] have run (it schedules the next drain behind the executor's other work). With
     * [lingerNanos], a drain that has run all it found looks that long for a post first.
     */
    private fun runBatch() {
        var ran = 0
        while (true) {
            if (readyCount == 0 && !take()) {
                if (lingerNanos > 0 && linger() && take()) continue
                active.set(false)
                // A post that found active still set is here: this drain goes on with it.
                if (posted.get() == null || !active.compareAndSet(false, true)) return
                continue
            }
            readyCount -= 1
            val task = ready[readyCount]!!
            ready[readyCount] = null
            ran += 1
            try {
                task()
            } finally {
                finished(1)
            }
            if (ran >= batch) {
                schedule()
                return
            }
        }
    }

    /** Takes everything posted into [ready] (oldest last): whether there was anything. */
    private fun take(): Boolean {
        val top = posted.getAndSet(null) ?: return false
        var count = 0
        var node: Node? = top
        while (node != null) {
            count += 1
            node = node.next
        }
        // Grown at least twofold, so a backlog that builds slowly is not copied at every take; an
        // array past 4,096 (a backlog the reader's bound let build, or other posters' bursts)
        // is let go at the next take of 64 or fewer.
        if (ready.size < count) ready = arrayOfNulls(Math.max(count, 2 * ready.size))
        else if (ready.size > 4096 && count <= 64) ready = arrayOfNulls(64)
        node = top
        for (index in 0 until count) {
            ready[index] = node!!.task
            node = node.next
        }
        readyCount = count
        return true
    }

    /** [count] deliveries are over: counted out, and a reader waiting at the bound woken. */
    private fun finished(count: Long) {
        doneCount.addAndGet(count)
        if (waiting > 0) synchronized(lock) { lock.notifyAll() }
    }

    /**
     * Looks for a post for up to [lingerNanos]: whether one came. It looks every 250 ns or so,
     * not in a tight loop: each look takes the stack's cache line from the poster's core, and
     * the poster needs it back for its next push.
     */
    private fun linger(): Boolean {
        val start = System.nanoTime()
        var next = start
        while (true) {
            val now = System.nanoTime()
            if (now - next >= 0) {
                if (posted.get() != null) return true
                if (now - start >= lingerNanos) return false
                next = now + LOOK_NANOS
            }
        }
    }

    /**
     * Waits while the backlog is at its bound and [stillWanted] holds (checked every 50 ms): the
     * socket's reader, before it hands the client a frame (an old socket's reader may still be
     * at it while a new one starts).
     */
    fun awaitRoom(stillWanted: () -> Boolean) {
        // The drain's count is read only when the last look at it says the bound may be reached.
        if (postedCount.get() - doneSeen < maxBacklog) return
        doneSeen = doneCount.get()
        if (postedCount.get() - doneSeen < maxBacklog) return
        synchronized(lock) {
            waiting += 1
            try {
                while (postedCount.get() - doneCount.get() >= maxBacklog && stillWanted()) {
                    try {
                        lock.wait(50)
                    } catch (error: InterruptedException) {
                        Thread.currentThread().interrupt()
                        return
                    }
                }
            } finally {
                waiting -= 1
                doneSeen = doneCount.get()
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

        /** How often a lingering drain looks at the stack. */
        private const val LOOK_NANOS: Long = 250
    }
}
