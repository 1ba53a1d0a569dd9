/// Work decided under a lock and performed after it, by one thread at a time, in the order it
/// was decided: the owner's state keeps a `DrainQueue`; under the lock it appends to
/// `pending` and `claim`s; the thread that claimed performs the batch with no lock held, then
/// takes the next with `next(after:)` under the lock, until nothing is pending. A thread that
/// finds another draining leaves its work to it.
///
/// The pattern of the client's `RealtimeConnection` (its machine's actions) and the server's
/// `RealtimeHub` (its writes): nothing is performed under the lock, and the order survives
/// events arriving on several threads.
package struct DrainQueue<Item> {
    /// Work not yet taken by the drainer, in order.
    package var pending: [Item] = []
    /// An empty buffer with capacity, traded with `pending`, so a busy owner allocates no
    /// array per batch.
    private var spare: [Item] = []
    /// Whether a thread is draining: the others only append.
    package private(set) var draining = false

    /// Creates an empty queue.
    package init() {}

    /// Makes the caller the drainer when work is pending and nobody drains.
    ///
    /// - Returns: the batch to perform, or `nil` when there is nothing for the caller to do.
    package mutating func claim() -> [Item]? {
        guard !pending.isEmpty, !draining else { return nil }
        draining = true
        let batch = pending
        pending = spare
        spare = []
        return batch
    }

    /// The drainer performed a batch: the next one, or `nil` (and the caller no longer drains).
    ///
    /// - Parameter done: the batch performed, emptied with its capacity kept.
    /// - Returns: what was appended meanwhile, or `nil` when nothing was.
    package mutating func next(after done: [Item]) -> [Item]? {
        guard !pending.isEmpty else {
            spare = done
            draining = false
            return nil
        }
        let next = pending
        pending = done
        return next
    }
}
