import Dispatch
import Glibc

/// Ends the process with `status` on SIGINT or SIGTERM, handled on the main queue (so the
/// signal does not kill it mid-write), for a sample that then calls `dispatchMain()`.
///
/// - Parameter cleanup: run on the main queue before `exit`, e.g. to stop a server.
/// - Returns: the two signal sources; keep them (a global) for as long as the process runs.
public func exitOnTermination(status: Int32 = 0, cleanup: @escaping @Sendable () -> Void = {}) -> [any DispatchSourceSignal] {
    [SIGINT, SIGTERM].map { number in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .main)
        source.setEventHandler {
            cleanup()
            exit(status)
        }
        source.resume()
        return source
    }
}
