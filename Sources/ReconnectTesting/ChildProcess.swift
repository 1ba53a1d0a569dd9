import Dispatch
import Glibc
import Locking

/// A child process started with `posix_spawn(3)`: the package's one way to run another program
/// (iproute2's `ip`, the Python peers, `openssl`, Prosody, the sample executables).
///
/// ## Why not Foundation's `Process`
///
/// On Linux, `Process.run()` of swift-corelibs-foundation (Swift 6.3.1) finds the highest open
/// descriptor by listing `/proc/self/fd` and over-reads a `dirent` while doing so
/// (swift-corelibs-foundation issue #5472). The test process crashed with SIGSEGV in there on CI,
/// more often the more descriptors were open. This type never lists `/proc/self/fd`: the child
/// closes every inherited descriptor above 2 itself, with
/// `posix_spawn_file_actions_addclosefrom_np(3)` (glibc 2.34 or later; Debian 12 has 2.36).
///
/// `Process` also kept descriptors open: one whose `waitUntilExit()` is never called (the `ip`
/// runner waited for its `terminationHandler` instead) stays retained by its run-loop source,
/// and so do the read ends of its output pipes, two descriptors per run. With one `ip` command
/// per network change that came to about 1,600 open pipes by the end of a test run, which is how
/// the crash saw descriptors numbered above 1,380. And it starts children with the spawning
/// thread's signal mask: from a Dispatch worker thread, with SIGINT and SIGTERM blocked.
///
/// Mixing the two runners is not safe either: a child of one inherits the pipe ends of the
/// other's children and keeps them open, so their readers never see end of file. Every child
/// process of the package therefore goes through this type.
///
/// ## What the child gets
///
/// - Standard input, output and error each inherited from this process, connected to
///   `/dev/null`, or connected to a pipe (see ``Redirection``). Pipes are made with
///   `pipe2(O_CLOEXEC)`, so no other child, whoever starts it, inherits them.
/// - No other descriptor: everything from 3 up is closed in the child before `exec`.
/// - This process's environment plus the additions given, and its working directory unless one
///   is given.
/// - An empty signal mask and the default action for every signal, whichever thread spawned it
///   (Dispatch's worker threads block most signals, and a mask is inherited across `exec`).
/// - Its own process group (unless asked otherwise), so ``signal(_:toProcessGroup:)`` can reach
///   the programs it starts in turn, and a Ctrl-C meant for the test run does not reach it.
///
/// ## Output, exit and threads
///
/// Piped output is read as it comes by one thread per child, which keeps every byte and splits
/// it into lines (``outputLines`` / ``errorLines``, ``waitForLine(in:startingAt:timeout:where:)``,
/// the `onLine` handler). A second thread per child waits for it to exit with `waitid(P_PID)`
/// and reaps it with `waitpid(pid)`: only this child's pid is ever waited for (never
/// `waitpid(-1)`), and no `SIGCHLD` handler is installed. A child is always reaped, whether or
/// not anyone calls ``waitUntilExit()``.
///
/// When the last reference to a `ChildProcess` goes while the child still runs, it is killed
/// with `SIGKILL` (its whole process group when it has its own), so a failing test leaves no
/// process behind.
///
/// All members are safe to call from any thread.
///
/// ```swift
/// let result = try ChildProcess.run("/usr/sbin/ip", ["-j", "link", "show"])
/// guard result.termination == .exited(0) else { … result.standardError … }
///
/// let server = try ChildProcess("/path/to/line-server", ["--port", "0"], standardError: .pipe)
/// let listening = try server.waitForLine(in: .standardError, timeout: .seconds(10)) { $0.contains("listening") }
/// server.signal(SIGTERM)
/// let termination = try server.waitUntilExit(timeout: .seconds(10))
/// ```
public final class ChildProcess: Sendable {
    /// Where one of the child's standard streams (descriptor 0, 1 or 2) goes.
    public enum Redirection: Sendable, Hashable {
        /// The same file as this process's descriptor (the terminal, the CI log).
        case inherit
        /// `/dev/null`: reads see end of file at once, writes are discarded.
        case nullDevice
        /// A pipe to this process: standard input is written with ``ChildProcess/write(_:)``,
        /// output is read and kept by ``ChildProcess``.
        case pipe
    }

    /// One of the child's two output streams.
    public enum Output: Sendable, Hashable, CustomStringConvertible {
        /// Descriptor 1.
        case standardOutput
        /// Descriptor 2.
        case standardError

        /// `stdout` or `stderr`.
        public var description: String {
            switch self {
            case .standardOutput: "stdout"
            case .standardError: "stderr"
            }
        }
    }

    /// How the child ended.
    public enum Termination: Sendable, Hashable, CustomStringConvertible {
        /// It called `exit` (or returned from `main`) with this status, 0...255.
        case exited(Int32)
        /// A signal it did not handle ended it; the associated value is the signal number
        /// (`SIGKILL` is 9).
        case signaled(Int32)
        /// Something else in this process reaped the child first (a `waitpid(-1)` elsewhere), so
        /// its status is unknown. Never happens unless other code reaps children it did not start.
        case statusLost

        /// The exit status, or the signal number when a signal ended the child, as Foundation's
        /// `Process.terminationStatus` reports it; -1 for ``statusLost``.
        public var status: Int32 {
            switch self {
            case .exited(let status): status
            case .signaled(let signal): signal
            case .statusLost: -1
            }
        }

        /// `exit status N`, `signal N`, or `status lost`.
        public var description: String {
            switch self {
            case .exited(let status): "exit status \(status)"
            case .signaled(let signal): "signal \(signal)"
            case .statusLost: "status lost"
            }
        }
    }

    /// What ``run(_:_:environment:workingDirectory:standardInput:timeout:)`` returns: how the
    /// program ended and everything it wrote.
    public struct Result: Sendable, Hashable {
        /// How it ended.
        public var termination: Termination
        /// Its standard output, decoded as UTF-8 (invalid bytes replaced).
        public var standardOutput: String
        /// Its standard error, decoded as UTF-8 (invalid bytes replaced).
        public var standardError: String

        /// ``Termination/status`` of ``termination``: the exit status, or the signal number.
        public var status: Int32 { termination.status }

        /// Creates a result (for tests of code that consumes one).
        ///
        /// - Parameters:
        ///   - termination: how the program ended.
        ///   - standardOutput: what it wrote on descriptor 1.
        ///   - standardError: what it wrote on descriptor 2.
        public init(termination: Termination, standardOutput: String, standardError: String) {
            self.termination = termination
            self.standardOutput = standardOutput
            self.standardError = standardError
        }
    }

    /// The program's path as given to the initializer.
    public let executable: String
    /// The arguments after the program name.
    public let arguments: [String]
    /// The child's process id; it stays reserved for this child until ``termination`` is set.
    public let processIdentifier: pid_t
    /// Whether the child leads a process group of its own (its group id is its pid).
    public let hasOwnProcessGroup: Bool

    private let shared: Shared
    /// This process's end of the child's standard input pipe, -1 when there is none or it is
    /// closed. A lock of its own: a write that blocks on a full pipe must not hold up the reader.
    private let input: Locked<Int32>

    /// Starts `executable` with `arguments`.
    ///
    /// - Parameters:
    ///   - executable: the program. A path containing `/` is used as it is (absolute, or relative
    ///     to this process's working directory); a bare name is looked up in `PATH` as a shell
    ///     would (`posix_spawnp`).
    ///   - arguments: the arguments after the program name (`argv[1...]`; `argv[0]` is
    ///     `executable`). Passed as they are, not through a shell.
    ///   - environment: variables to add to, or replace in, this process's environment; the
    ///     child gets the result. Empty: exactly this process's environment.
    ///   - workingDirectory: the child's working directory; `nil` keeps this process's.
    ///   - standardInput: where descriptor 0 comes from; `.nullDevice` by default, so a child
    ///     never reads the test runner's terminal. With `.pipe`, write with ``write(_:)``
    ///     and end it with ``closeStandardInput()``.
    ///   - standardOutput: where descriptor 1 goes; `.pipe` by default (read it with
    ///     ``outputLines``, ``waitForLine(in:startingAt:timeout:where:)``, ``readAllOutput(timeout:)``).
    ///   - standardError: where descriptor 2 goes; `.pipe` by default.
    ///   - newProcessGroup: whether the child leads a new process group (`POSIX_SPAWN_SETPGROUP`);
    ///     true by default.
    ///   - onLine: called for every line the child writes on a piped output stream, without its
    ///     `\n` (a last line without one is delivered at end of file), in the order read. Runs
    ///     on the child's reader thread, one call at a time; it must not block for long, or the
    ///     child's output backs up.
    ///   - onExit: called once, after the child has been reaped and its piped output has been read
    ///     to the end (so after the last `onLine`), on the child's waiting thread.
    /// - Throws: ``ChildProcessError/invalidArgument(_:)`` for a NUL byte in an argument or
    ///   variable (or `=` in a variable name); ``ChildProcessError/spawnFailed(executable:errno:)``
    ///   when the pipes cannot be made, the program cannot be started (`ENOENT` for a missing
    ///   file, `EACCES` when it is not executable) or its threads cannot be created.
    public init(
        _ executable: String,
        _ arguments: [String] = [],
        environment: [String: String] = [:],
        workingDirectory: String? = nil,
        standardInput: Redirection = .nullDevice,
        standardOutput: Redirection = .pipe,
        standardError: Redirection = .pipe,
        newProcessGroup: Bool = true,
        onLine: (@Sendable (Output, String) -> Void)? = nil,
        onExit: (@Sendable (Termination) -> Void)? = nil
    ) throws(ChildProcessError) {
        for text in [executable] + arguments + environment.values + [workingDirectory ?? ""] where text.utf8.contains(0) {
            throw .invalidArgument("a NUL byte in \(text.debugDescription)")
        }
        for name in environment.keys where name.isEmpty || name.utf8.contains(0) || name.contains("=") {
            throw .invalidArgument("environment variable name \(name.debugDescription)")
        }

        var pipes = Pipes()
        do throws(ChildProcessError) {
            if standardInput == .pipe { pipes.input = try Self.makePipe(for: executable) }
            if standardOutput == .pipe { pipes.output = try Self.makePipe(for: executable) }
            if standardError == .pipe { pipes.error = try Self.makePipe(for: executable) }
        } catch {
            pipes.closeAll()
            throw error
        }

        var pid: pid_t = 0
        let spawnFailure = Self.spawn(
            &pid,
            executable,
            arguments,
            environment: environment,
            workingDirectory: workingDirectory,
            redirections: [standardInput, standardOutput, standardError],
            childEnds: [pipes.input?.read, pipes.output?.write, pipes.error?.write],
            newProcessGroup: newProcessGroup
        )
        // The child has its copies (or was not started): this process keeps only its own ends.
        pipes.closeChildEnds()
        if spawnFailure != 0 {
            pipes.closeAll()
            throw .spawnFailed(executable: executable, errno: spawnFailure)
        }

        self.executable = executable
        self.arguments = arguments
        self.processIdentifier = pid
        self.hasOwnProcessGroup = newProcessGroup
        self.input = Locked(pipes.input?.write ?? -1)
        self.shared = Shared(
            pid: pid,
            outputPiped: pipes.output != nil,
            errorPiped: pipes.error != nil
        )

        var streams: [(Output, Int32)] = []
        if let output = pipes.output { streams.append((.standardOutput, output.read)) }
        if let error = pipes.error { streams.append((.standardError, error.read)) }
        let readable = streams
        let shared = shared
        var threadFailure: Int32 = 0
        if !readable.isEmpty {
            threadFailure = Self.startThread { Self.readOutput(readable, into: shared, onLine: onLine) }
            if threadFailure != 0 {
                for (_, descriptor) in readable { close(descriptor) }
                shared.finishReading(all: readable.map(\.0))
                shared.update { $0.readerFinished = true }
            }
        }
        if threadFailure == 0 {
            threadFailure = Self.startThread { Self.waitForExit(of: shared, onExit: onExit) }
        }
        if threadFailure != 0 {
            // No thread to reap the child: kill and reap it here, then fail.
            kill(pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            shared.update { $0.termination = Self.termination(fromWaitStatus: status) }
            closeStandardInput()
            throw .spawnFailed(executable: executable, errno: threadFailure)
        }
    }

    deinit {
        let (pid, group) = (processIdentifier, hasOwnProcessGroup)
        shared.state.withLock { state in
            // Under the lock that the waiting thread takes to reap: the pid cannot have been
            // reused while `termination` is nil.
            guard state.termination == nil else { return }
            kill(group ? -pid : pid, SIGKILL)
        }
        closeStandardInput()
    }

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
    public static func run(
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

    // MARK: State

    /// How the child ended, once it has exited and been reaped; `nil` while it runs (a child
    /// that exited but is not reaped yet is still `nil`, briefly).
    public var termination: Termination? {
        shared.state.withLock { $0.termination }
    }

    /// Whether the child has not been reaped yet: `termination == nil`.
    public var isRunning: Bool {
        termination == nil
    }

    /// Every complete line the child wrote on its standard output so far, without the `\n`;
    /// after end of file also a last line without a newline. Empty unless standard output is
    /// piped.
    public var outputLines: [String] {
        shared.state.withLock { $0.output.lines }
    }

    /// Every complete line the child wrote on its standard error so far (see ``outputLines``).
    public var errorLines: [String] {
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
    public func waitForLine(
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
    public func waitForLines(count: Int, in stream: Output = .standardOutput, timeout: Duration) throws(ChildProcessError) -> [String] {
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
    public func readAllOutput(timeout: Duration? = nil) throws(ChildProcessError) -> (standardOutput: String, standardError: String) {
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
    public func write(_ text: String) throws(ChildProcessError) {
        try write(Array(text.utf8))
    }

    /// Writes `bytes` to the child's standard input (see ``write(_:)``).
    ///
    /// - Parameter bytes: what to write.
    /// - Throws: ``ChildProcessError/writeFailed(errno:)`` as ``write(_:)`` does.
    public func write(_ bytes: [UInt8]) throws(ChildProcessError) {
        try input.withLock { descriptor throws(ChildProcessError) in
            guard descriptor >= 0 else { throw .writeFailed(errno: EBADF) }
            let failure = Self.writeWithoutSIGPIPE(bytes, to: descriptor)
            if failure != 0 { throw .writeFailed(errno: failure) }
        }
    }

    /// Closes this process's end of the child's standard input: the child reads end of file.
    /// Does nothing when it is not piped or already closed.
    public func closeStandardInput() {
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
    public func signal(_ signal: Int32, toProcessGroup: Bool = false) -> Bool {
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
    public func waitUntilExit() -> Termination {
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
    public func waitUntilExit(timeout: Duration?) throws(ChildProcessError) -> Termination {
        try shared.wait(timeout: timeout, for: "\(executable) to exit") { state in
            state.termination.map { .ready($0) } ?? .pending
        }
    }
}

/// Why a ``ChildProcess`` could not be started, or a wait on one ended without what it waited
/// for.
public enum ChildProcessError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The program was not started: making a pipe, `posix_spawn(3)` or creating a thread failed
    /// with this `errno` (`ENOENT`: no such file, `EACCES`: not executable, `EMFILE`: too many
    /// open descriptors in this process, `ENOSYS`: glibc older than 2.34).
    case spawnFailed(executable: String, errno: Int32)
    /// An argument, variable or path could not be passed to `exec`: the associated value names
    /// it (a NUL byte, or `=` or nothing in a variable name).
    case invalidArgument(String)
    /// A wait gave up: the first value says what it waited for, the second is the timeout it
    /// was given.
    case timedOut(waitingFor: String, timeout: Duration)
    /// An output stream reached end of file (or is not piped) without the line waited for;
    /// `lines` is everything it carried, for the failure message.
    case outputEnded(ChildProcess.Output, lines: [String])
    /// Writing to the child's standard input failed with this `errno` (`EPIPE`: the child does
    /// not read it any more; `EBADF`: it is not piped, or was closed).
    case writeFailed(errno: Int32)

    /// A one-line explanation for a test failure message.
    public var description: String {
        switch self {
        case .spawnFailed(let executable, let code):
            "cannot start \(executable): \(String(cString: strerror(code))) (errno \(code))"
        case .invalidArgument(let what):
            "cannot pass \(what) to a child process"
        case .timedOut(let what, let timeout):
            "timed out after \(timeout) waiting for \(what)"
        case .outputEnded(let stream, let lines):
            "\(stream) ended without the line waited for; it had \(lines.count) line(s)"
                + (lines.isEmpty ? "" : ", the last: \(lines.suffix(5).map(\.debugDescription).joined(separator: ", "))")
        case .writeFailed(let code):
            "cannot write to the child's standard input: \(String(cString: strerror(code))) (errno \(code))"
        }
    }
}

// MARK: - Shared state of the child and its two threads

extension ChildProcess {
    /// One piped output stream: every byte, the complete lines, the incomplete rest.
    private struct OutputBuffer {
        var bytes: [UInt8] = []
        var lines: [String] = []
        var partial: [UInt8] = []
        /// Piped and not at end of file yet.
        var isOpen: Bool
    }

    private struct State {
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
    private enum Outcome<Value> {
        case ready(Value)
        case pending
        case failed(ChildProcessError)
    }

    /// The state the child's threads update; held by them and by the `ChildProcess`, so the
    /// `ChildProcess` itself can go (and kill the child) while they run.
    private final class Shared: Sendable {
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
    private static func readOutput(_ streams: [(Output, Int32)], into shared: Shared, onLine: (@Sendable (Output, String) -> Void)?) {
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
    private static func waitForExit(of shared: Shared, onExit: (@Sendable (Termination) -> Void)?) {
        var info = siginfo_t()
        var waited: Int32
        repeat {
            waited = waitid(P_PID, id_t(shared.pid), &info, WEXITED | WNOWAIT)
        } while waited < 0 && errno == EINTR
        let waitError = waited == 0 ? 0 : errno
        let termination = shared.update { state -> Termination in
            var status: Int32 = 0
            var reaped: pid_t = -1
            // The child has exited (a zombie): WNOHANG reaps it at once, never blocking under
            // the lock. ECHILD: someone else reaped it; nothing to collect.
            if waitError == 0 {
                repeat {
                    reaped = waitpid(shared.pid, &status, WNOHANG)
                } while reaped < 0 && errno == EINTR
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
    private static func termination(fromWaitStatus status: Int32) -> Termination {
        let signal = status & 0x7F
        return signal == 0 ? .exited((status >> 8) & 0xFF) : .signaled(signal)
    }
}

// MARK: - Spawning

extension ChildProcess {
    /// The two ends of one pipe.
    private struct Pipe {
        var read: Int32
        var write: Int32
    }

    /// The pipes of one child; the child's end of each is `read` for input, `write` for output.
    private struct Pipes {
        var input: Pipe?
        var output: Pipe?
        var error: Pipe?

        mutating func closeChildEnds() {
            if let input { close(input.read); self.input?.read = -1 }
            if let output { close(output.write); self.output?.write = -1 }
            if let error { close(error.write); self.error?.write = -1 }
        }

        mutating func closeAll() {
            for pipe in [input, output, error].compactMap({ $0 }) {
                if pipe.read >= 0 { close(pipe.read) }
                if pipe.write >= 0 { close(pipe.write) }
            }
            input = nil
            output = nil
            error = nil
        }
    }

    private static func makePipe(for executable: String) throws(ChildProcessError) -> Pipe {
        guard let pipe2 = GNU.pipe2 else { throw .spawnFailed(executable: executable, errno: ENOSYS) }
        var ends: [Int32] = [-1, -1]
        guard pipe2(&ends, O_CLOEXEC) == 0 else { throw .spawnFailed(executable: executable, errno: errno) }
        return Pipe(read: ends[0], write: ends[1])
    }

    /// Spawns the child and sets `pid`; returns 0 or the `errno`.
    private static func spawn(
        _ pid: inout pid_t,
        _ executable: String,
        _ arguments: [String],
        environment: [String: String],
        workingDirectory: String?,
        redirections: [Redirection],
        childEnds: [Int32?],
        newProcessGroup: Bool
    ) -> Int32 {
        guard let addCloseFrom = GNU.addCloseFrom, let addChdir = GNU.addChdir else { return ENOSYS }

        var actions = posix_spawn_file_actions_t()
        guard posix_spawn_file_actions_init(&actions) == 0 else { return ENOMEM }
        defer { posix_spawn_file_actions_destroy(&actions) }
        var failure: Int32 = 0
        func check(_ result: Int32) { if failure == 0 && result != 0 { failure = result } }
        for descriptor in 0..<3 {
            switch redirections[descriptor] {
            case .inherit:
                break
            case .nullDevice:
                check(posix_spawn_file_actions_addopen(&actions, Int32(descriptor), "/dev/null", descriptor == 0 ? O_RDONLY : O_WRONLY, 0))
            case .pipe:
                // dup2 clears close-on-exec on the copy (glibc also when the numbers are equal).
                check(posix_spawn_file_actions_adddup2(&actions, childEnds[descriptor] ?? -1, Int32(descriptor)))
            }
        }
        if let workingDirectory { check(addChdir(&actions, workingDirectory)) }
        // Last: nothing but 0, 1 and 2 survives into the child, whatever this process has open.
        check(addCloseFrom(&actions, 3))

        var attributes = posix_spawnattr_t()
        guard posix_spawnattr_init(&attributes) == 0 else { return ENOMEM }
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t()
        sigemptyset(&noSignals)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        check(posix_spawnattr_setsigmask(&attributes, &noSignals))
        check(posix_spawnattr_setsigdefault(&attributes, &allSignals))
        var flags = Int32(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF)
        if newProcessGroup {
            flags |= Int32(POSIX_SPAWN_SETPGROUP)
            check(posix_spawnattr_setpgroup(&attributes, 0))
        }
        check(posix_spawnattr_setflags(&attributes, Int16(flags)))
        guard failure == 0 else { return failure }

        let argv = CStringArray([executable] + arguments)
        defer { argv.free() }
        if environment.isEmpty {
            return spawnCall(executable, &pid, &actions, &attributes, argv.pointers, environ)
        }
        let envp = CStringArray(mergedEnvironment(environment))
        defer { envp.free() }
        return spawnCall(executable, &pid, &actions, &attributes, argv.pointers, envp.pointers)
    }

    /// `posix_spawnp` for a bare name (searched in `PATH`), `posix_spawn` for a path.
    private static func spawnCall(
        _ executable: String,
        _ pid: inout pid_t,
        _ actions: inout posix_spawn_file_actions_t,
        _ attributes: inout posix_spawnattr_t,
        _ argv: [UnsafeMutablePointer<CChar>?],
        _ envp: UnsafePointer<UnsafeMutablePointer<CChar>?>?
    ) -> Int32 {
        if executable.contains("/") {
            return posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        }
        return posix_spawnp(&pid, executable, &actions, &attributes, argv, envp)
    }

    /// This process's environment with `additions` added or replacing variables of that name.
    private static func mergedEnvironment(_ additions: [String: String]) -> [String] {
        var entries: [String] = []
        var index = 0
        while let entry = environ[index] {
            let text = String(cString: entry)
            let name = text.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? text
            if additions[name] == nil { entries.append(text) }
            index += 1
        }
        for (name, value) in additions.sorted(by: { $0.key < $1.key }) {
            entries.append("\(name)=\(value)")
        }
        return entries
    }

    /// A NULL-terminated `char *[]` of copies of `strings`, for `argv` and `envp`.
    private struct CStringArray {
        let pointers: [UnsafeMutablePointer<CChar>?]

        init(_ strings: [String]) {
            pointers = strings.map { strdup($0) } + [nil]
        }

        func free() {
            for pointer in pointers { Glibc.free(pointer) }
        }
    }

    /// glibc functions declared only under `_GNU_SOURCE`, which the Glibc module is not built
    /// with; looking the symbols up keeps this target free of a C shim (as `setns` in
    /// NamespaceThread). `nil` on a glibc without them (before 2.34 for closefrom).
    private enum GNU {
        typealias Pipe2 = @convention(c) (UnsafeMutablePointer<Int32>?, Int32) -> Int32
        typealias AddCloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, Int32) -> Int32
        typealias AddChdir = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>?, UnsafePointer<CChar>?) -> Int32

        static let pipe2: Pipe2? = symbol("pipe2")
        static let addCloseFrom: AddCloseFrom? = symbol("posix_spawn_file_actions_addclosefrom_np")
        static let addChdir: AddChdir? = symbol("posix_spawn_file_actions_addchdir_np")

        private static func symbol<Function>(_ name: String) -> Function? {
            // RTLD_DEFAULT is a null handle in glibc: search the global symbol scope.
            dlsym(nil, name).map { unsafeBitCast($0, to: Function.self) }
        }
    }

    // MARK: Helpers

    /// Writes all of `bytes`, retrying after EINTR and partial writes, with `SIGPIPE` blocked on
    /// this thread (a pipe whose reader is gone raises it, and its default action would end this
    /// process); a `SIGPIPE` raised here is consumed. Returns 0 or the `errno`.
    private static func writeWithoutSIGPIPE(_ bytes: [UInt8], to descriptor: Int32) -> Int32 {
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
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                return errno
            }
            offset += written
        }
        return 0
    }

    /// Starts a detached thread running `body`; returns 0 or the `pthread_create` error.
    private static func startThread(_ body: @escaping @Sendable () -> Void) -> Int32 {
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

    /// Nanoseconds in `duration`, 0 for a negative one, capped at about 100 years.
    static func nanoseconds(_ duration: Duration) -> Int {
        let (seconds, attoseconds) = duration.components
        guard seconds >= 0 else { return 0 }
        guard seconds < 3_000_000_000 else { return 3_000_000_000 * 1_000_000_000 }
        return Int(seconds) * 1_000_000_000 + Int(attoseconds / 1_000_000_000)
    }
}
