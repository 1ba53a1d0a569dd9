import Foundation
import Glibc
import Spawn
import TestSupport
import Testing

/// The documentation (issue 36): `scripts/docs` builds every product's DocC catalog from this
/// build's symbol graphs, with any DocC warning an error, and the site is opened in real
/// headless Chromium (`Tests/peers/docs_site.py`): each product's landing page renders with its
/// title and summary, and `Reconnector.manualStart(immediately:)`'s page shows its doc comment.
/// With `CI=true` nothing here is skipped: a missing tool fails.
@Suite(.enabled(if: BrowserClientTools.available, "needs chromium, chromedriver and selenium (scripts/setup --test-peers)"))
struct DocumentationSiteTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../..").standardizedFileURL
    /// The products with a catalog, in the order `scripts/docs` lists them.
    static let modules = [
        "Reconnect", "Reachability", "ReachabilityNetlink", "LineStream", "WebSocket", "RealtimeProtocol", "Realtime", "BirdRealtime",
        "RealtimeServer", "RealtimeBackend", "Redis", "RealtimeCluster", "NetworkLab", "ReconnectTesting", "RealtimeTesting",
    ]

    @Test("scripts/docs builds every catalog with no DocC warning, and in Chromium each landing page and a symbol's doc comment render", .timeLimit(.minutes(4)))
    func site() throws {
        let output = FileManager.default.temporaryDirectory.appendingPathComponent("docs-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: output) }
        let build = try ChildProcess.run(
            "/usr/bin/env", ["bash", Self.root.appendingPathComponent("scripts/docs").path],
            environment: ["DOCS_OUTPUT": output], workingDirectory: Self.root.path, timeout: .seconds(200))
        #expect(build.status == 0, "\(build.standardOutput.suffix(2000))\(build.standardError.suffix(4000))")
        guard build.status == 0 else { return }
        let check = try ChildProcess.run(
            "/usr/bin/env", [
                "python3", PythonPeer.directory.appendingPathComponent("docs_site.py").path,
                "--site", output, "--modules", Self.modules.joined(separator: ","),
            ], timeout: .seconds(120))
        #expect(check.status == 0, "\(check.standardOutput.suffix(3000))\(check.standardError.suffix(3000))")
        #expect(check.standardOutput.contains("docs site: \(Self.modules.count + 2) checks passed"), "\(check.standardOutput.suffix(3000))")
    }
}
