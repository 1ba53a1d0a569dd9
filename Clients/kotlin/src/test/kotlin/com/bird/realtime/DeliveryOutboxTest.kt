package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.util.concurrent.CountDownLatch
import java.util.concurrent.Executor
import java.util.concurrent.Executors
import java.util.concurrent.RejectedExecutionException
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
        val released = CountDownLatch(1)
        Thread {
            outbox.awaitRoom { true }
            released.countDown()
        }.start()
        assertFalse(released.await(200, TimeUnit.MILLISECONDS), "the reader waits at the bound")
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
}
