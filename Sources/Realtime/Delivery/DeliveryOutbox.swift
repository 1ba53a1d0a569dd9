import Dispatch
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

    private func drain() {
        // Two buffers traded under the lock: a batch costs no array allocation.
        var batch: [Item] = []
        while true {
            pending.withLock { pending in
                swap(&batch, &pending.work)
                if batch.isEmpty { pending.draining = false }
            }
            if batch.isEmpty { return }
            for item in batch {
                switch item {
                case .work(let work): work()
                case .channel(let channel, let event): channel.deliver(event)
                case .room(let room, let delivery): room.deliver(delivery)
                }
            }
            batch.removeAll(keepingCapacity: true)
        }
    }
}
