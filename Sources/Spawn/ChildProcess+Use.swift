import Dispatch
import Glibc
import SystemSupport

/// Running to completion, reading output, standard input, signals and exit.
extension ChildProcess {
    // MARK: Running a program to completion

    /// Runs `executable` with `arguments` to completion and returns how it ended and what it
    /// wrote.
    ///
    /// Standard output and standard error are piped and read in full; standard input gets
    /// `standardInput` and is then closed (`/dev/null` when `nil`).
    ///
    /// - Parameters:
    ///   - executable: the program: a path containing `/`, or a name looked up in `PATH`.
    ///   - arguments: the arguments after the program name, not through a shell.
    ///   - environment: variables added to, or replaced in, this process's environment.
    ///   - workingDirectory: the child's working directory; `nil` keeps this process's.
    ///   - standardInput: text written to the child's standard input before it is closed;
    ///     `nil` connects it to `/dev/null`.
    ///   - timeout: how long the program may run; `nil` (the default) waits as long as it takes.
    ///     When it passes, the child's process group (or the child) gets `SIGKILL`, it is reaped,
    ///     and ``ChildProcessError/timedOut(waitingFor:timeout:)`` is thrown.
    /// - Returns: the termination and both outputs. A non-zero exit is not an error here: check
    ///   ``Result/termination`` or ``Result/status``.
    /// - Throws: ``ChildProcessError/invalidArgument(_:)``,
    ///   ``ChildProcessError/spawnFailed(executable:errno:)`` (see ``init(_:_:environment:workingDirectory:standardInput:standardOutput:standardError:newProcessGroup:onLine:onExit:)``),
    ///   ``ChildProcessError/timedOut(waitingFor:timeout:)`` when `timeout` passes.
    ///   A child that exits without reading all of `standardInput` is not an error.
    package static func run(
        _ executable: String,
        _ arguments: [String] = [],
        environment: [String: String] = [:],
        workingDirectory: String? = nil,
        standardInput: String? = nil,
        timeout: Duration? = nil
    ) throws(ChildProcessError) -> Result {
        let child = try ChildProcess(
            executable,
            arguments,
            environment: environment,
            workingDirectory: workingDirectory,
            standardInput: standardInput == nil ? .nullDevice : .pipe
        )
        if let standardInput {
            // A child that exits early leaves the rest unread (EPIPE): its status tells.
            try? child.write(standardInput)
            child.closeStandardInput()
        }
        let started = ContinuousClock.now
        do {
            let output = try child.readAllOutput(timeout: timeout)
            let termination = try child.waitUntilExit(timeout: timeout.map { $0 - (ContinuousClock.now - started) })
            return Result(termination: termination, standardOutput: output.standardOutput, standardError: output.standardError)
        } catch {
            child.signal(SIGKILL, toProcessGroup: child.hasOwnProcessGroup)
            child.waitUntilExit()
            if case .timedOut(let what, _) = error, let timeout { throw .timedOut(waitingFor: what, timeout: timeout) }
            throw error
        }
    }

    /// `run`, for async code: the child is waited for on a thread of its own, so the calling
    /// task's thread (one of the cooperative pool's few) is not blocked meanwhile. Tests on a
    /// 2-core machine stalled each other when several waited on children synchronously.
    ///
    /// - Parameters: as `run`.
    /// - Returns: as `run`.
    /// - Throws: as `run`.
    package static func runDetached(
        _ executable: String,
        _ arguments: [String] = [],
        environment: [String: String] = [:],
        workingDirectory: String? = nil,
        standardInput: String? = nil,
        timeout: Duration? = nil
    ) async throws(ChildProcessError) -> Result {
        let outcome = await onDetachedThread {
            Swift.Result { () throws(ChildProcessError) -> Result in
                try run(executable, arguments, environment: environment, workingDirectory: workingDirectory,
                        standardInput: standardInput, timeout: timeout)
            }
        }
        switch outcome {
        case .success(let result): return try result.get()
        case .failure(let error): throw .spawnFailed(executable: executable, errno: error.errno)
        }
    }

    // MARK: State

    /// How the child ended, once it has exited and been reaped; `nil` while it runs (a child
    /// that exited but is not reaped yet is still `nil`, briefly).
    package var termination: Termination? {
        shared.state.withLock { $0.termination }
    }

    /// Whether the child has not been reaped yet: `termination == nil`.
    package var isRunning: Bool {
        termination == nil
    }

    /// Every complete line the child wrote on its standard output so far, without the `\n`;
    /// after end of file also a last line without a newline. Empty unless standard output is
    /// piped.
    package var outputLines: [String] {
        shared.state.withLock { $0.output.lines }
    }

    /// Every complete line the child wrote on its standard error so far (see ``outputLines``).
    package var errorLines: [String] {
        shared.state.withLock { $0.error.lines }
    }

    // MARK: Reading output

    /// Waits until the child writes a line satisfying `predicate` on `stream` and returns it.
    ///
    /// Lines already written count: the first line at index `startingAt` or later (0-based,
    /// counting every line of that stream) that satisfies `predicate` is returned, however long
    /// ago it came.
    ///
    /// - Parameters:
    ///   - stream: which output to watch; it must be piped.
    ///   - startingAt: how many lines of that stream to skip (those that came before the
    ///     action under test, say); 0 by default.
    ///   - timeout: the longest wait.
    ///   - predicate: tested on each line, without its `\n`.
    /// - Returns: the first matching line.
    /// - Throws: ``ChildProcessError/timedOut(waitingFor:timeout:)`` when no such line came in
    ///   `timeout`; ``ChildProcessError/outputEnded(_:lines:)`` when the stream reached end of
    ///   file (or is not piped) without one.
    package func waitForLine(
        in stream: Output = .standardOutput,
        startingAt: Int = 0,
        timeout: Duration,
        where predicate: (String) -> Bool
    ) throws(ChildProcessError) -> String {
        try shared.wait(timeout: timeout, for: "a matching line on \(stream)") { state in
            let buffer = state[stream]
            if let line = buffer.lines.dropFirst(max(0, startingAt)).first(where: predicate) {
                return .ready(line)
            }
            return buffer.isOpen ? .pending : .failed(.outputEnded(stream, lines: buffer.lines))
        }
    }

    /// Waits until the child has written at least `count` lines on `stream` and returns all its
    /// lines so far.
    ///
    /// - Parameters:
    ///   - count: how many lines to wait for.
    ///   - stream: which output to watch; it must be piped.
    ///   - timeout: the longest wait.
    /// - Returns: every line of `stream` so far, at least `count` of them.
    /// - Throws: ``ChildProcessError/timedOut(waitingFor:timeout:)`` when fewer came in
    ///   `timeout`; ``ChildProcessError/outputEnded(_:lines:)`` when the stream ended with fewer.
    package func waitForLines(count: Int, in stream: Output = .standardOutput, timeout: Duration) throws(ChildProcessError) -> [String] {
        try shared.wait(timeout: timeout, for: "\(count) lines on \(stream)") { state in
            let buffer = state[stream]
            if buffer.lines.count >= count { return .ready(buffer.lines) }
            return buffer.isOpen ? .pending : .failed(.outputEnded(stream, lines: buffer.lines))
        }
    }

    /// Waits until both piped output streams reach end of file (normally: the child exited)
    /// and returns everything written on them.
    ///
    /// - Parameter timeout: the longest wait; `nil` waits as long as it takes.
    /// - Returns: standard output and standard error, decoded as UTF-8 (invalid bytes replaced);
    ///   an empty string for a stream that is not piped.
    /// - Throws: ``ChildProcessError/timedOut(waitingFor:timeout:)`` when the output is still
    ///   open after `timeout`.
    package func readAllOutput(timeout: Duration? = nil) throws(ChildProcessError) -> (standardOutput: String, standardError: String) {
        try shared.wait(timeout: timeout, for: "the end of the output") { state in
            guard !state.output.isOpen, !state.error.isOpen else { return .pending }
            return .ready((String(decoding: state.output.bytes, as: UTF8.self), String(decoding: state.error.bytes, as: UTF8.self)))
        }
    }

    // MARK: Standard input

    /// Writes `text` as UTF-8 to the child's standard input.
    ///
    /// Blocks while the pipe is full (64 KiB on Linux) until the child reads.
    ///
    /// - Parameter text: what to write; add the `\n` for a line.
    /// - Throws: ``ChildProcessError/writeFailed(errno:)``: `EPIPE` when the child no longer
    ///   reads it (exited, or closed it), `EBADF` when standard input is not piped or
    ///   ``closeStandardInput()`` was called. `SIGPIPE` is kept from this process.
    package func write(_ text: String) throws(ChildProcessError) {
        try write(Array(text.utf8))
    }

    /// Writes `bytes` to the child's standard input (see ``write(_:)``).
    ///
    /// - Parameter bytes: what to write.
    /// - Throws: ``ChildProcessError/writeFailed(errno:)`` as ``write(_:)`` does.
    package func write(_ bytes: [UInt8]) throws(ChildProcessError) {
        try input.withLock { descriptor throws(ChildProcessError) in
            guard descriptor >= 0 else { throw .writeFailed(errno: EBADF) }
            let failure = Self.writeWithoutSIGPIPE(bytes, to: descriptor)
            if failure != 0 { throw .writeFailed(errno: failure) }
        }
    }

    /// Closes this process's end of the child's standard input: the child reads end of file.
    /// Does nothing when it is not piped or already closed.
    package func closeStandardInput() {
        input.withLock { descriptor in
            if descriptor >= 0 { close(descriptor) }
            descriptor = -1
        }
    }

    // MARK: Signals and exit

    /// Sends `signal` to the child, or to its whole process group.
    ///
    /// - Parameters:
    ///   - signal: the signal number (`SIGTERM`, `SIGINT`, `SIGKILL`, `SIGSTOP`, `SIGCONT`…).
    ///   - toProcessGroup: send it to the child's process group (the child and whatever it
    ///     started and did not move elsewhere); only when ``hasOwnProcessGroup``, otherwise the
    ///     child alone gets it.
    /// - Returns: whether it was sent: false once the child has been reaped (its pid may belong
    ///   to another process by then), or when `kill(2)` failed.
    @discardableResult
    package func signal(_ signal: Int32, toProcessGroup: Bool = false) -> Bool {
        let target = toProcessGroup && hasOwnProcessGroup ? -processIdentifier : processIdentifier
        return shared.state.withLock { state in
            guard state.termination == nil else { return false }
            return kill(target, signal) == 0
        }
    }

    /// Waits as long as it takes for the child to exit and returns how it ended.
    ///
    /// Returns as soon as the child is reaped; piped output may still be being read (use
    /// ``readAllOutput(timeout:)`` for all of it).
    ///
    /// - Returns: how the child ended.
    @discardableResult
    package func waitUntilExit() -> Termination {
        // Without a timeout the only outcome is `.ready`.
        (try? waitUntilExit(timeout: nil)) ?? .statusLost
    }

    /// Waits at most `timeout` for the child to exit and returns how it ended.
    ///
    /// - Parameter timeout: the longest wait; `nil` waits as long as it takes.
    /// - Returns: how the child ended.
    /// - Throws: ``ChildProcessError/timedOut(waitingFor:timeout:)`` when it is still running
    ///   after `timeout` (it is left running: signal it if it should end).
    @discardableResult
    package func waitUntilExit(timeout: Duration?) throws(ChildProcessError) -> Termination {
        try shared.wait(timeout: timeout, for: "\(executable) to exit") { state in
            state.termination.map { .ready($0) } ?? .pending
        }
    }
}
