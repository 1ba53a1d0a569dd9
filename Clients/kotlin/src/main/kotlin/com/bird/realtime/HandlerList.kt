package com.bird.realtime

/**
 * A room's or channel's handlers: a list replaced whole on each change (under this object's
 * lock) and read without a lock or a copy. A delivery reads [current] once and calls that list
 * through; a handler removed meanwhile is skipped by its [contains] check (the seed: not called
 * for events delivered after `off` returns). Handlers change rarely and events come by the
 * million, so the copy is made on the change, never per event.
 */
internal class HandlerList<T : Any> {
    /** The handlers now, in the order added; never changed once published (a new list replaces it). */
    @Volatile
    var current: List<T> = emptyList()
        private set

    /** Adds [handler] at the end. */
    fun add(handler: T) {
        synchronized(this) { current = current + handler }
    }

    /** Removes [handler] (the same object), if it is there. */
    fun remove(handler: T) {
        synchronized(this) { current = current.filter { it !== handler } }
    }

    /** Removes every handler [matching] selects. */
    fun removeAll(matching: (T) -> Boolean) {
        synchronized(this) { current = current.filterNot(matching) }
    }

    /** Whether [handler] (the same object) is still in the list. */
    fun contains(handler: T): Boolean {
        val handlers = current
        for (index in handlers.indices) if (handlers[index] === handler) return true
        return false
    }
}
