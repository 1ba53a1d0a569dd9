import Foundation
import SystemSupport

/// One dedicated thread that joins a network namespace and runs jobs in it, one at a time.
///
/// A network namespace belongs to a thread, not a process (`setns(2)` with `CLONE_NEWNET`
/// changes only the calling thread), and every socket takes the namespace of the thread that
/// creates it. Jobs therefore never run on Dispatch's shared pool, whose threads would carry the
/// namespace into unrelated work. The thread starts with the first job and ends on ``end()``.
final class NamespaceThread: Sendable {
    /// Runs a job (`nil`) or tells it why it will not run.
    private typealias Work = @Sendable (NetworkLabError?) -> Void

    /// A queued call of ``run(_:)``; its caller waits on it.
    private final class Job: Sendable {
        private let work: Locked<Work?>
        private let done = DispatchSemaphore(value: 0)

        init(_ work: @escaping Work) {
            self.work = Locked(work)
        }

        /// Runs or fails the work, releases it, and only then wakes the caller: the caller's
        /// `withoutActuallyEscaping` traps if the closure is still referenced when it returns.
        func finish(failure: NetworkLabError?) {
            var work = self.work.withLock { work in
                defer { work = nil }
                return work
            }
            work?(failure)
            work = nil
            done.signal()
        }

        func wait() {
            done.wait()
        }
    }

    private enum Worker {
        case notStarted
        case starting
        case running(pthread_t)
        case failed(errno: Int32)
    }

    private struct State {
        var worker = Worker.notStarted
        var jobs: [Job] = []
        var isSleeping = false
        var isClosed = false
    }

    private enum Next {
        case run(Job)
        case sleep
        case exit
    }

    /// The namespace's bind mount, as `ip netns add` creates it.
    let path: String
    private let state = Locked(State())
    /// Signalled once for every time the worker goes to sleep with nothing to do.
    private let wakeUp = DispatchSemaphore(value: 0)

    init(path: String) {
        self.path = path
    }

    /// Runs `body` on the thread and returns its result; runs it inline when already there.
    func run<T: Sendable>(_ body: @Sendable () throws -> T) throws -> T {
        let (isClosed, isWorkerThread) = state.withLock { state in
            guard case .running(let thread) = state.worker else { return (state.isClosed, false) }
            return (state.isClosed, pthread_equal(thread, pthread_self()) != 0)
        }
        if isClosed { throw NetworkLabError.closed }
        // A job that calls back into its own namespace would wait for itself forever.
        if isWorkerThread { return try body() }

        // The caller blocks until the job has finished and released its closure (`Job.finish`),
        // so the closure never outlives this call.
        return try withoutActuallyEscaping(body) { body in
            let result = Locked<Result<T, any Error>?>(nil)
            let job = Job { failure in
                if let failure {
                    result.withLock { $0 = .failure(failure) }
                } else {
                    let outcome = Result { try body() }
                    result.withLock { $0 = outcome }
                }
            }
            try submit(job)
            job.wait()
            guard let outcome = result.withLock({ $0 }) else { preconditionFailure("a finished job left no result") }
            return try outcome.get()
        }
    }

    /// Fails waiting jobs with ``NetworkLabError/closed`` and lets the thread end after the job
    /// it is running, if any. Does not wait for that job, so it is safe to call from one.
    func end() {
        let (abandoned, wake) = state.withLock { state -> ([Job], Bool) in
            guard !state.isClosed else { return ([], false) }
            state.isClosed = true
            let jobs = state.jobs
            state.jobs = []
            let wake = state.isSleeping
            state.isSleeping = false
            return (jobs, wake)
        }
        for job in abandoned {
            job.finish(failure: .closed)
        }
        if wake { wakeUp.signal() }
    }

    private func submit(_ job: Job) throws {
        enum Action { case start, wake, none }
        let action = try state.withLock { state throws(NetworkLabError) -> Action in
            if state.isClosed { throw .closed }
            switch state.worker {
            case .failed(let errno):
                throw .setnsFailed(errno: errno)
            case .notStarted:
                state.jobs.append(job)
                state.worker = .starting
                return .start
            case .starting, .running:
                state.jobs.append(job)
                guard state.isSleeping else { return .none }
                state.isSleeping = false
                return .wake
            }
        }
        switch action {
        case .start:
            let thread = Thread { self.main() }
            // Linux truncates thread names to 15 bytes.
            thread.name = "birdlab netns"
            thread.start()
        case .wake:
            wakeUp.signal()
        case .none:
            break
        }
    }

    private func main() {
        if let errno = joinNamespace() {
            let abandoned = state.withLock { state in
                state.worker = .failed(errno: errno)
                let jobs = state.jobs
                state.jobs = []
                return jobs
            }
            for job in abandoned {
                job.finish(failure: .setnsFailed(errno: errno))
            }
            return
        }
        let thread = pthread_self()
        state.withLock { $0.worker = .running(thread) }

        while true {
            switch nextJob() {
            case .run(let job):
                job.finish(failure: nil)
            case .sleep:
                wakeUp.wait()
            case .exit:
                return
            }
        }
    }

    private func nextJob() -> Next {
        state.withLock { state in
            if !state.jobs.isEmpty { return .run(state.jobs.removeFirst()) }
            if state.isClosed { return .exit }
            state.isSleeping = true
            return .sleep
        }
    }

    /// Joins the namespace at `path`; returns `errno` on failure.
    private func joinNamespace() -> Int32? {
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { return errno }
        defer { close(descriptor) }
        guard let setns = Self.setns else { return ENOSYS }
        guard setns(descriptor, Self.cloneNewNet) == 0 else { return errno }
        return nil
    }

    /// `CLONE_NEWNET` from `<linux/sched.h>`, which Glibc's Swift module does not import.
    private static let cloneNewNet: Int32 = 0x4000_0000

    /// glibc's `setns(2)` wrapper, declared only under `_GNU_SOURCE`, which the Glibc module is
    /// not built with; looking the symbol up keeps this target free of a C shim.
    private static let setns: (@convention(c) (Int32, Int32) -> Int32)? = {
        // RTLD_DEFAULT is a null handle in glibc: search the global symbol scope.
        guard let symbol = dlsym(nil, "setns") else { return nil }
        return unsafeBitCast(symbol, to: (@convention(c) (Int32, Int32) -> Int32).self)
    }()
}
