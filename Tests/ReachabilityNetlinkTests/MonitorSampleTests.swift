import Foundation
import ReconnectTesting
import Locking
import Testing

/// The `reachability-monitor` sample, run as a user would inside a namespace.
@Suite(.networkLab) struct MonitorSampleTests {
    /// Reads JSON lines from a child process as they arrive.
    struct Line: Decodable, Sendable {
        var time: String
        var host: String
        var reachable: Bool
        var flags: [String]
        var interface: String?
        var gateway: String?
        var reason: String?
    }

    final class LineReader: Sendable {
        private let lines = Locked<[Line?]>([])
        private let arrived = DispatchSemaphore(value: 0)
        private let partial = Locked(Data())

        func attach(to pipe: Pipe) {
            pipe.fileHandleForReading.readabilityHandler = { [self] handle in
                let data = handle.availableData
                let complete: [Data] = partial.withLock { buffer in
                    buffer.append(data)
                    var found: [Data] = []
                    while let newline = buffer.firstIndex(of: 0x0A) {
                        found.append(buffer[buffer.startIndex..<newline])
                        buffer.removeSubrange(buffer.startIndex...newline)
                    }
                    return found
                }
                for line in complete {
                    // A line that is not the documented JSON is kept as nil, and fails the test.
                    let decoded = try? JSONDecoder().decode(Line.self, from: line)
                    lines.withLock { $0.append(decoded) }
                    arrived.signal()
                }
            }
        }

        /// Waits for line number `index` (0-based) for up to 5 s.
        func line(_ index: Int) -> Line? {
            while lines.withLock({ $0.count }) <= index {
                if arrived.wait(timeout: .now() + .seconds(5)) == .timedOut { return nil }
            }
            return lines.withLock { $0[index] }
        }
    }

    static var samplePath: String {
        // The test bundle sits in the build directory beside the sample executable.
        let bundle = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent()
        for directory in [bundle, bundle.deletingLastPathComponent()] {
            let candidate = directory.appendingPathComponent("reachability-monitor").path
            if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        }
        return "reachability-monitor"
    }

    @Test("--json prints the initial state, then a line when the route goes and one when it returns")
    func jsonLines() throws {
        let lab = try NetworkLab()
        try lab.addVethLink("veth0", peer: "peer0")
        try lab.local.addAddress("192.0.2.2/24", to: "veth0")
        try lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1")

        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/ip")
        process.arguments = ["netns", "exec", lab.local.name, Self.samplePath, "--json", "198.51.100.7"]
        let output = Pipe()
        process.standardOutput = output
        let reader = LineReader()
        reader.attach(to: output)
        try process.run()
        defer {
            process.terminate()
            process.waitUntilExit()
        }

        let initial = try #require(reader.line(0))
        #expect(initial.host == "198.51.100.7")
        #expect(initial.reachable)
        #expect(initial.interface == "veth0")
        #expect(initial.gateway == "192.0.2.1")
        #expect(initial.flags == ["reachable"])
        #expect(ISO8601DateFormatter.withFractionalSeconds.date(from: initial.time) != nil)

        try lab.local.removeRoute("198.51.100.0/24", via: "192.0.2.1")
        let gone = try #require(reader.line(1))
        #expect(!gone.reachable)
        #expect(gone.reason?.contains("network unreachable") == true)

        try lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1")
        let back = try #require(reader.line(2))
        #expect(back.reachable)
    }

    @Test("a malformed host is refused with a message and exit status 2")
    func malformedHost() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Self.samplePath)
        process.arguments = ["bad host"]
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        process.waitUntilExit()
        #expect(process.terminationStatus == 2)
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(message.contains("invalid host"))
    }
}

extension ISO8601DateFormatter {
    nonisolated(unsafe) static let withFractionalSeconds: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()
}
