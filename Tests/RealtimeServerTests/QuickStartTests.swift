import Foundation
import Spawn
import TestSupport
import Testing

/// "Order tracking in ten minutes" (`Sources/Realtime/Realtime.docc/OrderTracking.md`), run as a
/// new user runs it: every file of the page written as given, every command run as given, in the
/// page's order, on the page's ports (6001, 8080, 8000; below the kernel's ephemeral range, so no
/// other test's free port takes them). Two commands are the test's own way of doing what the
/// page says: `swift run realtime-server` is this build's binary (with `$XDG_STATE_HOME` in a
/// temporary folder, so the default data folder is the test's), and `swift run … OrderWatch` is
/// the page's Swift snippet as the dependent package built it (the page's own `Package.swift` for
/// it differs only in its name). The page is watched in headless Chromium (`Tests/peers/page_watch.py`). The server is
/// stopped with SIGINT and started again, and the Node and PHP backends replace the Python one in
/// turn; every client must show every status once, in order, in one epoch.
extension DependentPackageTests {
    /// One fenced block of the page.
    struct Block {
        var language: String
        var lines: [String]
    }

    static let quickStart = root.appendingPathComponent("Sources/Realtime/Realtime.docc/OrderTracking.md")

    static func blocks(of page: URL) throws -> [Block] {
        var blocks: [Block] = []
        var current: Block?
        for line in try String(contentsOf: page, encoding: .utf8).split(separator: "\n", omittingEmptySubsequences: false).map(String.init) {
            if current == nil, line.hasPrefix("```"), line.count > 3 {
                current = Block(language: String(line.dropFirst(3)), lines: [])
            } else if let block = current, line.hasPrefix("```") {
                blocks.append(block)
                current = nil
            } else {
                current?.lines.append(line)
            }
        }
        return blocks
    }

    /// The file a block is, named by its first comment line (`# order-tracking/backend.py`,
    /// `// …`, `<!-- … -->`, after `<?php`).
    static func fileName(_ block: Block) -> String? {
        for line in block.lines.prefix(2) {
            for (open, close) in [("# ", ""), ("// ", ""), ("<!-- ", " -->")] where line.hasPrefix(open + "order-tracking/") {
                let rest = line.dropFirst(open.count)
                let name = rest.split(separator: ":").first.map(String.init) ?? String(rest)
                return close.isEmpty ? name : String(name.dropLast(close.count))
            }
        }
        return nil
    }

    /// Whether something listens on loopback `port`.
    static func listening(_ port: Int) -> Bool {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard socket >= 0 else { return false }
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(socket, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
    }

    @Test("the quick start (Order tracking in ten minutes) as written: server, Python backend, page in Chromium, Swift service, Kotlin program; a server restart and the Node and PHP backends, every status once, in order", .timeLimit(.minutes(10)))
    func orderTrackingQuickStart() async throws {
        let blocks = try Self.blocks(of: Self.quickStart)
        let commands = blocks.filter { $0.language == "sh" }.flatMap(\.lines).filter { !$0.isEmpty }
        let files = blocks.compactMap { block in Self.fileName(block).map { ($0, block.lines.joined(separator: "\n") + "\n") } }
        #expect(Set(files.map(\.0)) == ["order-tracking/backend.py", "order-tracking/order.html", "order-tracking/OrderWatch.kt",
                                         "order-tracking/backend.mjs", "order-tracking/backend.php"], "\(files.map(\.0))")
        func command(_ prefix: String) throws -> String {
            let found = commands.filter { $0.hasPrefix(prefix) }
            try #require(found.count >= 1, "no command starting \(prefix) in \(commands)")
            return found[0]
        }
        let server = try command("swift run realtime-server ")
        let python = try command("PYTHONPATH=Backends/python/src python3 ")
        let curls = commands.filter { $0.hasPrefix("curl ") }
        let page = try command("python3 -m http.server ")
        let (jar, kotlinc, java) = (try command("Clients/kotlin/build.sh jar"), try command("kotlinc "), try command("java "))
        let (node, php) = (try command("node "), try command("php -S "))
        let swiftService = "swift run --package-path ../OrderWatch OrderWatch"
        let known = [server, python, page, swiftService, jar, kotlinc, java, node, php] + curls
        #expect(Set(commands) == Set(known), "a command the test does not run: \(Set(commands).subtracting(known))")
        let statuses = ["paid", "packed", "shipped", "delivered", "returned"]
        try #require(curls.count == 5 && zip(curls, statuses).allSatisfy { $0.contains("\"\($1)\"") }, "\(curls)")
        for port in [6001, 8080, 8000] {
            try #require(!Self.listening(port), "port \(port), the quick start's, is taken by another process")
        }

        // The Swift service: the page's snippet, built by the dependent package.
        let build = try Self.build.get()
        try #require(build.status == 0, "the dependent package: \(build.output.suffix(3000))")
        let snippet = try #require(try Self.snippets().first { $0.name.hasPrefix("OrderTracking") }, "the page's Swift service")
        let watcher = build.app.appendingPathComponent(".build/debug/\(snippet.name)").path

        // The user's folder: the page's files, the clone's libraries beside them.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("order-tracking-\(getpid())")
        defer { try? FileManager.default.removeItem(at: folder) }
        let fileManager = FileManager.default
        try fileManager.createDirectory(at: folder.appendingPathComponent("order-tracking"), withIntermediateDirectories: true)
        for (name, text) in files { try text.write(to: folder.appendingPathComponent(name), atomically: true, encoding: .utf8) }
        try fileManager.createSymbolicLink(at: folder.appendingPathComponent("Backends"), withDestinationURL: Self.root.appendingPathComponent("Backends"))
        let kotlin = folder.appendingPathComponent("Clients/kotlin")
        try fileManager.createDirectory(at: kotlin, withIntermediateDirectories: true)
        for name in ["build.sh", "src"] {
            try fileManager.createSymbolicLink(at: kotlin.appendingPathComponent(name), withDestinationURL: Self.root.appendingPathComponent("Clients/kotlin/\(name)"))
        }
        let state = folder.appendingPathComponent("state").path

        var running: [ChildProcess] = []
        defer { for process in running { _ = process.signal(SIGKILL, toProcessGroup: true) } }
        func start(_ line: String) throws -> ChildProcess {
            let process: ChildProcess
            if line.hasPrefix("swift run realtime-server ") {
                let arguments = line.dropFirst("swift run realtime-server ".count).split(separator: " ").map(String.init)
                process = try ChildProcess(BuiltProduct.path("realtime-server"), arguments, environment: ["XDG_STATE_HOME": state], workingDirectory: folder.path)
            } else if line == swiftService {
                process = try ChildProcess(watcher, workingDirectory: folder.path)
            } else {
                process = try ChildProcess("/bin/sh", ["-c", line], workingDirectory: folder.path) // its own process group: signalled as one
            }
            running.append(process)
            return process
        }
        func run(_ line: String, timeout: Duration = .seconds(120)) throws -> ChildProcess.Result {
            try ChildProcess.run("/bin/sh", ["-c", line], workingDirectory: folder.path, timeout: timeout)
        }
        func lines(_ process: ChildProcess) -> String { (process.outputLines + process.errorLines).suffix(30).joined(separator: "\n") }
        /// The `(event N` ids a client printed, in order.
        func ids(_ process: ChildProcess) -> [Int] {
            process.outputLines.compactMap { line in
                line.range(of: "(event ").flatMap { Int(line[$0.upperBound...].prefix { $0.isNumber }) }
            }
        }
        /// The statuses the page showed, in order.
        func shown(_ watch: ChildProcess) -> [String] {
            watch.outputLines.filter { $0.hasPrefix("text ") }.compactMap { line in
                try? JSONDecoder().decode(String.self, from: Data(line.dropFirst(5).utf8))
            }.filter { $0 != "…" }
        }

        // 1. The server, with no storage option.
        var serverProcess = try start(server)
        try #require(await eventually(timeout: .seconds(20)) { Self.listening(6001) }, "the server: \(lines(serverProcess))")
        // 2. The Python backend, and the first change.
        let pythonProcess = try start(python)
        try #require(await eventually(timeout: .seconds(20)) { Self.listening(8080) }, "the backend: \(lines(pythonProcess))")
        let paid = try run(curls[0])
        try #require(paid.status == 0, "\(curls[0]): \(paid.standardOutput) \(paid.standardError)")
        // 3. The page, watched in Chromium: the current state on load.
        let pageServer = try start(page)
        try #require(await eventually(timeout: .seconds(20)) { Self.listening(8000) }, "the page's server: \(lines(pageServer))")
        let watch = try ChildProcess("/usr/bin/env", ["python3", Self.root.appendingPathComponent("Tests/peers/page_watch.py").path,
                                                      "http://127.0.0.1:8000/order.html", "#status"])
        running.append(watch)
        #expect(await eventually(timeout: .seconds(30)) { shown(watch) == ["paid"] }, "the page on load: \(lines(watch))")
        // 4. The Swift service.
        let swiftProcess = try start(swiftService)
        #expect(await eventually(timeout: .seconds(20)) { swiftProcess.outputLines.contains("order 1042 now: paid (event 1)") }, "\(lines(swiftProcess))")
        // 5. The Kotlin program.
        for line in [jar, kotlinc] {
            let built = try run(line, timeout: .seconds(600))
            try #require(built.status == 0, "\(line): \(built.standardOutput.suffix(2000)) \(built.standardError.suffix(2000))")
        }
        let kotlinProcess = try start(java)
        #expect(await eventually(timeout: .seconds(30)) { kotlinProcess.outputLines.contains("order 1042 now: paid (event 1)") }, "\(lines(kotlinProcess))")

        // 6. Live: packed.
        try #require(try run(curls[1]).status == 0)
        #expect(await eventually(timeout: .seconds(10)) { ids(swiftProcess) == [1, 2] && ids(kotlinProcess) == [1, 2] && shown(watch).last == "packed" },
                "\(lines(swiftProcess))\n\(lines(kotlinProcess))\n\(lines(watch))")
        // The server stopped (Ctrl-C) and started again; the order ships as soon as it answers.
        #expect(serverProcess.signal(SIGINT))
        _ = try serverProcess.waitUntilExit(timeout: .seconds(10))
        serverProcess = try start(server)
        var shipped = false
        for _ in 0..<100 where !shipped {
            shipped = try run(curls[2], timeout: .seconds(10)).status == 0
            if !shipped { try await Task.sleep(for: .milliseconds(100)) }
        }
        try #require(shipped, "\(curls[2]) after the restart: \(lines(serverProcess)) \(lines(pythonProcess))")
        #expect(await eventually(timeout: .seconds(30)) { ids(swiftProcess) == [1, 2, 3] && ids(kotlinProcess) == [1, 2, 3] && shown(watch).last == "shipped" },
                "\(lines(swiftProcess))\n\(lines(kotlinProcess))\n\(lines(watch))")

        // The same backend in Node, then in PHP, on the same port.
        var backend = pythonProcess
        for (line, curl, status, id) in [(node, curls[3], "delivered", 4), (php, curls[4], "returned", 5)] {
            #expect(backend.signal(SIGTERM, toProcessGroup: true))
            _ = try backend.waitUntilExit(timeout: .seconds(10))
            try #require(await eventually(timeout: .seconds(10)) { !Self.listening(8080) })
            backend = try start(line)
            try #require(await eventually(timeout: .seconds(20)) { Self.listening(8080) }, "\(line): \(lines(backend))")
            let change = try run(curl)
            try #require(change.status == 0, "\(line): \(change.standardOutput) \(change.standardError) \(lines(backend))")
            #expect(await eventually(timeout: .seconds(10)) { ids(swiftProcess).last == id && ids(kotlinProcess).last == id && shown(watch).last == status },
                    "\(line)\n\(lines(swiftProcess))\n\(lines(kotlinProcess))\n\(lines(watch))")
        }
        try await Task.sleep(for: .milliseconds(300)) // anything late or twice would arrive now
        #expect(ids(swiftProcess) == [1, 2, 3, 4, 5], "the Swift service, every status once, in order: \(swiftProcess.outputLines)")
        #expect(ids(kotlinProcess) == [1, 2, 3, 4, 5], "the Kotlin program: \(kotlinProcess.outputLines)")
        #expect(shown(watch) == ["paid", "packed", "shipped", "delivered", "returned"], "the page: \(watch.outputLines)")
        #expect(FileManager.default.fileExists(atPath: state + "/realtime-server/rooms.sqlite3"), "the rooms in the default data folder")
        _ = watch.signal(SIGTERM) // the browser closed by its driver
        _ = try? watch.waitUntilExit(timeout: .seconds(10))
    }
}
