import Foundation
import Spawn
import TestSupport
import Testing

/// The browser client (`Clients/javascript`, issue 32) in the suite: its types checked by
/// TypeScript, its Node tests (a manual clock and a fake socket, and one against this build's
/// `realtime-server` and `room-backend` through a proxy it cuts) run with Node's own runner.
/// With `CI=true` nothing here is skipped: a missing `node` or `tsc` fails.
@Suite(.enabled(if: BrowserClientTools.available, "needs node 20 and tsc (scripts/setup --test-peers installs node-typescript)"))
struct BrowserClientTests {
    static let client = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Clients/javascript").standardizedFileURL

    @Test("its JSDoc types check under tsc --checkJs --strict", .timeLimit(.minutes(2)))
    func typesCheck() throws {
        let check = try ChildProcess.run("/usr/bin/tsc", ["-p", Self.client.appendingPathComponent("tsconfig.json").path], timeout: .seconds(100))
        #expect(check.status == 0, "\(check.standardOutput)\(check.standardError)")
    }

    @Test("its Node tests pass: the machine's rules under a manual clock, and a page's life against the real server (drops, replay, no second auth request)", .timeLimit(.minutes(2)))
    func nodeTests() throws {
        let run = try ChildProcess.run(
            "/usr/bin/node", ["--experimental-websocket", "--test", "test/"],
            environment: [
                "CI": "true",
                "REALTIME_SERVER": BuiltProduct.path("realtime-server"),
                "ROOM_BACKEND": BuiltProduct.path("room-backend"),
            ],
            workingDirectory: Self.client.path, timeout: .seconds(100))
        let output = run.standardOutput + run.standardError
        func count(_ name: String) -> Int? {
            output.split(separator: "\n").first { $0.hasPrefix("# \(name) ") }.flatMap { Int($0.split(separator: " ").last ?? "") }
        }
        #expect(run.status == 0, "\(output.suffix(4000))")
        #expect(count("fail") == 0 && count("skipped") == 0, "\(output.suffix(2000))")
        #expect((count("pass") ?? 0) >= 70, "\(output.suffix(2000))")
    }
}

/// Whether the browser client's tools are here: always true with `CI=true` (a missing one fails).
enum BrowserClientTools {
    static let available: Bool = {
        if ProcessInfo.processInfo.environment["CI"] == "true" { return true }
        return FileManager.default.isExecutableFile(atPath: "/usr/bin/node") && FileManager.default.isExecutableFile(atPath: "/usr/bin/tsc")
    }()
}
