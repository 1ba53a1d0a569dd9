#if canImport(Glibc)
import Glibc
#endif

/// `SIGPIPE` kept from ending the process during one blocking write (POSIX: a write to a pipe
/// or socket whose reader is gone raises it, and its default action terminates the process).
public enum PipeSignal {
    /// Runs `body` with `SIGPIPE` blocked on this thread; a `SIGPIPE` that `body` raised is
    /// consumed (one already pending before is left for the process), then the thread's
    /// previous signal mask is restored. The write itself then fails with `EPIPE`.
    ///
    /// - Throws: what `body` throws.
    public static func suppressed<Result, Failure: Error>(_ body: () throws(Failure) -> Result) throws(Failure) -> Result {
        var pipeSignal = sigset_t()
        sigemptyset(&pipeSignal)
        sigaddset(&pipeSignal, SIGPIPE)
        var previousMask = sigset_t()
        pthread_sigmask(SIG_BLOCK, &pipeSignal, &previousMask)
        var pending = sigset_t()
        sigpending(&pending)
        let wasPending = sigismember(&pending, SIGPIPE) == 1
        defer {
            if !wasPending {
                var none = timespec(tv_sec: 0, tv_nsec: 0)
                while sigtimedwait(&pipeSignal, nil, &none) == SIGPIPE {}
            }
            pthread_sigmask(SIG_SETMASK, &previousMask, nil)
        }
        return try body()
    }
}
