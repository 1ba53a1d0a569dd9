import Dispatch

/// A `TaskExecutor` on a concurrent Dispatch queue of its own instead of the shared cooperative
/// pool: work started with `Task(executorPreference:)` on it runs even while every pool thread
/// is busy or blocked (an app, or a test, waiting synchronously on something that needs this
/// work done). HTTP request handlers and the realtime client's authorisations run here.
public final class DispatchTaskExecutor: TaskExecutor {
    private let queue: DispatchQueue

    /// Creates an executor.
    ///
    /// - Parameter label: the Dispatch queue's label (seen in debuggers and backtraces).
    public init(label: String) {
        queue = DispatchQueue(label: label, attributes: .concurrent)
    }

    /// Runs `job` on the queue.
    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// The executor HTTP request handlers of every listener share.
    static let http = DispatchTaskExecutor(label: "WebSocket.http")
}
