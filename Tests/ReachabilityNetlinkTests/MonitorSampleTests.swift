import Foundation
import Glibc
import ReconnectTesting
import Testing
import Spawn
import NetworkLab

/// The `reachability-monitor` sample, run as a user would inside a namespace.
@Suite(.networkLab) struct MonitorSampleTests {
    /// One JSON line of `--json` output.
    struct Line: Decodable, Sendable {
        var time: String
        var host: String
        var reachable: Bool
        var flags: [String]
        var interface: String?
        var gateway: String?
        var reason: String?
    }

    /// Waits for line number `index` (0-based) of `process`'s standard output for up to 5 s.
    /// A line that is not the documented JSON is nil, and fails the test.
    static func line(_ index: Int, of process: ChildProcess) -> Line? {
        guard let text = try? process.waitForLine(startingAt: index, timeout: .seconds(5), where: { _ in true }) else { return nil }
        return try? JSONDecoder().decode(Line.self, from: Data(text.utf8))
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

        let process = try ChildProcess(
            "/usr/sbin/ip",
            ["netns", "exec", lab.local.name, Self.samplePath, "--json", "198.51.100.7"],
            standardError: .inherit
        )
        defer {
            process.signal(SIGTERM)
            process.waitUntilExit()
        }

        let initial = try #require(Self.line(0, of: process))
        #expect(initial.host == "198.51.100.7")
        #expect(initial.reachable)
        #expect(initial.interface == "veth0")
        #expect(initial.gateway == "192.0.2.1")
        #expect(initial.flags == ["reachable"])
        #expect(ISO8601DateFormatter.withFractionalSeconds.date(from: initial.time) != nil)

        try lab.local.removeRoute("198.51.100.0/24", via: "192.0.2.1")
        let gone = try #require(Self.line(1, of: process))
        #expect(!gone.reachable)
        #expect(gone.reason?.contains("network unreachable") == true)

        try lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1")
        let back = try #require(Self.line(2, of: process))
        #expect(back.reachable)
    }

    @Test("a malformed host is refused with a message and exit status 2")
    func malformedHost() throws {
        let result = try ChildProcess.run(Self.samplePath, ["bad host"])
        #expect(result.status == 2)
        #expect(result.standardError.contains("invalid host"))
    }
}

extension ISO8601DateFormatter {
    nonisolated(unsafe) static let withFractionalSeconds: ISO8601DateFormatter = {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }()
}
