#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Dispatch
import SystemSupport

/// Owns one socket descriptor and the Dispatch sources watching it, and closes the descriptor
/// exactly once: after the cancel handlers of all its sources have run, as Dispatch requires
/// (closing earlier lets a reused descriptor number reach a stale source).
package final class SocketHandle: Sendable {
    private struct State {
        var read: (any DispatchSourceRead)?
        var write: (any DispatchSourceWrite)?
        /// Sources created and not yet through their cancel handler.
        var liveSources = 0
        var closeRequested = false
        var closed = false
    }

    package let fd: Int32
    private let state = Locked(State())
    /// Left when the descriptor is closed.
    private let descriptorOpen = DispatchGroup()

    package init(fd: Int32) {
        self.fd = fd
        descriptorOpen.enter()
    }

    deinit {
        // Reached only when `close()` was never called and no source holds us.
        let open = state.withLock { !$0.closed && $0.liveSources == 0 }
        if open { closeDescriptor() }
    }

    /// Blocks until the descriptor is closed (after `close()`, once the sources' cancel
    /// handlers ran): a listener's port is free again when this returns. Never call it on the
    /// sources' queue.
    package func waitUntilClosed() {
        descriptorOpen.wait()
    }

    /// Sets `O_NONBLOCK` and `FD_CLOEXEC`.
    ///
    /// - Throws: `TCPConnectionError.system` with the `fcntl` errno.
    package func makeNonBlocking() throws(TCPConnectionError) {
        let flags = fcntl(fd, F_GETFL)
        guard flags >= 0, fcntl(fd, F_SETFL, flags | O_NONBLOCK) == 0 else {
            throw .system(operation: "fcntl", errno: errno)
        }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
    }

    /// Starts the read source; `handler` runs on `queue` whenever the socket is readable.
    package func startReading(on queue: DispatchQueue, _ handler: @escaping @Sendable () -> Void) {
        guard state.withLock({ !$0.closeRequested && $0.read == nil }) else { return }
        let source = DispatchSource.makeReadSource(fileDescriptor: fd, queue: queue)
        start(source, handler) { $0.read = source }
    }

    /// Starts the write source unless it runs; `handler` runs on `queue` when writable.
    package func startWriting(on queue: DispatchQueue, _ handler: @escaping @Sendable () -> Void) {
        guard state.withLock({ !$0.closeRequested && $0.write == nil }) else { return }
        let source = DispatchSource.makeWriteSource(fileDescriptor: fd, queue: queue)
        start(source, handler) { $0.write = source }
    }

    private func start(_ source: any DispatchSourceProtocol, _ handler: @escaping @Sendable () -> Void, store: (inout State) -> Void) {
        source.setEventHandler(handler: handler)
        source.setCancelHandler { [self] in sourceCancelled() }
        // Counted before it can be cancelled, so the descriptor outlives every cancel handler.
        let closing = state.withLock { state -> Bool in
            state.liveSources += 1
            if !state.closeRequested { store(&state) }
            return state.closeRequested
        }
        source.resume()
        if closing { source.cancel() }
    }

    /// Stops the write source (nothing is left to write, or the connect completed).
    package func stopWriting() {
        state.withLock { state in
            defer { state.write = nil }
            return state.write
        }?.cancel()
    }

    /// Cancels the sources and closes the descriptor once they are gone. Idempotent.
    package func close() {
        let (read, write, closeNow) = state.withLock { state -> ((any DispatchSourceRead)?, (any DispatchSourceWrite)?, Bool) in
            guard !state.closeRequested else { return (nil, nil, false) }
            state.closeRequested = true
            defer {
                state.read = nil
                state.write = nil
            }
            let closeNow = state.liveSources == 0
            if closeNow { state.closed = true }
            return (state.read, state.write, closeNow)
        }
        read?.cancel()
        write?.cancel()
        if closeNow { closeDescriptor() }
    }

    private func sourceCancelled() {
        let closeNow = state.withLock { state -> Bool in
            state.liveSources -= 1
            guard state.closeRequested, state.liveSources == 0, !state.closed else { return false }
            state.closed = true
            return true
        }
        if closeNow { closeDescriptor() }
    }

    private func closeDescriptor() {
        Syscall.close(fd)
        descriptorOpen.leave()
    }
}
