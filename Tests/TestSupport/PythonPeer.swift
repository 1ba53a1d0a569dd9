import Dispatch
import Foundation
import Locking

/// Runs the Python peers in Tests/peers.
public enum PythonPeer {
    /// Tests/peers, where the scripts are.
    public static let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().appendingPathComponent("peers")

    /// True when python3 can import the peers' packages, or when CI=true (then a missing
    /// package fails the tests instead of skipping them).
    public static let isAvailable: Bool = {
        if ProcessInfo.processInfo.environment["CI"] == "true" { return true }
        return (try? run(nil, ["-c", "import websockets, pusher, pysher"])) != nil
    }()

    /// Runs `python3 script arguments…` and returns its standard output.
    ///
    /// - Throws: `Failure` when it exits non-zero.
    @discardableResult
    public static func run(_ script: String?, _ arguments: [String]) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3"] + (script.map { [directory.appendingPathComponent($0).path] } ?? []) + arguments
        let output = Pipe()
        let errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        let errorText = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw Failure(status: process.terminationStatus, stderr: errorText) }
        return text
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
    /// - Throws: what `Process.run()` throws.
    public static func start(_ script: String, _ arguments: [String]) throws -> BackgroundPeer {
        try BackgroundPeer(script: directory.appendingPathComponent(script).path, arguments: arguments)
    }
}

/// A Python peer running in the background, its stdout collected line by line.
public final class BackgroundPeer: Sendable {
    private let process = Process()
    private let lines = Locked<[String]>([])
    private let partial = Locked(Data())
    private let arrived = DispatchSemaphore(value: 0)

    init(script: String, arguments: [String]) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", script] + arguments
        let output = Pipe()
        process.standardOutput = output
        output.fileHandleForReading.readabilityHandler = { [lines, partial, arrived] handle in
            let data = handle.availableData
            let complete: [String] = partial.withLock { buffer in
                buffer.append(data)
                var found: [String] = []
                while let newline = buffer.firstIndex(of: 0x0A) {
                    found.append(String(decoding: buffer[buffer.startIndex..<newline], as: UTF8.self))
                    buffer.removeSubrange(buffer.startIndex...newline)
                }
                return found
            }
            for line in complete {
                lines.withLock { $0.append(line) }
                arrived.signal()
            }
        }
        try process.run()
    }

    /// Waits until `count` lines arrived (5 s at most) and returns all lines so far.
    public func lines(atLeast count: Int, timeout: Int = 5) -> [String] {
        let deadline = DispatchTime.now() + .seconds(timeout)
        while lines.withLock({ $0.count }) < count {
            if arrived.wait(timeout: deadline) == .timedOut { break }
        }
        return lines.withLock { $0 }
    }

    /// Waits for the script to end and returns its exit status.
    public func wait() -> Int32 {
        process.waitUntilExit()
        return process.terminationStatus
    }

    deinit {
        if process.isRunning { process.terminate() }
    }
}
