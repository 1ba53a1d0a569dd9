package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import org.junit.jupiter.api.Timeout
import java.util.Random
import java.util.concurrent.CountDownLatch
import java.util.concurrent.Executor
import java.util.concurrent.ExecutorService
import java.util.concurrent.Executors
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.Semaphore
import java.util.concurrent.TimeUnit
import java.util.concurrent.atomic.AtomicInteger

class DeliveryOutboxTest {
    @Test
    fun `a reader waits while the app's executor is behind by the bound, and goes on once it catches up`() {
        val queued = ArrayList<Runnable>()
        val outbox = DeliveryOutbox(Executor { synchronized(queued) { queued.add(it) } }, 2)
        outbox.post {}
        outbox.awaitRoom { true } // one behind: no wait
        outbox.post {}
        assertEquals(2, outbox.pending)
        val released = readerAtTheBound(outbox)
        synchronized(queued) { queued.removeAt(0) }.run() // one drain runs both
        assertTrue(released.await(5, TimeUnit.SECONDS), "the deliveries ran: the reader goes on")
        assertEquals(0, outbox.pending)
    }

    @Test
    fun `deliveries run one at a time and in order on an executor with four threads`() {
        val pool = Executors.newFixedThreadPool(4)
        try {
            val outbox = DeliveryOutbox(pool, 100_000)
            val count = 20_000
            val seen = ArrayList<Int>()
            val running = AtomicInteger()
            val overlaps = AtomicInteger()
            val done = CountDownLatch(1)
            for (n in 0 until count) {
                outbox.post {
                    if (running.incrementAndGet() > 1) overlaps.incrementAndGet()
                    seen.add(n) // unsynchronized on purpose: deliveries never overlap
                    running.decrementAndGet()
                    if (n == count - 1) done.countDown()
                }
            }
            assertTrue(done.await(20, TimeUnit.SECONDS), "all delivered")
            assertEquals(0, overlaps.get(), "two deliveries ran at once")
            assertEquals((0 until count).toList(), seen)
        } finally {
            pool.shutdownNow()
        }
    }

    @Test
    fun `a burst is one executor task a batch, and the next batch queues behind the executor's other work`() {
        val queued = ArrayList<Runnable>()
        val outbox = DeliveryOutbox(Executor { queued.add(it) }, 1_000, batch = 64)
        var ran = 0
        repeat(150) { outbox.post { ran += 1 } }
        assertEquals(1, queued.size, "one drain for the burst")
        queued.removeAt(0).run()
        assertEquals(64, ran)
        assertEquals(1, queued.size, "the rest in a new task")
        queued.removeAt(0).run()
        queued.removeAt(0).run()
        assertEquals(150, ran)
        assertTrue(queued.isEmpty())
        assertEquals(0, outbox.pending)
        outbox.post { ran += 1 }
        assertEquals(1, queued.size, "an idle outbox schedules a drain again")
    }

    @Test
    fun `an executor that runs at once serves 100,000 deliveries posted from a delivery without deepening the stack`() {
        val outbox = DeliveryOutbox(HandlerExecutors.DIRECT, 1_000_000, batch = 64)
        var ran = 0
        var deepest = 0
        outbox.post {
            repeat(100_000) {
                outbox.post {
                    ran += 1
                    deepest = Math.max(deepest, Thread.currentThread().stackTrace.size)
                }
            }
        }
        assertEquals(100_000, ran)
        assertEquals(0, outbox.pending)
        assertTrue(deepest < 200, "stack depth $deepest")
    }

    @Test
    fun `a delivery that throws leaves the rest to a new drain`() {
        val queued = ArrayList<Runnable>()
        val outbox = DeliveryOutbox(Executor { queued.add(it) }, 100)
        var ran = false
        outbox.post { throw IllegalStateException("a bug") }
        outbox.post { ran = true }
        assertThrows<IllegalStateException> { queued.removeAt(0).run() }
        assertEquals(1, queued.size, "a new drain for the rest")
        queued.removeAt(0).run()
        assertTrue(ran)
        assertEquals(0, outbox.pending)
    }

    @Test
    fun `a reader whose socket is no longer wanted stops waiting`() {
        val outbox = DeliveryOutbox(Executor { }, 1)
        outbox.post {}
        var checks = 0
        outbox.awaitRoom { checks += 1; checks < 3 }
        assertEquals(3, checks)
    }

    @Test
    fun `an executor that refuses is counted out`() {
        val outbox = DeliveryOutbox(Executor { throw RejectedExecutionException("shut down") }, 1)
        assertFalse(outbox.post {})
        assertEquals(0, outbox.pending)
    }

    @Test
    fun `a throw in the middle of what a drain took leaves the rest first, in order, before later posts`() {
        val queued = ArrayList<Runnable>()
        val outbox = DeliveryOutbox(Executor { queued.add(it) }, 100)
        val seen = ArrayList<Int>()
        outbox.post { seen.add(1) }
        outbox.post { throw IllegalStateException("a bug") }
        outbox.post { seen.add(3) }
        outbox.post { seen.add(4) }
        assertThrows<IllegalStateException> { queued.removeAt(0).run() }
        outbox.post { seen.add(5) }
        while (queued.isNotEmpty()) queued.removeAt(0).run()
        assertEquals(listOf(1, 3, 4, 5), seen)
        assertEquals(0, outbox.pending)
    }

    @Test
    fun `a reader at the bound goes on as soon as one delivery has run, not after the drain's batch`() {
        val pool = handlersThread()
        try {
            val outbox = DeliveryOutbox(pool, 2, lingerNanos = DeliveryOutbox.LINGER_NANOS)
            val first = CountDownLatch(1)
            val second = CountDownLatch(1)
            outbox.post { first.await(10, TimeUnit.SECONDS) }
            outbox.post { second.await(10, TimeUnit.SECONDS) }
            val released = readerAtTheBound(outbox)
            first.countDown()
            assertTrue(released.await(5, TimeUnit.SECONDS), "one ran: the reader goes on while the other still runs")
            assertEquals(1, outbox.pending)
            second.countDown()
        } finally {
            pool.shutdownNow()
        }
    }

    @Test
    @Timeout(120)
    fun `a reader that waits at the bound before each post never finds more than the bound behind, and every delivery runs in order`() {
        val pool = handlersThread()
        try {
            val bound = 50
            val outbox = DeliveryOutbox(pool, bound, lingerNanos = DeliveryOutbox.LINGER_NANOS)
            val count = 20_000
            val seen = ArrayList<Int>()
            var most = 0
            val done = CountDownLatch(1)
            val deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(60)
            for (n in 0 until count) {
                outbox.awaitRoom { System.nanoTime() < deadline } // a lost wake-up fails here, not hangs
                assertTrue(System.nanoTime() < deadline, "stuck at the bound at delivery $n")
                most = Math.max(most, outbox.pending)
                outbox.post {
                    if (n % 1000 == 0) Thread.sleep(1) // a slow handler now and then: the reader catches up to the bound
                    seen.add(n)
                    if (n == count - 1) done.countDown()
                }
            }
            assertTrue(done.await(60, TimeUnit.SECONDS), "all delivered")
            assertTrue(most < bound, "$most behind when the reader went on")
            assertEquals((0 until count).toList(), seen)
        } finally {
            pool.shutdownNow()
        }
    }

    @Test
    @Timeout(120)
    fun `posts from four threads run in the order they were posted, one at a time, lingering or not`() {
        for (linger in longArrayOf(0, 2_000, DeliveryOutbox.LINGER_NANOS)) {
            val pool = Executors.newFixedThreadPool(3)
            try {
                val outbox = DeliveryOutbox(pool, 1_000_000, lingerNanos = linger)
                val perThread = 25_000
                val order = Any()
                var next = 0
                val seen = IntArray(4 * perThread) { -1 }
                var ran = 0
                val running = AtomicInteger()
                val overlaps = AtomicInteger()
                val done = CountDownLatch(1)
                val producers = (0 until 4).map {
                    Thread {
                        repeat(perThread) {
                            // The client posts in one order (its actions are performed one after
                            // another): the number taken and the post happen together.
                            synchronized(order) {
                                val n = next++
                                outbox.post {
                                    if (running.incrementAndGet() > 1) overlaps.incrementAndGet()
                                    seen[ran++] = n // unsynchronized on purpose: deliveries never overlap
                                    running.decrementAndGet()
                                    if (ran == seen.size) done.countDown()
                                }
                            }
                        }
                    }
                }
                producers.forEach { it.start() }
                producers.forEach { it.join(60_000) }
                assertTrue(done.await(60, TimeUnit.SECONDS), "all delivered (linger $linger ns)")
                assertEquals(0, overlaps.get(), "two deliveries ran at once (linger $linger ns)")
                for (index in seen.indices) assertEquals(index, seen[index], "delivery $index (linger $linger ns)")
                assertDrained(outbox)
            } finally {
                pool.shutdownNow()
            }
        }
    }

    @Test
    @Timeout(120)
    fun `no wake-up is lost in 20,000 rounds of one post then a wait for it, posted at every moment of a drain's end`() {
        val random = Random(7)
        for (linger in longArrayOf(0, 1_000, DeliveryOutbox.LINGER_NANOS)) {
            val pool = handlersThread()
            try {
                val outbox = DeliveryOutbox(pool, 10_000, lingerNanos = linger)
                val ran = Semaphore(0)
                for (round in 0 until 20_000) {
                    // Now and then a pause of up to 30 µs first: the post lands before, inside or
                    // just after the drain's linger, or as it gives up.
                    if (random.nextInt(4) == 0) {
                        val until = System.nanoTime() + random.nextInt(30_000)
                        while (System.nanoTime() < until) { }
                    }
                    outbox.post { ran.release() }
                    assertTrue(ran.tryAcquire(5, TimeUnit.SECONDS), "round $round (linger $linger ns): the delivery never ran")
                }
                assertDrained(outbox)
            } finally {
                pool.shutdownNow()
            }
        }
    }

    @Test
    fun `a lingering drain runs what comes during its linger without a new task, and ends when nothing comes`() {
        val tasks = AtomicInteger()
        val pool = handlersThread()
        try {
            val counting = Executor { tasks.incrementAndGet(); pool.execute(it) }
            val outbox = DeliveryOutbox(counting, 100, lingerNanos = TimeUnit.MILLISECONDS.toNanos(500))
            val ran = Semaphore(0)
            outbox.post { ran.release() }
            assertTrue(ran.tryAcquire(5, TimeUnit.SECONDS))
            outbox.post { ran.release() } // the drain still looks: no new task
            assertTrue(ran.tryAcquire(5, TimeUnit.SECONDS))
            assertEquals(1, tasks.get(), "one task while the drain lingered")
            // The linger is bounded: the drain ends, and the thread takes other work.
            val other = CountDownLatch(1)
            pool.execute { other.countDown() }
            assertTrue(other.await(5, TimeUnit.SECONDS), "the drain gave the thread back")
            outbox.post { ran.release() }
            assertTrue(ran.tryAcquire(5, TimeUnit.SECONDS))
            assertEquals(2, tasks.get(), "a post after the drain ended schedules one")
        } finally {
            pool.shutdownNow()
        }
    }

    @Test
    fun `only the client's own handler thread lingers`() {
        assertTrue(HandlerExecutors.isBackground(HandlerExecutors.background))
        assertFalse(HandlerExecutors.isBackground(HandlerExecutors.DIRECT))
        assertFalse(HandlerExecutors.isBackground(Executor { it.run() }))
    }

    /** A reader that waits for room in [outbox], checked to be waiting: counted down once it goes on. */
    private fun readerAtTheBound(outbox: DeliveryOutbox): CountDownLatch {
        val released = CountDownLatch(1)
        Thread {
            outbox.awaitRoom { true }
            released.countDown()
        }.start()
        assertFalse(released.await(200, TimeUnit.MILLISECONDS), "the reader waits at the bound")
        return released
    }

    /** Waits (at most 5 s) for the outbox's count to reach 0: a delivery is counted out just after it ends, so after what it signalled. */
    private fun assertDrained(outbox: DeliveryOutbox) {
        val until = System.nanoTime() + TimeUnit.SECONDS.toNanos(5)
        while (outbox.pending != 0 && System.nanoTime() < until) Thread.sleep(1)
        assertEquals(0, outbox.pending)
    }

    /** A thread of the test's own for the deliveries, as the client's handler thread. */
    private fun handlersThread(): ExecutorService = Executors.newSingleThreadExecutor { task -> Thread(task, "test-handlers").apply { isDaemon = true } }
}
