import Glibc

/// Why a ``ChildProcess`` could not be started, or a wait on one ended without what it waited
/// for.
package enum ChildProcessError: Error, Sendable, Hashable, CustomStringConvertible {
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
    package var description: String {
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
