#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The package's one way to make a system call that may be interrupted: it retries `EINTR`
/// and hands back the `errno` of a failure at once, so no caller reads `errno` late (after
/// another call overwrote it). swift-nio's `syscall(blocking:where:_:)` does the same.
package enum SystemCall {
    /// Calls `body` until it returns something other than -1 with `errno` `EINTR`.
    ///
    /// - Parameter body: the call; -1 means failure, with `errno` set (POSIX).
    /// - Returns: the call's result, or the `errno` of its failure.
    package static func retryingInterrupts<Result: FixedWidthInteger>(_ body: () -> Result) -> Swift.Result<Result, SystemCallError> {
        while true {
            let result = body()
            if result != -1 { return .success(result) }
            let code = errno
            if code == EINTR { continue }
            return .failure(SystemCallError(errno: code))
        }
    }
}

/// A failed system call's `errno`.
package struct SystemCallError: Error, Hashable, Sendable {
    package let errno: Int32
    package init(errno: Int32) { self.errno = errno }
}

/// Starts a detached POSIX thread running `body`: the package's one way to get a thread of its
/// own (a blocking reader, a process reaper), not one of Dispatch's or the cooperative pool's.
///
/// - Returns: 0, or the `pthread_create` error (`EAGAIN`: no more threads).
package func startDetachedThread(_ body: @escaping @Sendable () -> Void) -> Int32 {
    final class Body {
        let run: @Sendable () -> Void
        init(_ run: @escaping @Sendable () -> Void) { self.run = run }
    }
    let context = Unmanaged.passRetained(Body(body)).toOpaque()
    var thread = pthread_t()
    let result = pthread_create(&thread, nil, { context in
        Unmanaged<Body>.fromOpaque(context!).takeRetainedValue().run()
        return nil
    }, context)
    guard result == 0 else {
        Unmanaged<Body>.fromOpaque(context).release()
        return result
    }
    pthread_detach(thread)
    return 0
}

/// Runs blocking `body` on a detached thread of its own (`startDetachedThread`) and returns its
/// value to the awaiting task, so the cooperative pool's few threads are never blocked by it.
///
/// - Returns: `body`'s value, or the `pthread_create` error when no thread could be started.
package func onDetachedThread<Value: Sendable>(_ body: @escaping @Sendable () -> Value) async -> Result<Value, SystemCallError> {
    await withCheckedContinuation { continuation in
        let started = startDetachedThread { continuation.resume(returning: .success(body())) }
        if started != 0 { continuation.resume(returning: .failure(SystemCallError(errno: started))) }
    }
}
