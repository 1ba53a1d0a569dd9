import Dispatch
import SystemSupport

/// Everything the client hands to the app (state changes, errors, channel events), in order, on
/// the delivery queue: work is appended under the caller's lock, and one queued block drains
/// whatever has accumulated, so a burst of events costs one queue hop, not one per event. Only
/// one drain runs at a time, so order holds even on a concurrent delivery queue.
///
/// Bounded (a flood grew a client by 35 MB/s and held the delivery queue for 70 s):
/// - a drain hands over at most `maxItemsPerHop` items, then queues itself again, so other work
///   on the delivery queue (a signal handler on main, the app's own blocks) runs in between;
/// - past `highWatermark` items or `highWatermarkBytes` of event data not yet handed over,
///   `onBacklog(true)` asks the owner to stop reading the socket; once the app has caught up
///   to `lowWatermark` items and `lowWatermarkBytes`, `onBacklog(false)` resumes it. Nothing
///   is dropped: the peer is held back by TCP instead.
final class DeliveryOutbox: Sendable {
    /// One thing to hand over: a closure, or a channel's or room's event (the hot paths: no
    /// closure allocated per event).
    enum Item: Sendable {
        case work(@Sendable () -> Void)
        case channel(RealtimeChannel, RealtimeEvent)
        case room(Room, RoomDelivery)

        /// The event data it holds, in bytes (what a flood is made of); a room event already
        /// parsed into a value counts as 64, an estimate.
        var bytes: Int {
            switch self {
            case .work: return 0
            case .channel(_, let event): return event.data?.utf8.count ?? 0
            case .room(_, let delivery):
                if case .text(let text) = delivery.payload { return text.utf8.count }
                return 64
            }
        }
    }

    /// Items handed over per hop of the delivery queue.
    static let maxItemsPerHop = 1_000
    /// Items, or bytes of event data, not yet handed over past which reading stops.
    static let highWatermark = 10_000
    static let highWatermarkBytes = 16 << 20
    /// Items and bytes the backlog must fall to before reading resumes.
    static let lowWatermark = 1_000
    static let lowWatermarkBytes = 4 << 20

    private struct Pending {
        var work: [Item] = []
        var draining = false
        /// Items and bytes queued and not yet handed over (including a batch being handed).
        var items = 0
        var bytes = 0
        var readingPaused = false
        /// Numbers the pause and resume transitions (`ReadingControl` drops a late one).
        var transitions: UInt64 = 0
    }

    private let queue: DispatchQueue
    private let pending = Locked(Pending())
    private let onBacklog: @Sendable (_ paused: Bool, _ sequence: UInt64) -> Void

    /// - Parameters:
    ///   - queue: the delivery queue.
    ///   - onBacklog: told `true` when the backlog passes the high watermark (stop reading)
    ///     and `false` when it is back under the low one (read again), with the transition's
    ///     number (they may arrive out of order: called outside the lock, from the enqueuing
    ///     thread or the delivery queue).
    init(queue: DispatchQueue, onBacklog: @escaping @Sendable (_ paused: Bool, _ sequence: UInt64) -> Void = { _, _ in }) {
        self.queue = queue
        self.onBacklog = onBacklog
    }

    /// Whether reading is paused for the backlog now.
    var isReadingPaused: Bool { pending.withLock { $0.readingPaused } }

    /// Items not yet handed over.
    var backlog: Int { pending.withLock { $0.items } }

    /// Appends `work`; it runs on the delivery queue after everything appended before it.
    func enqueue(_ work: @escaping @Sendable () -> Void) {
        enqueue(contentsOf: [.work(work)])
    }

    /// Appends items, in order, under one lock (the connection's drainer hands over a batch of
    /// events at once).
    func enqueue(contentsOf items: [Item]) {
        guard !items.isEmpty else { return }
        let bytes = items.reduce(0) { $0 + $1.bytes }
        let (startDrain, pause) = pending.withLock { pending -> (Bool, UInt64?) in
            pending.work.append(contentsOf: items)
            pending.items += items.count
            pending.bytes += bytes
            var pause: UInt64?
            if !pending.readingPaused, pending.items > Self.highWatermark || pending.bytes > Self.highWatermarkBytes {
                pending.readingPaused = true
                pending.transitions += 1
                pause = pending.transitions
            }
            guard !pending.draining else { return (false, pause) }
            pending.draining = true
            return (true, pause)
        }
        if let pause { onBacklog(true, pause) }
        if startDrain { queue.async { self.drain() } }
    }

    private func drain() {
        // Two buffers traded under the lock: a batch costs no array allocation.
        var batch: [Item] = []
        var handed = 0
        while true {
            pending.withLock { pending in
                swap(&batch, &pending.work)
                if batch.isEmpty { pending.draining = false }
            }
            if batch.isEmpty { return }
            let count = min(batch.count, Self.maxItemsPerHop - handed)
            var bytes = 0
            for item in batch[..<count] {
                bytes += item.bytes
                switch item {
                case .work(let work): work()
                case .channel(let channel, let event): channel.deliver(event)
                case .room(let room, let delivery): room.deliver(delivery)
                }
            }
            handed += count
            let resume = pending.withLock { pending -> UInt64? in
                // What this hop did not reach goes back in front of what arrived meanwhile.
                if count < batch.count { pending.work.insert(contentsOf: batch[count...], at: 0) }
                pending.items -= count
                pending.bytes -= bytes
                guard pending.readingPaused, pending.items <= Self.lowWatermark, pending.bytes <= Self.lowWatermarkBytes else { return nil }
                pending.readingPaused = false
                pending.transitions += 1
                return pending.transitions
            }
            if let resume { onBacklog(false, resume) }
            batch.removeAll(keepingCapacity: true)
            if handed >= Self.maxItemsPerHop {
                // Still draining: the next hop continues after whatever else is queued.
                queue.async { self.drain() }
                return
            }
        }
    }
}
