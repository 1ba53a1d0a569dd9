import Foundation
import Glibc
import Locking

/// One of the package's sample executables (built next to the test bundle by `swift test`)
/// run as a child process, its output lines recorded as they come.
final class SampleProcess: Sendable {
    enum Failure: Error, CustomStringConvertible {
        case notBuilt(String)
        var description: String {
            switch self {
            case .notBuilt(let path): "\(path) is missing: build the samples (swift build) before testing"
            }
        }
    }

    let stdout = Recorder<String>()
    let stderr = Recorder<String>()
    let exitStatus = Recorder<Int32>()
    private let process = Locked<Process?>(nil)
    private let input: FileHandle

    /// Where `swift test` put the test bundle, and so the executables.
    static var buildDirectory: URL {
        URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
            .deletingLastPathComponent()
    }

    /// Starts `name` with `arguments`.
    init(_ name: String, _ arguments: [String]) throws {
        let executable = Self.buildDirectory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: executable.path) else { throw Failure.notBuilt(executable.path) }
        let process = Process()
        process.executableURL = executable
        process.arguments = arguments
        let (stdinPipe, stdoutPipe, stderrPipe) = (Pipe(), Pipe(), Pipe())
        process.standardInput = stdinPipe
        process.standardOutput = stdoutPipe
        process.standardError = stderrPipe
        input = stdinPipe.fileHandleForWriting
        Self.collectLines(from: stdoutPipe.fileHandleForReading, into: stdout)
        Self.collectLines(from: stderrPipe.fileHandleForReading, into: stderr)
        let exitStatus = exitStatus
        process.terminationHandler = { exitStatus.record($0.terminationStatus) }
        try process.run()
        self.process.withLock { $0 = process }
    }

    deinit {
        if let process = process.withLock({ $0 }), process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Writes a line to the process's standard input.
    func send(_ line: String) {
        input.write(Data((line + "\n").utf8))
    }

    /// Sends a signal (SIGTERM, SIGINT).
    func signal(_ number: Int32) {
        if let pid = process.withLock({ $0?.processIdentifier }) { kill(pid, number) }
    }

    private static func collectLines(from handle: FileHandle, into recorder: Recorder<String>) {
        let pending = Locked(Data())
        handle.readabilityHandler = { handle in
            let data = handle.availableData
            if data.isEmpty {
                handle.readabilityHandler = nil
                return
            }
            let lines = pending.withLock { pending -> [String] in
                pending.append(data)
                var lines: [String] = []
                while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                    lines.append(String(decoding: pending[pending.startIndex..<newline], as: UTF8.self))
                    pending.removeSubrange(pending.startIndex...newline)
                }
                return lines
            }
            for line in lines { recorder.record(line) }
        }
    }
}
