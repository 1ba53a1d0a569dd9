import Foundation
import Spawn
import Testing

/// A package of one's own that depends on this one by path, as the README says to (issue 36):
/// every Swift snippet of the README and of the catalogs' pages, as written, imports included,
/// is a target of it; `swift build` must compile them all with no warning and build none of this
/// package's executables (the benchmarks, the chaos run, the samples).
///
/// The package is written to `.build/dependent-package` (its own build folder kept, so a second
/// run is incremental), with `swift-reconnect` beside it a symbolic link to this checkout: the
/// README's `.package(path: "../swift-reconnect")` line is used as written.
@Suite(.serialized)
struct DependentPackageTests {
    static let root = DocumentationSiteTests.root

    /// One Swift block of a Markdown page.
    struct Snippet {
        /// The page's file name without `.md` and the block's place on it, from 1: `GettingStarted2`.
        let name: String
        let code: String

        /// The modules the block imports.
        var imports: [String] {
            code.split(separator: "\n").compactMap { line in
                line.hasPrefix("import ") ? String(line.dropFirst(7).split(separator: " ").first ?? "") : nil
            }
        }
    }

    /// What a snippet takes as given because its page says so before it: the earlier block's
    /// imports (re-exported, as if it were the same file) and the names its prose presumes,
    /// declared in a file beside the snippet's `main.swift`. A block with no entry here is a
    /// whole program.
    static let given: [String: String] = [
        // "An authoriser for a backend written in Swift:", after the first block's `options`.
        "GettingStarted2": """
            @_exported import BirdRealtime
            @MainActor var options = BirdRealtime.Options(appKey: "app-key", host: "127.0.0.1", port: 6001)
            """,
        // "any stream that adopts ReconnectableStream", as the next article shows one.
        "Reconnect1": """
            import Reconnect
            final class GivenStream: ReconnectableStream {
                let destinationHost = "198.51.100.7"
                let reconnectEvents = StreamEventRelay()
                func startConnectAttempt() {}
                func abortConnectAttempt() {}
                func verifyConnection() {}
            }
            let stream = GivenStream()
            """,
        // The app's own lookup of its records.
        "RoomsOnTheServer1": """
            struct Order: Sendable { let userID: String? }
            func findOrder(_ id: String) async -> Order? { nil }
            """,
        // The signing route's inputs: the master key from the backend's secrets, the socket id from the request.
        "RunningTheServer3": """
            let masterKey = "ZmFrZWZha2VmYWtlZmFrZWZha2VmYWtlZmFrZWZha2U="
            let socketID = "1.1"
            """,
        // The client under test, as the page's prose says: the app's own.
        "TestingNetworkChanges1": """
            struct MyClient: Sendable { init(host: String) throws {} }
            """,
    ]

    /// The library products of this package: what an `import` of a snippet depends on.
    static let products: Set<String> = Set(DocumentationSiteTests.modules)

    /// This package's executables: none may be built by the dependent package.
    static let executables = [
        "realtime-server", "reachability-monitor", "realtime", "realtime-demo", "room-backend", "browser-demo", "line-server",
        "line-client", "xmpp-client", "realtime-bench", "rooms-bench", "cluster-bench", "chaos-run", "realtime-client-bench",
        "reconnect-bench", "reachability-bench",
    ]

    /// Every Swift block of the pages.
    static func snippets() throws -> [Snippet] {
        var pages = [root.appendingPathComponent("README.md")]
        for module in DocumentationSiteTests.modules {
            let catalog = root.appendingPathComponent("Sources/\(module)/\(module).docc")
            for name in try FileManager.default.contentsOfDirectory(atPath: catalog.path).sorted() where name.hasSuffix(".md") {
                pages.append(catalog.appendingPathComponent(name))
            }
        }
        var snippets: [Snippet] = []
        for page in pages {
            let base = page.deletingPathExtension().lastPathComponent
            var block: [Substring]?
            var count = 0
            for line in try String(contentsOf: page, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false) {
                if block == nil, line == "```swift" {
                    block = []
                } else if let lines = block, line.hasPrefix("```") {
                    count += 1
                    snippets.append(Snippet(name: "\(base)\(count)", code: lines.joined(separator: "\n") + "\n"))
                    block = nil
                } else {
                    block?.append(line)
                }
            }
        }
        return snippets
    }

    /// What building the dependent package gave.
    struct Build: Sendable {
        /// `swift build`'s exit status and output.
        var status: Int32
        var output: String
        /// The package's folder (`.build/dependent-package/app`).
        var app: URL
        /// The snippets built, a target each.
        var programs: [String]
        /// The README's `.product(…)` lines, and the products the reconnect landing page's snippet imports.
        var readmeProducts: [String]
        var reconnectProducts: [String]
    }

    struct NoReadmeSnippet: Error {}

    /// The package written and built once per test run, for every test of the suite that needs
    /// it (the snippets' test, the quick start's); incremental across runs.
    static let build: Result<Build, any Error> = Result { try writeAndBuild() }

    static func writeAndBuild() throws -> Build {
        let snippets = try Self.snippets()
        guard let readme = snippets.first(where: { $0.name == "README1" }) else { throw NoReadmeSnippet() }
        let programs = snippets.filter { $0.name != "README1" }

        // The README's lines: the dependency, then the products a target names.
        let readmeLines = readme.code.split(separator: "\n").map { $0.trimmingCharacters(in: .whitespaces) }
        guard let dependency = readmeLines.first(where: { $0.hasPrefix(".package(") }) else { throw NoReadmeSnippet() }
        let readmeProducts = readmeLines.filter { $0.hasPrefix(".product(") }
        var reconnectProducts: [String] = []

        let work = Self.root.appendingPathComponent(".build/dependent-package")
        let app = work.appendingPathComponent("app")
        let files = FileManager.default
        try? files.removeItem(at: app.appendingPathComponent("Sources"))
        try files.createDirectory(at: app.appendingPathComponent("Sources"), withIntermediateDirectories: true)
        let link = work.appendingPathComponent("swift-reconnect")
        try? files.removeItem(at: link)
        try files.createSymbolicLink(at: link, withDestinationURL: Self.root)

        var targets: [String] = []
        for snippet in programs {
            let folder = app.appendingPathComponent("Sources/\(snippet.name)")
            try files.createDirectory(at: folder, withIntermediateDirectories: true)
            try snippet.code.write(to: folder.appendingPathComponent("main.swift"), atomically: true, encoding: .utf8)
            var imports = snippet.imports
            if let given = Self.given[snippet.name] {
                try (given + "\n").write(to: folder.appendingPathComponent("Given.swift"), atomically: true, encoding: .utf8)
                imports += Snippet(name: "", code: given.replacingOccurrences(of: "@_exported ", with: "")).imports
            }
            var products = Set(imports).intersection(Self.products).sorted().map { #".product(name: "\#($0)", package: "swift-reconnect"),"# }
            // The README's products are what the reconnect landing page's snippet imports: its target names them as the README writes them.
            if snippet.name == "Reconnect1" {
                reconnectProducts = products
                products = readmeProducts
            }
            targets.append("""
                    .executableTarget(
                        name: "\(snippet.name)",
                        dependencies: [
                            \(products.joined(separator: "\n                "))
                        ],
                        swiftSettings: [.swiftLanguageMode(.v6)]
                    ),
                """)
        }
        let manifest = """
            // swift-tools-version:6.0
            // Written by DependentPackageTests: every Swift snippet of swift-reconnect's README and articles, a target each.
            import PackageDescription

            let package = Package(
                name: "app",
                platforms: [.macOS(.v15)],
                dependencies: [
                    \(dependency)
                ],
                targets: [
            \(targets.joined(separator: "\n"))
                ]
            )

            """
        try manifest.write(to: app.appendingPathComponent("Package.swift"), atomically: true, encoding: .utf8)

        let build = try ChildProcess.run("/usr/bin/env", ["swift", "build"], workingDirectory: app.path, timeout: .seconds(540))
        return Build(status: build.status, output: build.standardOutput + build.standardError, app: app, programs: programs.map(\.name),
                     readmeProducts: readmeProducts, reconnectProducts: reconnectProducts)
    }

    @Test("the README's and articles' Swift snippets compile as written in a package that depends on this one by path, with no warning, and it builds none of this package's executables", .timeLimit(.minutes(10)))
    func snippetsInADependentPackage() throws {
        let build = try Self.build.get()
        #expect(build.programs.count >= 15, "\(build.programs)")
        #expect(Set(Self.given.keys).isSubset(of: Set(build.programs)), "a given for a snippet that is gone: \(Self.given.keys.sorted())")
        #expect(build.readmeProducts.count >= 1)
        #expect(Set(build.reconnectProducts).isSubset(of: Set(build.readmeProducts)) && build.readmeProducts.contains { $0.contains(#""BirdRealtime""#) },
                "the README's products \(build.readmeProducts) against the reconnect snippet's imports \(build.reconnectProducts), and the client's")
        #expect(build.status == 0, "\(build.output.suffix(6000))")
        let warnings = build.output.split(separator: "\n").filter { $0.contains("warning:") }
        #expect(warnings.isEmpty, "\(warnings.joined(separator: "\n"))")
        guard build.status == 0 else { return }

        let products = try FileManager.default.contentsOfDirectory(atPath: build.app.appendingPathComponent(".build/debug").path)
        for program in build.programs {
            #expect(products.contains(program), "\(program) was not built")
        }
        let built = Self.executables.filter { products.contains($0) }
        #expect(built.isEmpty, "the dependent package built this package's executables \(built)")
    }
}
