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
    /// One thing to hand over: a closure, or a channel's or room's event (the hot paths: no
    /// closure allocated per event).
    enum Item: Sendable {
        case work(@Sendable () -> Void)
        case channel(RealtimeChannel, RealtimeEvent)
        case room(Room, RoomDelivery)
    }

    private struct Pending {
        var work: [Item] = []
        var draining = false
    }

    private let queue: DispatchQueue
    private let pending = Locked(Pending())

    init(queue: DispatchQueue) { self.queue = queue }

    /// Appends `work`; it runs on the delivery queue after everything appended before it.
    func enqueue(_ work: @escaping @Sendable () -> Void) {
        enqueue(.work(work))
    }

    /// Appends items, in order, under one lock (the connection's drainer hands over a batch of
    /// events at once).
    func enqueue(contentsOf items: [Item]) {
        guard !items.isEmpty else { return }
        let startDrain = pending.withLock { pending -> Bool in
            pending.work.append(contentsOf: items)
            guard !pending.draining else { return false }
            pending.draining = true
            return true
        }
        if startDrain { queue.async { self.drain() } }
    }

    private func enqueue(_ item: Item) {
        let startDrain = pending.withLock { pending -> Bool in
            pending.work.append(item)
            guard !pending.draining else { return false }
            pending.draining = true
            return true
        }
        if startDrain { queue.async { self.drain() } }
    }

    /// Times the drain yields to the producer before going idle when nothing is pending.
    static let idleYields = 16

    private func drain() {
        var yields = 0
        while true {
            let batch = pending.withLock { pending -> [Item] in
                defer { pending.work.removeAll(keepingCapacity: true) }
                if pending.work.isEmpty, yields >= Self.idleYields { pending.draining = false }
                return pending.work
            }
            if batch.isEmpty {
                if yields >= Self.idleYields { return }
                // Before going idle, let the producer (libwebsockets' service thread) run a few
                // times: events that arrive meanwhile join this drain instead of costing the
                // producer a wake-up of the delivery queue each (`queue.async`, a futex call and
                // a context switch: about 5 % of the socket thread's samples in a room firehose).
                yields += 1
                sched_yield()
                continue
            }
            yields = 0
            for item in batch {
                switch item {
                case .work(let work): work()
                case .channel(let channel, let event): channel.deliver(event)
                case .room(let room, let delivery): room.deliver(delivery)
                }
            }
        }
    }
}
