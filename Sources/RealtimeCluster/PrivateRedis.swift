import Foundation
import Glibc
import Redis
import Spawn
import SystemSupport

/// A private `redis-server` for tests and local clusters: its own temporary directory, a unix
/// socket there and no TCP port, stopped by its pid. No persistence by default (`--save ""`,
/// `--appendonly no`), or an append-only file written before each reply (`persistent`). Debian's
/// `redis-server` package provides the binary (`scripts/setup --test-peers`).
public final class PrivateRedis: Sendable {
    /// The server's socket.
    public let endpoint: RedisEndpoint
    /// Its directory (removed by `stop`).
    public let directory: String
    private let executable: String
    private let arguments: [String]
    private let timeout: Double
    private let process: Locked<ChildProcess?>

    /// Why a private Redis did not start.
    public struct StartFailure: Error, CustomStringConvertible {
        /// What went wrong, with the server's last output lines.
        public var description: String
    }

    /// Starts a server and waits until it answers `PING`.
    ///
    /// - Parameters:
    ///   - executable: the server binary (`redis-server` found on the PATH by default).
    ///   - maxMemory: `maxmemory` in bytes with `noeviction` (writes refused with `OOM` past
    ///     it), or nil for no limit.
    ///   - timeout: how long to wait for the first `PING`, in seconds.
    ///   - persistent: keep the data across ``restart()``: `--appendonly yes --appendfsync
    ///     always` in the server's directory, so every write Redis answered is on disk before the
    ///     answer (Redis' persistence documentation), even when it is killed with SIGKILL.
    /// - Throws: `StartFailure` when the binary is missing, exits, or does not answer in time.
    public init(executable: String = "redis-server", maxMemory: Int? = nil, timeout: Double = 10, persistent: Bool = false) throws {
        var template = Array("/tmp/private-redis.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw StartFailure(description: "mkdtemp failed: errno \(errno)") }
        directory = String(cString: made)
        let socket = directory + "/redis.sock"
        endpoint = .unix(path: socket)
        var arguments = ["--port", "0", "--unixsocket", socket, "--unixsocketperm", "700", "--save", "",
                         "--appendonly", persistent ? "yes" : "no", "--dir", directory, "--daemonize", "no", "--loglevel", "warning"]
        if persistent { arguments += ["--appendfsync", "always"] }
        if let maxMemory { arguments += ["--maxmemory", String(maxMemory), "--maxmemory-policy", "noeviction"] }
        self.executable = executable
        self.arguments = arguments
        self.timeout = timeout
        process = Locked(nil)
        do {
            try launch()
        } catch {
            stop()
            throw error
        }
    }

    /// Starts the server process and waits for its first `PONG`.
    private func launch() throws {
        let child: ChildProcess
        do {
            child = try ChildProcess("/usr/bin/env", [executable] + arguments, standardOutput: .pipe, standardError: .pipe)
        } catch {
            throw StartFailure(description: "cannot start \(executable): \(error)")
        }
        process.withLock { $0 = child }
        let probe = RedisConnection(endpoint: endpoint, timeout: 500)
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while true {
            if let reply = try? probe.command("PING"), reply == .status("PONG") { return }
            if !child.isRunning || ContinuousClock.now >= deadline {
                let output = (child.outputLines + child.errorLines).suffix(5).joined(separator: " | ")
                throw StartFailure(description: "\(executable) did not answer PING within \(timeout) s: \(output)")
            }
            usleep(20_000)
        }
    }

    /// Kills the server (SIGKILL) and starts a new one on the same socket: with no persistence
    /// it comes back empty, as a Redis restarted without its data does; a `persistent` one comes
    /// back with every write it had answered (it reads its append-only file first).
    ///
    /// - Throws: `StartFailure` when the new server does not answer in time.
    public func restart() throws {
        kill()
        try launch()
    }

    deinit { stop() }

    /// The server's process id (the current one after a `restart`; 0 once stopped).
    public var processIdentifier: pid_t { process.withLock { $0?.processIdentifier ?? 0 } }

    /// Stops the server (SIGKILL: nothing to save) and removes its directory. Idempotent.
    public func stop() {
        kill()
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func kill() { process.killProcess() }
}

extension Locked where Value == ChildProcess? {
    /// Takes the process out (leaving `nil`), kills it with SIGKILL (its process group too when
    /// it has its own) and waits up to 10 s for it to end.
    ///
    /// - Returns: the process that was there, ended, for its output.
    @discardableResult
    func killProcess() -> ChildProcess? {
        guard let child = withLock({ process -> ChildProcess? in
            defer { process = nil }
            return process
        }) else { return nil }
        if child.isRunning {
            _ = child.signal(SIGKILL, toProcessGroup: child.hasOwnProcessGroup)
            _ = try? child.waitUntilExit(timeout: .seconds(10))
        }
        return child
    }
}
