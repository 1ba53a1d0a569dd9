package com.bird.realtime

import org.junit.jupiter.api.Assertions.assertEquals
import org.junit.jupiter.api.Assertions.assertFalse
import org.junit.jupiter.api.Assertions.assertTrue
import org.junit.jupiter.api.Test
import java.util.concurrent.CountDownLatch
import java.util.concurrent.Executor
import java.util.concurrent.RejectedExecutionException
import java.util.concurrent.TimeUnit

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
        synchronized(queued) { queued.removeAt(0) }.run()
        assertTrue(released.await(5, TimeUnit.SECONDS), "one delivery ran: the reader goes on")
        assertEquals(1, outbox.pending)
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
