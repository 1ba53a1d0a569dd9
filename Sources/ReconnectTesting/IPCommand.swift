import Locking
import Foundation

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

    /// Runs `ip` with `arguments` and returns its standard output.
    ///
    /// - Throws: ``NetworkLabError/unavailable(_:)`` when `ip` is missing or cannot be started,
    ///   ``NetworkLabError/commandFailed(command:status:stderr:)`` when it exits non-zero.
    @discardableResult
    static func run(_ arguments: [String]) throws -> String {
        guard let executablePath else {
            throw NetworkLabError.unavailable("the `ip` command (iproute2) was not found in /usr/sbin, /sbin or PATH")
        }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executablePath)
        process.arguments = arguments
        process.standardInput = FileHandle.nullDevice
        let output = Pipe()
        let errorOutput = Pipe()
        process.standardOutput = output
        process.standardError = errorOutput
        // `waitUntilExit()` polls the run loop every 50 ms; the termination handler ends the wait
        // as soon as `ip` exits, which matters when a test runs dozens of commands.
        let exited = DispatchSemaphore(value: 0)
        process.terminationHandler = { _ in exited.signal() }
        do {
            try process.run()
        } catch {
            throw NetworkLabError.unavailable("could not start \(executablePath): \(error)")
        }

        // Drain stderr on another thread so that neither pipe can fill up and stall `ip`.
        let errorText = Locked("")
        let errorDrained = DispatchSemaphore(value: 0)
        let errorHandle = errorOutput.fileHandleForReading
        DispatchQueue.global().async {
            let data = errorHandle.readDataToEndOfFile()
            errorText.withLock { $0 = String(decoding: data, as: UTF8.self) }
            errorDrained.signal()
        }
        let outputData = output.fileHandleForReading.readDataToEndOfFile()
        errorDrained.wait()
        exited.wait()

        let status = process.terminationStatus
        guard process.terminationReason == .exit, status == 0 else {
            throw NetworkLabError.commandFailed(
                command: (["ip"] + arguments).joined(separator: " "),
                status: status,
                stderr: errorText.withLock { $0 }
            )
        }
        return String(decoding: outputData, as: UTF8.self)
    }
}
