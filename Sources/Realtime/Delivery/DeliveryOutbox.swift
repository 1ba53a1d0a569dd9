import Dispatch
#if canImport(Glibc)
import Glibc
#endif
import SystemSupport

/// Everything the client hands to the app (state changes, errors, channel events), in order, on
/// the delivery queue: work is appended under the caller's lock, and one queued block drains
/// whatever has accumulated, so a burst of events costs one queue hop, not one per event. Only
/// one drain runs at a time, so order holds even on a concurrent delivery queue.
final class DeliveryOutbox: Sendable {
    private struct Pending {
        var work: [@Sendable () -> Void] = []
        var draining = false
    }

    private let queue: DispatchQueue
    private let pending = Locked(Pending())

    init(queue: DispatchQueue) { self.queue = queue }

    /// Appends `work`; it runs on the delivery queue after everything appended before it.
    func enqueue(_ work: @escaping @Sendable () -> Void) {
        let startDrain = pending.withLock { pending -> Bool in
            pending.work.append(work)
            guard !pending.draining else { return false }
            pending.draining = true
            return true
        }
        if startDrain { queue.async { self.drain() } }
    }

    private func drain() {
        var yielded = false
        while true {
            let batch = pending.withLock { pending -> [@Sendable () -> Void] in
                defer { pending.work.removeAll(keepingCapacity: true) }
                if pending.work.isEmpty, yielded { pending.draining = false }
                return pending.work
            }
            if batch.isEmpty {
                if yielded { return }
                // Before going idle, let the producer (libwebsockets' service thread) run once:
                // events that arrive meanwhile join this drain instead of costing the producer
                // a wake-up of the delivery queue each.
                yielded = true
                sched_yield()
                continue
            }
            yielded = false
            for work in batch { work() }
        }
    }
}
