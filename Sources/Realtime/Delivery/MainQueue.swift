import Dispatch

/// Whether code runs on the main queue, the main actor's executor.
///
/// `Thread.isMainThread` cannot tell: after `dispatchMain()`, which ends the main thread with
/// `pthread_exit` on Linux (libdispatch), the main queue is served by a worker thread. A
/// room's main-actor handler checked the thread, so with `.main` as the delivery queue every
/// event was queued to main a second time, after the items the outbox delivered next (state
/// changes, `ready()`), and at the cost of a queued block per event.
enum MainQueue {
    private static let key = DispatchSpecificKey<Bool>()
    /// Marks the main queue once, before the first check.
    private static let marked: Void = DispatchQueue.main.setSpecific(key: key, value: true)

    /// Whether the caller runs on the main queue, on whichever thread serves it.
    static var isCurrent: Bool {
        _ = marked
        return DispatchQueue.getSpecific(key: key) == true
    }
}
