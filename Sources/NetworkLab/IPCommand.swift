import Foundation
import Spawn

/// Runs iproute2's `ip` and turns a failure into ``NetworkLabError``.
enum IPCommand {
    /// Where `ip` lives: Debian puts it in /usr/sbin and /sbin, which a non-login PATH may lack.
    static let executablePath: String? = {
        let candidates = ["/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"]
        let fromPath = (ProcessInfo.processInfo.environment["PATH"] ?? "")
            .split(separator: ":")
            .map { "\($0)/ip" }
        return (candidates + fromPath).first { FileManager.default.isExecutableFile(atPath: $0) }
    }()

    /// Runs `ip` with `arguments` (standard input from /dev/null) and returns its standard output.
    ///
    /// - Throws: ``NetworkLabError/unavailable(_:)`` when `ip` is missing or cannot be started,
    ///   ``NetworkLabError/commandFailed(command:status:stderr:)`` when it exits non-zero or is
    ///   ended by a signal.
    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        guard let executablePath else {
            throw NetworkLabError.unavailable("the `ip` command (iproute2) was not found in /usr/sbin, /sbin or PATH")
        }
        let result: ChildProcess.Result
        do {
            result = try ChildProcess.run(executablePath, arguments)
        } catch {
            throw NetworkLabError.unavailable(error.description)
        }
        guard result.termination == .exited(0) else {
            throw NetworkLabError.commandFailed(
                command: (["ip"] + arguments).joined(separator: " "),
                status: result.status,
                stderr: result.standardError
            )
        }
        return result.standardOutput
    }
}
