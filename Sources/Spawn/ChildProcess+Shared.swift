import Dispatch
import Glibc
import SystemSupport

// MARK: - Shared state of the child and its two threads

extension ChildProcess {
    /// One piped output stream: every byte, the complete lines, the incomplete rest.
    struct OutputBuffer {
        var bytes: [UInt8] = []
        var lines: [String] = []
        var partial: [UInt8] = []
        /// Piped and not at end of file yet.
        var isOpen: Bool
    }

    struct State {
        var output: OutputBuffer
        var error: OutputBuffer
        var termination: Termination?
        /// The reader thread is done: every `onLine` call has returned (or there is no reader).
        var readerFinished: Bool
        /// Threads blocked in ``Shared/wait(timeout:for:_:)``; each is woken by any change.
        var waiters: [UInt64: DispatchSemaphore] = [:]
        var nextWaiter: UInt64 = 0

        subscript(stream: Output) -> OutputBuffer {
            stream == .standardOutput ? output : error
        }

        /// Changes one stream's buffer in place (no copy of the bytes kept so far).
        mutating func change<T>(_ stream: Output, _ body: (inout OutputBuffer) -> T) -> T {
            switch stream {
            case .standardOutput: body(&output)
            case .standardError: body(&error)
            }
        }
    }

    /// What a wait's condition found.
    enum Outcome<Value> {
        case ready(Value)
        case pending
        case failed(ChildProcessError)
    }

    /// The state the child's threads update; held by them and by the `ChildProcess`, so the
    /// `ChildProcess` itself can go (and kill the child) while they run.
    final class Shared: Sendable {
        let pid: pid_t
        let state: Locked<State>

        init(pid: pid_t, outputPiped: Bool, errorPiped: Bool) {
            self.pid = pid
            state = Locked(State(
                output: OutputBuffer(isOpen: outputPiped),
                error: OutputBuffer(isOpen: errorPiped),
                readerFinished: !outputPiped && !errorPiped
            ))
        }

        /// Changes the state and wakes every waiter to look again.
        func update<T>(_ change: (inout State) -> T) -> T {
            let (result, waiters) = state.withLock { state in
                let result = change(&state)
                let waiters = state.waiters.values
                state.waiters.removeAll()
                return (result, waiters)
            }
            for waiter in waiters { waiter.signal() }
            return result
        }

        /// Appends bytes read from `stream` and returns the lines they completed.
        func append(_ bytes: ArraySlice<UInt8>, from stream: Output) -> [String] {
            update { state in
                state.change(stream) { buffer in
                    buffer.bytes.append(contentsOf: bytes)
                    buffer.partial.append(contentsOf: bytes)
                    var lines: [String] = []
                    var start = buffer.partial.startIndex
                    while let newline = buffer.partial[start...].firstIndex(of: UInt8(ascii: "\n")) {
                        lines.append(String(decoding: buffer.partial[start..<newline], as: UTF8.self))
                        start = newline + 1
                    }
                    buffer.partial.removeSubrange(..<start)
                    buffer.lines.append(contentsOf: lines)
                    return lines
                }
            }
        }

        /// Marks `streams` as at end of file; returns the last lines that had no newline.
        @discardableResult
        func finishReading(all streams: [Output]) -> [(Output, String)] {
            update { state in
                var last: [(Output, String)] = []
                for stream in streams {
                    state.change(stream) { buffer in
                        if !buffer.partial.isEmpty {
                            let line = String(decoding: buffer.partial, as: UTF8.self)
                            buffer.lines.append(line)
                            buffer.partial = []
                            last.append((stream, line))
                        }
                        buffer.isOpen = false
                    }
                }
                return last
            }
        }

        /// Blocks until `condition` is ready or failed, or `timeout` passes; the condition is
        /// evaluated under the lock after every change.
        func wait<Value>(
            timeout: Duration?,
            for what: @autoclosure () -> String,
            _ condition: (State) -> Outcome<Value>
        ) throws(ChildProcessError) -> Value {
            let deadline = timeout.map { DispatchTime.now() + .nanoseconds(ChildProcess.nanoseconds($0)) } ?? .distantFuture
            while true {
                let semaphore = DispatchSemaphore(value: 0)
                let (outcome, waiter) = state.withLock { state -> (Outcome<Value>, UInt64?) in
                    let outcome = condition(state)
                    guard case .pending = outcome else { return (outcome, nil) }
                    state.nextWaiter += 1
                    state.waiters[state.nextWaiter] = semaphore
                    return (outcome, state.nextWaiter)
                }
                switch outcome {
                case .ready(let value): return value
                case .failed(let error): throw error
                case .pending: break
                }
                guard semaphore.wait(timeout: deadline) == .timedOut, let waiter else { continue }
                // Gone from the table: a change woke us at the deadline; look once more.
                let stillWaiting = state.withLock { $0.waiters.removeValue(forKey: waiter) != nil }
                if stillWaiting {
                    switch state.withLock({ condition($0) }) {
                    case .ready(let value): return value
                    case .failed(let error): throw error
                    case .pending: throw .timedOut(waitingFor: what(), timeout: timeout ?? .zero)
                    }
                }
            }
        }
    }

    // MARK: The reader thread

    /// Reads the piped output streams until both reach end of file, then closes them.
    static func readOutput(_ streams: [(Output, Int32)], into shared: Shared, onLine: (@Sendable (Output, String) -> Void)?) {
        var open = streams
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while !open.isEmpty {
            var polled = open.map { pollfd(fd: $0.1, events: Int16(POLLIN), revents: 0) }
            let ready = poll(&polled, nfds_t(polled.count), -1)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            var ended: [Int] = []
            for (index, entry) in polled.enumerated() where entry.revents != 0 {
                let (stream, descriptor) = open[index]
                let count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress, $0.count) }
                if count > 0 {
                    let lines = shared.append(buffer[0..<count], from: stream)
                    if let onLine { for line in lines { onLine(stream, line) } }
                } else if count == 0 || (errno != EINTR && errno != EAGAIN) {
                    ended.append(index)
                }
            }
            for index in ended.reversed() {
                let (stream, descriptor) = open.remove(at: index)
                close(descriptor)
                for (stream, line) in shared.finishReading(all: [stream]) { onLine?(stream, line) }
            }
        }
        // Only after a poll failure (never seen): give up on what is left.
        for (_, descriptor) in open { close(descriptor) }
        for (stream, line) in shared.finishReading(all: open.map(\.0)) { onLine?(stream, line) }
        shared.update { $0.readerFinished = true }
    }

    // MARK: The waiting thread

    /// Waits for the child to exit without reaping it (`waitid` with `WNOWAIT`), then reaps it
    /// under the state lock, so that ``signal(_:toProcessGroup:)`` and `deinit`, which check
    /// `termination` under the same lock, never signal a pid that was reused.
    static func waitForExit(of shared: Shared, onExit: (@Sendable (Termination) -> Void)?) {
        var info = siginfo_t()
        let waitError: Int32
        switch SystemCall.retryingInterrupts({ waitid(P_PID, id_t(shared.pid), &info, WEXITED | WNOWAIT) }) {
        case .success: waitError = 0
        case .failure(let error): waitError = error.errno
        }
        let termination = shared.update { state -> Termination in
            var status: Int32 = 0
            var reaped: pid_t = -1
            // The child has exited (a zombie): WNOHANG reaps it at once, never blocking under
            // the lock. ECHILD: someone else reaped it; nothing to collect.
            if waitError == 0 {
                reaped = (try? SystemCall.retryingInterrupts { waitpid(shared.pid, &status, WNOHANG) }.get()) ?? -1
            }
            let termination = reaped == shared.pid ? Self.termination(fromWaitStatus: status) : .statusLost
            state.termination = termination
            return termination
        }
        guard let onExit else { return }
        // After the last line: wait for the reader to reach end of file and deliver it.
        _ = try? shared.wait(timeout: nil, for: "the end of the output") { state in
            state.readerFinished ? .ready(()) : .pending
        }
        onExit(termination)
    }

    /// Decodes a `waitpid` status (`WIFEXITED`, `WEXITSTATUS`, `WTERMSIG` are macros Swift does
    /// not import).
    static func termination(fromWaitStatus status: Int32) -> Termination {
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signaled(signal)
    }
}
