import Dispatch
import SystemSupport

/// The hub's one ordered path to its room store and the cluster's presence registry (issue
/// 31): every call that may wait on Redis runs here, on a serial queue of its own, never on
/// the WebSocket service thread and never under the hub's lock. A frozen Redis then holds the
/// lane (room requests wait behind it, or are refused once `maxBacklog` wait), while pings,
/// channels and everything else that needs no store go on.
///
/// Serial, so it orders what needs an order: on one node an event's append and its delivery
/// are one step of the lane, so delivery order is id order; a join's read of the store never
/// runs between another event's append and its delivery.
final class RoomLane: Sendable {
    /// Most jobs waiting or running at once: past it a room request is refused with the
    /// retriable `store_full` (the Swift client retries a refused join with backoff).
    let maxBacklog: Int

    private let queue: DispatchQueue
    private let backlog = Locked(0)
    /// Keys of `submitOnce` jobs queued and not started yet.
    private let waiting = Locked(Set<String>())

    /// Creates a lane.
    ///
    /// - Parameters:
    ///   - label: the queue's label (seen in debuggers and backtraces).
    ///   - maxBacklog: most jobs waiting or running at once (at least 1).
    init(label: String = "RealtimeServer.RoomLane", maxBacklog: Int) {
        queue = DispatchQueue(label: label)
        self.maxBacklog = max(1, maxBacklog)
    }

    /// Queues `job`, unless `maxBacklog` jobs wait already.
    ///
    /// - Returns: whether the job was queued (`false`: the caller refuses the request).
    func submit(_ job: @escaping @Sendable () -> Void) -> Bool {
        let admitted = backlog.withLock { count -> Bool in
            guard count < maxBacklog else { return false }
            count += 1
            return true
        }
        guard admitted else { return false }
        queue.async { [backlog] in
            job()
            backlog.withLock { $0 -= 1 }
        }
        return true
    }

    /// Queues `job` under `key`, unless a job with that key is queued and not started yet (or
    /// the lane is full): periodic work (a sweep's check, a room's catch-up) never piles up
    /// behind a store that does not answer. The key is free again as the job starts, so what
    /// changes while it runs is caught by the next one.
    ///
    /// - Returns: whether `job` was queued.
    @discardableResult
    func submitOnce(_ key: String, _ job: @escaping @Sendable () -> Void) -> Bool {
        guard waiting.withLock({ $0.insert(key).inserted }) else { return false }
        let queued = submit { [waiting] in
            waiting.withLock { _ = $0.remove(key) }
            job()
        }
        if !queued { waiting.withLock { _ = $0.remove(key) } }
        return queued
    }

    /// Runs `body` on the lane and waits for its answer, unless `maxBacklog` jobs wait
    /// already: for callers that may wait (the HTTP API's handlers, an embedding app), never
    /// from the lane itself or under the hub's lock.
    ///
    /// - Returns: `body`'s answer, or `nil` when the lane was full (`body` not run).
    /// - Throws: what `body` throws.
    func perform<Value: Sendable, Failure: Error>(_ body: @Sendable () throws(Failure) -> Value) throws(Failure) -> Value? {
        let admitted = backlog.withLock { count -> Bool in
            guard count < maxBacklog else { return false }
            count += 1
            return true
        }
        guard admitted else { return nil }
        defer { backlog.withLock { $0 -= 1 } }
        let result = queue.sync { () -> Result<Value, Failure> in
            do throws(Failure) { return .success(try body()) } catch { return .failure(error) }
        }
        return try result.get()
    }

    /// Jobs waiting or running now.
    var depth: Int { backlog.withLock { $0 } }
}

/// Work a client's request leaves for the lane once the hub's lock is released.
struct LaneJob: Sendable {
    /// The work, run on the lane.
    var run: @Sendable () -> Void
    /// Run instead when the lane is full: the request's refusal.
    var refused: @Sendable () -> Void
}
