import Dispatch
import Glibc
import SystemSupport


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
package final class ChildProcess: Sendable {
    /// Where one of the child's standard streams (descriptor 0, 1 or 2) goes.
    package enum Redirection: Sendable, Hashable {
        /// The same file as this process's descriptor (the terminal, the CI log).
        case inherit
        /// `/dev/null`: reads see end of file at once, writes are discarded.
        case nullDevice
        /// A pipe to this process: standard input is written with ``ChildProcess/write(_:)``,
        /// output is read and kept by ``ChildProcess``.
        case pipe
    }

    /// One of the child's two output streams.
    package enum Output: Sendable, Hashable, CustomStringConvertible {
        /// Descriptor 1.
        case standardOutput
        /// Descriptor 2.
        case standardError

        /// `stdout` or `stderr`.
        package var description: String {
            switch self {
            case .standardOutput: "stdout"
            case .standardError: "stderr"
            }
        }
    }

    /// How the child ended.
    package enum Termination: Sendable, Hashable, CustomStringConvertible {
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
        package var status: Int32 {
            switch self {
            case .exited(let status): status
            case .signaled(let signal): signal
            case .statusLost: -1
            }
        }

        /// `exit status N`, `signal N`, or `status lost`.
        package var description: String {
            switch self {
            case .exited(let status): "exit status \(status)"
            case .signaled(let signal): "signal \(signal)"
            case .statusLost: "status lost"
            }
        }
    }

    /// What ``run(_:_:environment:workingDirectory:standardInput:timeout:)`` returns: how the
    /// program ended and everything it wrote.
    package struct Result: Sendable, Hashable {
        /// How it ended.
        package var termination: Termination
        /// Its standard output, decoded as UTF-8 (invalid bytes replaced).
        package var standardOutput: String
        /// Its standard error, decoded as UTF-8 (invalid bytes replaced).
        package var standardError: String

        /// ``Termination/status`` of ``termination``: the exit status, or the signal number.
        package var status: Int32 { termination.status }

        /// Creates a result (for tests of code that consumes one).
        ///
        /// - Parameters:
        ///   - termination: how the program ended.
        ///   - standardOutput: what it wrote on descriptor 1.
        ///   - standardError: what it wrote on descriptor 2.
        package init(termination: Termination, standardOutput: String, standardError: String) {
            self.termination = termination
            self.standardOutput = standardOutput
            self.standardError = standardError
        }
    }

    /// The program's path as given to the initializer.
    package let executable: String
    /// The arguments after the program name.
    package let arguments: [String]
    /// The child's process id; it stays reserved for this child until ``termination`` is set.
    package let processIdentifier: pid_t
    /// Whether the child leads a process group of its own (its group id is its pid).
    package let hasOwnProcessGroup: Bool

    let shared: Shared
    /// This process's end of the child's standard input pipe, -1 when there is none or it is
    /// closed. A lock of its own: a write that blocks on a full pipe must not hold up the reader.
    let input: Locked<Int32>

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
    package init(
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
            threadFailure = startDetachedThread { Self.readOutput(readable, into: shared, onLine: onLine) }
            if threadFailure != 0 {
                for (_, descriptor) in readable { close(descriptor) }
                shared.finishReading(all: readable.map(\.0))
                shared.update { $0.readerFinished = true }
            }
        }
        if threadFailure == 0 {
            threadFailure = startDetachedThread { Self.waitForExit(of: shared, onExit: onExit) }
        }
        if threadFailure != 0 {
            // No thread to reap the child: kill and reap it here, then fail.
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = SystemCall.retryingInterrupts { waitpid(pid, &status, 0) }
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

}
