import Foundation
import Spawn
import TestSupport
import Testing

/// The Kotlin client (`Clients/kotlin`, issue 37): built with kotlinc and tested with JUnit 5 by
/// its `build.sh`: every rule under a manual clock and a fake transport, the seeds' Kotlin
/// snippets as written, and a run against this build's `realtime-server` and `room-backend`
/// through a proxy it cuts. With `CI=true` nothing is skipped: a missing tool or binary fails.
@Suite(.enabled(if: ProcessInfo.processInfo.environment["CI"] == "true" || FileManager.default.isExecutableFile(atPath: "/usr/bin/kotlinc"),
                "needs kotlin, libokhttp-java and junit5 (scripts/setup --test-peers)"))
struct KotlinClientTests {
    static let client = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Clients/kotlin").standardizedFileURL

    @Test("build.sh: the jar builds and every JUnit test passes, the end-to-end one included", .timeLimit(.minutes(5)))
    func buildAndTest() throws {
        let run = try ChildProcess.run(
            "/bin/sh", [Self.client.appendingPathComponent("build.sh").path],
            environment: [
                "CI": "true", "REALTIME_SERVER": BuiltProduct.path("realtime-server"), "ROOM_BACKEND": BuiltProduct.path("room-backend"),
                "REALTIME_CLI": BuiltProduct.path("realtime"),
            ],
            workingDirectory: Self.client.path, timeout: .seconds(280))
        let output = run.standardOutput + run.standardError
        func count(_ what: String) -> Int? {
            output.split(separator: "\n").first { $0.contains("tests \(what)") }
                .flatMap { Int($0.split(separator: " ").first { Int($0) != nil } ?? "") }
        }
        #expect(run.status == 0, "\(output.suffix(3000))")
        #expect(count("failed") == 0 && count("aborted") == 0 && count("skipped") == 0 && (count("successful") ?? 0) >= 100, "\(output.suffix(2000))")
    }
}
