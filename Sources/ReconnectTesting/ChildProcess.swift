import Dispatch
import Glibc
import Locking

/// Runs a program to completion with `posix_spawn(3)` and captures its output.
///
/// Used instead of Foundation's `Process`, whose `run()` on Linux (Swift 6.3.1) crashes now and
/// then in `findMaximumOpenFromProcSelfFD()` (a 256-byte over-read of a `dirent`, fixed in
/// swift-corelibs-foundation #5472): NetworkLab starts hundreds of `ip` commands per test run,
/// enough to hit it.
public enum ChildProcess {
    /// What a finished program left.
    public struct Result: Sendable {
        /// The exit status, or 128 + the signal number when a signal ended it.
        public var status: Int32
        /// Its standard output.
        public var standardOutput: String
        /// Its standard error.
        public var standardError: String
    }

    /// Why a program could not be run.
    public struct SpawnError: Error, CustomStringConvertible, Sendable {
        /// The program.
        public var path: String
        /// The errno of `posix_spawn` or `socketpair`.
        public var errno: Int32
        /// The path and the errno's text.
        public var description: String { "cannot start \(path): \(String(cString: strerror(errno)))" }
    }

    /// Runs `path` with `arguments` (not through a shell), standard input from /dev/null, and
    /// waits for it to exit.
    ///
    /// - Parameters:
    ///   - path: the executable's absolute path.
    ///   - arguments: the arguments after the program name.
    /// - Returns: the exit status and the captured output.
    /// - Throws: `SpawnError` when the pipes cannot be made or the program cannot be started.
    public static func run(_ path: String, _ arguments: [String]) throws(SpawnError) -> Result {
        var output: [Int32] = [-1, -1]
        var errors: [Int32] = [-1, -1]
        // Socket pairs rather than pipes: SOCK_CLOEXEC is set atomically, so a child spawned at
        // the same moment by another thread never inherits (and holds open) these descriptors.
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &output) == 0 else { throw SpawnError(path: path, errno: errno) }
        guard socketpair(AF_UNIX, type, 0, &errors) == 0 else {
            let code = errno
            close(output[0]); close(output[1])
            throw SpawnError(path: path, errno: code)
        }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, output[1], 1)
        posix_spawn_file_actions_adddup2(&actions, errors[1], 2)

        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, environ)
        close(output[1])
        close(errors[1])
        guard spawned == 0 else {
            close(output[0]); close(errors[0])
            throw SpawnError(path: path, errno: spawned)
        }
        // Drain stderr on another thread so neither pipe can fill up and stall the child.
        let errorText = Locked("")
        let drained = DispatchSemaphore(value: 0)
        let errorDescriptor = errors[0]
        DispatchQueue.global().async {
            errorText.withLock { $0 = readAll(errorDescriptor) }
            drained.signal()
        }
        let outputText = readAll(output[0])
        drained.wait()
        close(output[0])
        close(errors[0])
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        // WIFEXITED / WEXITSTATUS / WTERMSIG are macros Swift cannot import.
        let exitCode = (status & 0x7F) == 0 ? (status >> 8) & 0xFF : 128 + (status & 0x7F)
        return Result(status: exitCode, standardOutput: outputText, standardError: errorText.withLock { $0 })
    }

    private static func readAll(_ descriptor: Int32) -> String {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count > 0 {
                bytes.append(contentsOf: buffer[0..<count])
            } else if count < 0 && errno == EINTR {
                continue
            } else {
                break
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
