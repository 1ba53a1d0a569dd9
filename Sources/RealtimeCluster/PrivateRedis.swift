import Foundation
import Glibc
import Redis
import Spawn

/// A private `redis-server` for tests and local clusters: its own temporary directory, a unix
/// socket there and no TCP port, no persistence (`--save ""`, `--appendonly no`), stopped by its
/// pid. Debian's `redis-server` package provides the binary (`scripts/setup --test-peers`).
public final class PrivateRedis: Sendable {
    /// The server's socket.
    public let endpoint: RedisEndpoint
    /// Its directory (removed by `stop`).
    public let directory: String
    private let process: ChildProcess

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
    /// - Throws: `StartFailure` when the binary is missing, exits, or does not answer in time.
    public init(executable: String = "redis-server", maxMemory: Int? = nil, timeout: Double = 10) throws {
        var template = Array("/tmp/private-redis.XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw StartFailure(description: "mkdtemp failed: errno \(errno)") }
        directory = String(cString: made)
        let socket = directory + "/redis.sock"
        endpoint = .unix(path: socket)
        var arguments = ["--port", "0", "--unixsocket", socket, "--unixsocketperm", "700", "--save", "", "--appendonly", "no",
                         "--dir", directory, "--daemonize", "no", "--loglevel", "warning"]
        if let maxMemory { arguments += ["--maxmemory", String(maxMemory), "--maxmemory-policy", "noeviction"] }
        do {
            process = try ChildProcess("/usr/bin/env", [executable] + arguments, standardOutput: .pipe, standardError: .pipe)
        } catch {
            try? FileManager.default.removeItem(atPath: directory)
            throw StartFailure(description: "cannot start \(executable): \(error)")
        }
        let probe = RedisConnection(endpoint: endpoint, timeout: 500)
        let deadline = ContinuousClock.now + .milliseconds(Int(timeout * 1000))
        while true {
            if let reply = try? probe.command("PING"), reply == .status("PONG") { break }
            if !process.isRunning || ContinuousClock.now >= deadline {
                let output = (process.outputLines + process.errorLines).suffix(5).joined(separator: " | ")
                stop()
                throw StartFailure(description: "\(executable) did not answer PING within \(timeout) s: \(output)")
            }
            usleep(20_000)
        }
    }

    deinit { stop() }

    /// The server's process id.
    public var processIdentifier: pid_t { process.processIdentifier }

    /// Stops the server (SIGKILL: nothing to save) and removes its directory. Idempotent.
    public func stop() {
        if process.isRunning {
            _ = process.signal(SIGKILL)
            _ = try? process.waitUntilExit(timeout: .seconds(10))
        }
        try? FileManager.default.removeItem(atPath: directory)
    }
}
