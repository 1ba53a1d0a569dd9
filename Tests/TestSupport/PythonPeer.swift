import Foundation
import class Spawn.ChildProcess

/// Runs the Python peers in Tests/peers.
public enum PythonPeer {
    /// Tests/peers, where the scripts are.
    public static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("peers")

    /// True when python3 can import the peers' packages, or when CI=true (then a missing
    /// package fails the tests instead of skipping them).
    public static let isAvailable: Bool = {
        if ProcessInfo.processInfo.environment["CI"] == "true" { return true }
        return (try? run(nil, ["-c", "import websockets, pusher, pysher, jwt, prometheus_client"])) != nil
    }()

    /// Runs `python3 script arguments…` and returns its standard output.
    ///
    /// - Throws: `Failure` when it exits non-zero; `ChildProcessError` when it cannot be started.
    @discardableResult
    public static func run(_ script: String?, _ arguments: [String]) throws -> String {
        let script = script.map { [directory.appendingPathComponent($0).path] } ?? []
        let result = try ChildProcess.run("/usr/bin/env", ["python3"] + script + arguments)
        guard result.termination == .exited(0) else { throw Failure(status: result.status, stderr: result.standardError) }
        return result.standardOutput
    }

    /// A script that exited non-zero.
    public struct Failure: Error, CustomStringConvertible {
        /// The exit status.
        public var status: Int32
        /// What it printed on stderr.
        public var stderr: String
        /// The status and stderr.
        public var description: String { "python3 exited \(status): \(stderr)" }
    }

    /// Starts `python3 script arguments…` in the background; read its lines from the result.
    ///
    /// - Throws: `ChildProcessError` when it cannot be started.
    public static func start(_ script: String, _ arguments: [String]) throws -> BackgroundPeer {
        try BackgroundPeer(script: directory.appendingPathComponent(script).path, arguments: arguments)
    }
}

/// A peer (a Python script, or any program) running in the background, its stdout collected line by line (stderr goes to
/// the test log), its stdin a pipe for `send(_:)`. Killed when the last reference goes.
public final class BackgroundPeer: Sendable {
    private let process: ChildProcess

    init(script: String, arguments: [String]) throws {
        process = try ChildProcess("/usr/bin/env", ["python3", script] + arguments, standardInput: .pipe, standardError: .inherit)
    }

    /// Starts any program as a peer (a built product, `node` with a script).
    ///
    /// - Throws: `ChildProcessError` when it cannot be started.
    public init(executable: String, arguments: [String]) throws {
        process = try ChildProcess(executable, arguments, standardInput: .pipe, standardError: .inherit)
    }

    /// Writes one line to the script's standard input.
    ///
    /// - Throws: `ChildProcessError` when the script no longer reads.
    public func send(_ line: String) throws {
        try process.write(line + "\n")
    }

    /// Waits until `count` lines arrived (5 s at most) and returns all lines so far.
    public func lines(atLeast count: Int, timeout: Int = 5) -> [String] {
        (try? process.waitForLines(count: count, timeout: .seconds(timeout))) ?? process.outputLines
    }

    /// Waits for the script to end and returns its exit status.
    public func wait() -> Int32 {
        process.waitUntilExit().status
    }
}
