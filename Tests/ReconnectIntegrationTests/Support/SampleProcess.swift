import Foundation
import Glibc
import ReconnectTesting
import Spawn
import TestSupport

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
    /// The exit status (or the signal number that ended it), recorded once the output is read.
    let exitStatus = Recorder<Int32>()
    private let process: ChildProcess

    /// Where `swift test` put the test bundle, and so the executables.
    static var buildDirectory: URL {
        BuiltProduct.directory
    }

    /// Starts `name` with `arguments`; killed when the last reference goes.
    init(_ name: String, _ arguments: [String]) throws {
        let executable = Self.buildDirectory.appendingPathComponent(name)
        guard FileManager.default.isExecutableFile(atPath: executable.path) else { throw Failure.notBuilt(executable.path) }
        let (stdout, stderr, exitStatus) = (stdout, stderr, exitStatus)
        process = try ChildProcess(
            executable.path,
            arguments,
            standardInput: .pipe,
            onLine: { stream, line in (stream == .standardOutput ? stdout : stderr).record(line) },
            onExit: { exitStatus.record($0.status) }
        )
    }

    /// Writes a line to the process's standard input (ignored once it no longer reads it).
    func send(_ line: String) {
        try? process.write(line + "\n")
    }

    /// Sends a signal (SIGTERM, SIGINT).
    func signal(_ number: Int32) {
        process.signal(number)
    }
}
