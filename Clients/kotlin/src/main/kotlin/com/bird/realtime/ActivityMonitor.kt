package com.bird.realtime

// The stale-connection check as deadlines (realtime-connection-lifecycle seed, "The
// stale-connection check"), as the Swift client's `ActivityMonitor`: after `timeout` of
// silence, ping; if no frame arrives within the pong deadline, the connection is dead. A value
// with no timers of its own: every method returns what to arm. Instants in milliseconds.

/** What the monitor asks for. */
internal sealed class MonitorAction {
    data class Check(val at: Long) : MonitorAction()
    object Ping : MonitorAction()
    data class PongDeadline(val sequence: Long, val at: Long) : MonitorAction()
    data class CancelPongDeadline(val sequence: Long) : MonitorAction()
}

/** A ping awaiting any frame; [pathChange]: it verifies the network after a change (its failure backs off). */
internal data class Probe(val sequence: Long, val deadline: Long, val pathChange: Boolean)

/** Watches one connection from its handshake at [start]; [timeout] is the handshake's `activity_timeout`. */
internal class ActivityMonitor(private val timeout: Long, start: Long) {
    private var lastActivity = start
    private var checkArmed = true
    var probe: Probe? = null
        private set
    private var sequence = 0L

    /** The first activity check to arm. */
    fun start(): MonitorAction = MonitorAction.Check(lastActivity + timeout)

    /** A frame arrived at [now]: the connection is alive; a pending probe is answered. */
    fun frameReceived(now: Long): List<MonitorAction> {
        lastActivity = now
        // The common case (a check armed, no probe out) asks for nothing, and makes nothing.
        if (probe == null && checkArmed) return emptyList()
        val actions = ArrayList<MonitorAction>()
        probe?.let { actions.add(MonitorAction.CancelPongDeadline(it.sequence)) }
        probe = null
        if (!checkArmed) {
            checkArmed = true
            actions.add(MonitorAction.Check(now + timeout))
        }
        return actions
    }

    /**
     * The activity check came due: re-armed for the rest of the timeout after a recent frame,
     * else a ping (unless one is out) with [pongTimeout] for an answer.
     */
    fun checkDue(now: Long, pongTimeout: Long): List<MonitorAction> {
        checkArmed = false
        if (now < lastActivity + timeout) {
            checkArmed = true
            return listOf(MonitorAction.Check(lastActivity + timeout))
        }
        if (probe != null) return emptyList()
        return ping(pongTimeout, false, now)
    }

    /**
     * Pings now with [deadline] milliseconds for an answer. A path change, or an earlier
     * deadline, replaces a pending probe; otherwise the earlier deadline is kept.
     */
    fun ping(deadline: Long, pathChange: Boolean, now: Long): List<MonitorAction> {
        val pending = probe
        if (pending != null && !pathChange && pending.deadline <= now + deadline) return listOf(MonitorAction.Ping)
        val actions = ArrayList<MonitorAction>()
        actions.add(MonitorAction.Ping)
        if (pending != null) actions.add(MonitorAction.CancelPongDeadline(pending.sequence))
        sequence += 1
        probe = Probe(sequence, now + deadline, pathChange)
        actions.add(MonitorAction.PongDeadline(sequence, now + deadline))
        return actions
    }

    /** The pong deadline [sequence] came due: the probe that failed, or `null` for one answered or replaced. */
    fun pongDeadlinePassed(sequence: Long): Probe? {
        val pending = probe
        if (pending == null || pending.sequence != sequence) return null
        probe = null
        return pending
    }
}
