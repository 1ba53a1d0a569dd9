import Dispatch

/// Runs HTTP request handlers on a Dispatch queue of their own instead of the shared
/// cooperative pool, so a request is answered even while every pool thread is busy or
/// blocked (an app, or a test, waiting synchronously on something that needs this answer).
final class HTTPHandlerExecutor: TaskExecutor {
    private let queue = DispatchQueue(label: "WebSocket.http", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// The executor all listeners share.
    static let shared = HTTPHandlerExecutor()
}
