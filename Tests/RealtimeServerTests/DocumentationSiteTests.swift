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

    /// The articles the catalogs hold (the tasks: the quick start, getting started, rooms, your
    /// own stream, XMPPFramework, reachability, the server, its rooms, several nodes, the console, NetworkLab).
    static let articles = 11

    @Test("scripts/docs builds every catalog with no DocC warning, and in Chromium each landing page, each article and a symbol's doc comment render", .timeLimit(.minutes(4)))
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
                "--site", output, "--modules", Self.modules.joined(separator: ","), "--articles", String(Self.articles),
            ], timeout: .seconds(120))
        #expect(check.status == 0, "\(check.standardOutput.suffix(3000))\(check.standardError.suffix(3000))")
        #expect(check.standardOutput.contains("docs site: \(Self.modules.count + Self.articles + 2) checks passed"), "\(check.standardOutput.suffix(3000))")
    }

    @Test("every relative link in README.md and in the catalogs' pages resolves: to a file or folder of the repository, and an anchor to one of its headings")
    func readmeLinks() throws {
        var pages = [Self.root.appendingPathComponent("README.md")]
        for module in Self.modules {
            let catalog = Self.root.appendingPathComponent("Sources/\(module)/\(module).docc")
            for name in try FileManager.default.contentsOfDirectory(atPath: catalog.path) where name.hasSuffix(".md") {
                pages.append(catalog.appendingPathComponent(name))
            }
        }
        #expect(pages.count >= 1 + Self.modules.count + 9, "\(pages.map(\.lastPathComponent))")
        for page in pages {
            try Self.checkLinks(in: page)
        }
    }

    @Test("each product's landing page says which Debian packages it builds and runs with, and scripts/setup installs every one it builds with")
    func debianPackages() throws {
        let setup = try String(contentsOf: Self.root.appendingPathComponent("scripts/setup"), encoding: .utf8)
        for module in Self.modules {
            let page = try String(contentsOf: Self.root.appendingPathComponent("Sources/\(module)/\(module).docc/\(module).md"), encoding: .utf8)
            let says = page.contains("Debian packages") || page.contains("no Debian package") || page.contains("No Debian package")
            #expect(says, "\(module)'s landing page names no Debian package")
            // Every `…-dev` package it names to build with is one scripts/setup installs.
            for name in Self.codeSpans(in: page) where name.hasSuffix("-dev") {
                #expect(setup.contains(" \(name)") || setup.contains("\n  \(name)"), "\(module): scripts/setup does not install \(name)")
            }
        }
    }

    /// The contents of a Markdown text's single-backtick code spans.
    static func codeSpans(in text: String) -> [String] {
        text.replacingOccurrences(of: "``", with: "").split(separator: "`", omittingEmptySubsequences: false).enumerated()
            .filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    /// Checks every relative link of the Markdown file `page`, from its folder.
    static func checkLinks(in page: URL) throws {
        let text = try String(contentsOf: page, encoding: .utf8)
        let links = Self.links(in: text).filter { !$0.contains("://") && !$0.hasPrefix("mailto:") && !$0.hasPrefix("doc:") }
        let folder = page.deletingLastPathComponent()
        for link in links {
            let parts = link.split(separator: "#", maxSplits: 1).map(String.init)
            let path = parts.first ?? ""
            let target = path.isEmpty ? page : folder.appendingPathComponent(path).standardizedFileURL
            #expect(FileManager.default.fileExists(atPath: target.path), "\(page.lastPathComponent): \(link): no \(target.path)")
            guard parts.count == 2, let text = try? String(contentsOf: target, encoding: .utf8) else { continue }
            let anchors = Set(text.split(separator: "\n").filter { $0.hasPrefix("#") }.map { Self.anchor(String($0.drop { $0 == "#" })) })
            #expect(anchors.contains(parts[1]), "\(link): no heading with the anchor \(parts[1])")
        }
    }

    /// The targets of a Markdown text's inline links, `[text](target)`.
    static func links(in text: String) -> [String] {
        var links: [String] = []
        var rest = Substring(text)
        while let open = rest.range(of: "](") {
            rest = rest[open.upperBound...]
            guard let close = rest.firstIndex(of: ")") else { break }
            links.append(String(rest[..<close]))
            rest = rest[close...]
        }
        return links
    }

    /// A heading's anchor as GitHub makes it: lowercased, spaces to hyphens, punctuation but
    /// hyphens and underscores dropped.
    static func anchor(_ heading: String) -> String {
        String(heading.trimmingCharacters(in: .whitespaces).lowercased().compactMap { character -> Character? in
            if character == " " { return "-" }
            return character.isLetter || character.isNumber || character == "-" || character == "_" ? character : nil
        })
    }
}
