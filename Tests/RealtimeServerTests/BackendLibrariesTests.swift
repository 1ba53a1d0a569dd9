import Foundation
import Spawn
import TestSupport
import Testing

/// The backend libraries in Node, PHP and Python (issue 33), each with its own test runner
/// (the conformance suite included), then end to end (`Backends/conformance/e2e.py`): its
/// example app beside this build's `realtime-server`, with the `realtime join` CLI as the user.
/// With `CI=true` nothing here is skipped: a missing runtime fails.
@Suite struct BackendLibrariesTests {
    static let backends = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Backends").standardizedFileURL
    static let ci = ProcessInfo.processInfo.environment["CI"] == "true"

    static func available(_ tools: String...) -> Bool { ci || tools.allSatisfy(FileManager.default.isExecutableFile(atPath:)) }

    /// Runs the end-to-end script for one library's example app.
    func endToEnd(_ name: String, app: String) throws {
        let run = try ChildProcess.run(
            "/usr/bin/env", ["python3", Self.backends.appendingPathComponent("conformance/e2e.py").path, "--name", name, "--app", app,
                             "--server", BuiltProduct.path("realtime-server"), "--cli", BuiltProduct.path("realtime")],
            workingDirectory: Self.backends.deletingLastPathComponent().path, timeout: .seconds(80))
        let summary = run.standardOutput.split(separator: "\n").last.flatMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        #expect(run.status == 0 && summary?["failed"] as? Int == 0 && summary?["passed"] as? Int == 5,
                "\(run.standardOutput)\n\(run.standardError.suffix(2000))")
    }

    @Test("Node: node --test (conformance, the seed's line, handlers)", .enabled(if: available("/usr/bin/node")), .timeLimit(.minutes(2)))
    func nodeTests() throws {
        let run = try ChildProcess.run("/usr/bin/node", ["--test", "test/"], workingDirectory: Self.backends.appendingPathComponent("node").path,
                                       timeout: .seconds(100))
        let output = run.standardOutput + run.standardError
        #expect(run.status == 0 && output.contains("# fail 0") && !output.contains("# pass 0"), "\(output.suffix(3000))")
    }

    @Test("Node end to end: one auth request, a forbidden room alone, publish, drop and replay, webhooks verified, a page on another origin in Chromium", .enabled(if: available("/usr/bin/node")), .timeLimit(.minutes(2)))
    func nodeEndToEnd() throws {
        try endToEnd("node", app: "node Backends/node/example/app.js")
    }

    @Test("PHP: phpunit (conformance, the seed's line, the front controller)", .enabled(if: available("/usr/bin/php", "/usr/bin/phpunit")), .timeLimit(.minutes(2)))
    func phpTests() throws {
        let run = try ChildProcess.run("/usr/bin/phpunit", [], workingDirectory: Self.backends.appendingPathComponent("php").path, timeout: .seconds(100))
        let output = run.standardOutput + run.standardError
        #expect(run.status == 0 && output.contains("OK ("), "\(output.suffix(3000))")
    }

    @Test("PHP end to end (php -S): one auth request, a forbidden room alone, publish, drop and replay, webhooks verified, a page on another origin in Chromium", .enabled(if: available("/usr/bin/php")), .timeLimit(.minutes(2)))
    func phpEndToEnd() throws {
        try endToEnd("php", app: "php -S 127.0.0.1:{port} Backends/php/example/router.php")
    }

    @Test("Python: pytest (conformance, the seed's line, WSGI and ASGI handlers, pip install)", .timeLimit(.minutes(3)))
    func pythonTests() throws {
        let run = try ChildProcess.run("/usr/bin/env", ["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                                       workingDirectory: Self.backends.appendingPathComponent("python").path, timeout: .seconds(170))
        let output = run.standardOutput + run.standardError
        #expect(run.status == 0 && output.contains(" passed") && !output.contains(" failed") && !output.contains(" skipped"), "\(output.suffix(3000))")
    }

    @Test("Python end to end (WSGI): one auth request, a forbidden room alone, publish, drop and replay, webhooks verified, a page on another origin in Chromium", .timeLimit(.minutes(2)))
    func pythonEndToEnd() throws {
        try endToEnd("python", app: "python3 Backends/python/example/app.py")
    }
}

