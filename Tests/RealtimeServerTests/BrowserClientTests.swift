import Foundation
import Glibc
import Spawn
import TestSupport
import Testing

/// The browser client (`Clients/javascript`, issue 32) in the suite: its types checked by
/// TypeScript, its Node tests (a manual clock and a fake socket, and one against this build's
/// `realtime-server` and `room-backend` through a proxy it cuts) run with Node's own runner,
/// and the client in real headless Chromium driven by selenium (`Tests/peers/browser_client.py`).
/// With `CI=true` nothing here is skipped: a missing tool fails.
@Suite(.enabled(if: BrowserClientTools.available, "needs node 20, tsc, chromium, chromedriver and selenium (scripts/setup --test-peers)"))
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

    @Test("the shared transcripts (Clients/conformance) pass in real headless Chromium too, as in Node, Swift and Kotlin", .timeLimit(.minutes(3)))
    func transcriptsInChromium() throws {
        let run = try ChildProcess.run("/usr/bin/env", ["python3", Self.client.appendingPathComponent("test/browser_conformance.py").path], timeout: .seconds(150))
        let lines = run.standardOutput.split(separator: "\n")
        let summary = lines.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        let transcripts = try FileManager.default.contentsOfDirectory(atPath: Self.client.appendingPathComponent("../conformance/transcripts").path)
            .filter { $0.hasSuffix(".json") }
        #expect(run.status == 0 && summary?["failed"] as? Int == 0, "\(run.standardOutput.suffix(3000))\(run.standardError.suffix(2000))")
        #expect(summary?["passed"] as? Int == transcripts.count && transcripts.count >= 16, "\(run.standardOutput.suffix(2000))")
    }

    @Test("in real headless Chromium: the seed's snippets as written, the module imported across origins, 5 drops replayed in order, a server restart, 4009, 40 rooms in one auth request (a forbidden one alone), presence across two pages, an encrypted channel and a sealed room opened with libsodium's boxes, a hidden page and a frozen tab whose connections died silently verified when shown and on resume, offline and online, history() and events(), signin on every connection, a move between two nodes over Redis replayed from the same epoch", .timeLimit(.minutes(4)))
    func chromium() throws {
        let screenshot = FileManager.default.temporaryDirectory.appendingPathComponent("browser-client-\(getpid()).png").path
        let run = try ChildProcess.run(
            "/usr/bin/env", [
                "python3", PythonPeer.directory.appendingPathComponent("browser_client.py").path,
                "--server", BuiltProduct.path("realtime-server"), "--backend", BuiltProduct.path("room-backend"),
                "--screenshot", screenshot,
            ], timeout: .seconds(180))
        defer { try? FileManager.default.removeItem(atPath: screenshot) }
        let lines = run.standardOutput.split(separator: "\n")
        let summary = lines.last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(run.status == 0, "\(lines.filter { $0.hasPrefix("FAIL") })\n\(run.standardError.suffix(3000))")
        #expect(summary?["failed"] as? Int == 0 && (summary?["passed"] as? Int ?? 0) >= 22, "\(run.standardOutput.suffix(3000))")
        #expect(FileManager.default.fileExists(atPath: screenshot))
    }
}

/// Whether the browser client's tools are here: always true with `CI=true` (a missing one fails).
enum BrowserClientTools {
    static let available: Bool = {
        if ProcessInfo.processInfo.environment["CI"] == "true" { return true }
        return ["/usr/bin/node", "/usr/bin/tsc", "/usr/bin/chromium", "/usr/bin/chromedriver"].allSatisfy(FileManager.default.isExecutableFile(atPath:))
    }()
}

/// The browser client's demo page (`Samples/browser-demo`) in real headless Chromium: its two
/// buttons clicked (`Tests/peers/browser_demo.py`), the events missed shown replayed, in order.
@Suite(.enabled(if: BrowserClientTools.available, "needs chromium, chromedriver and selenium (scripts/setup --test-peers)"))
struct BrowserDemoTests {
    @Test("the demo page: live events, then Drop and Restart clicked, the events missed while away replayed with a badge, none twice", .timeLimit(.minutes(2)))
    func demoPage() throws {
        let screenshot = FileManager.default.temporaryDirectory.appendingPathComponent("browser-demo-\(getpid()).png").path
        let run = try ChildProcess.run(
            "/usr/bin/env", [
                "python3", PythonPeer.directory.appendingPathComponent("browser_demo.py").path,
                "--demo", BuiltProduct.path("browser-demo"), "--screenshot", screenshot,
            ], timeout: .seconds(80))
        defer { try? FileManager.default.removeItem(atPath: screenshot) }
        let summary = run.standardOutput.split(separator: "\n").last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(run.status == 0, "\(run.standardOutput)\n\(run.standardError.suffix(3000))")
        #expect(summary?["failed"] as? Int == 0 && summary?["passed"] as? Int == 3, "\(run.standardOutput.suffix(2000))")
        #expect(FileManager.default.fileExists(atPath: screenshot))
    }
}
