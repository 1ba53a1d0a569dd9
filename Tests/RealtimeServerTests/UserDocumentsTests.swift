import Foundation
import Testing

/// What a user reads speaks of the product, not of how it was built: no issue numbers ("issue
/// 34") and no work phases ("phase A") in the README, the DocC articles, the public doc
/// comments (the `///` lines of `Sources/`), the client and backend READMEs and their library
/// sources, the samples' READMEs and `docs/`. An upstream project's issue is cited with its `#`
/// ("swift-corelibs-foundation issue #5472"), which this allows.
@Suite struct UserDocumentsTests {
    static let root = DocumentationSiteTests.root
    static var pattern: Regex<Substring> { /\b[Ii]ssues? [0-9]+|\b[Pp]hase [A-Z]\b/ }

    /// Every file a user reads, and which of its lines count (`///` lines in Swift sources).
    static func documents() throws -> [(path: String, onlyDocComments: Bool)] {
        var found: [(String, Bool)] = [("README.md", false)]
        let files = FileManager.default
        func walk(_ folder: String, _ keep: (String) -> Bool) throws {
            guard let items = files.enumerator(atPath: root.appendingPathComponent(folder).path) else { return }
            for case let item as String in items where keep(item) && !item.contains("node_modules") && !item.hasPrefix("build/") {
                found.append(("\(folder)/\(item)", item.hasSuffix(".swift")))
            }
        }
        try walk("Sources") { $0.hasSuffix(".md") || $0.hasSuffix(".swift") }
        try walk("docs") { $0.hasSuffix(".md") }
        try walk("Samples") { $0.hasSuffix("README.md") }
        try walk("Backends") { $0.hasSuffix("README.md") || $0.hasPrefix("node/src/") || $0.hasPrefix("php/src/") || $0.hasPrefix("python/src/") }
        try walk("Clients") {
            $0.hasSuffix("README.md") || $0.hasPrefix("javascript/src/") || $0.hasPrefix("kotlin/src/main/")
        }
        return found
    }

    @Test("no user-facing document or public doc comment mentions an issue number or a work phase")
    func noIssueNumbersOrPhases() throws {
        let documents = try Self.documents()
        #expect(documents.count > 200, "the documents found: \(documents.count)")
        #expect(documents.contains { $0.path == "Sources/Realtime/Realtime.docc/OrderTracking.md" })
        var mentions: [String] = []
        for (path, onlyDocComments) in documents {
            guard let text = try? String(contentsOf: Self.root.appendingPathComponent(path), encoding: .utf8) else { continue }
            for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated()
            where (!onlyDocComments || line.contains("///")) && line.contains(Self.pattern) {
                mentions.append("\(path):\(number + 1): \(line.trimmingCharacters(in: .whitespaces))")
            }
        }
        #expect(mentions.isEmpty, "\(mentions.count) mentions:\n\(mentions.joined(separator: "\n"))")
    }
}
