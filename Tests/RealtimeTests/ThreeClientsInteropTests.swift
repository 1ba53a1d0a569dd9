import Foundation
import Glibc
import Realtime
import RealtimeProtocol
import Spawn
import SystemSupport
import TestSupport
import Testing

/// The lifecycle seed's three clients in one presence room of the real server (issue 37,
/// "a Swift client, a browser page and the Kotlin client … see each other"): the Swift client in
/// this process, the browser client in a page of real headless Chromium
/// (`Tests/peers/browser_room_peer.py`) and the Kotlin client on the JVM (`Clients/kotlin/peer`,
/// built by `build.sh peer`). Each sees the others' joins, sends (with `meta.from` as the
/// backend vouched for it) and leaves. The peers' tokens come from the `room-backend` sample.
@Suite("The Swift, browser and Kotlin clients in one room", .enabled(if: ThreeClientsTools.available,
                                                                     "needs kotlin, chromium, chromedriver and selenium (scripts/setup --test-peers)"))
struct ThreeClientsInteropTests {
    typealias Line = BrowserClientInteropTests.Line

    static let kotlinClient = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../Clients/kotlin").standardizedFileURL

    /// Builds the Kotlin peer in `folder` (its own, so a build of the Kotlin tests beside it is
    /// left alone) and returns the command that runs it.
    static func kotlinPeerCommand(in folder: String) throws -> [String] {
        let build = try ChildProcess.run(
            "/bin/sh", [kotlinClient.appendingPathComponent("build.sh").path, "peer"],
            environment: ["KOTLIN_BUILD_DIR": folder], workingDirectory: kotlinClient.path, timeout: .seconds(280))
        #expect(build.status == 0, "\(build.standardError.suffix(3000))")
        let command = build.standardOutput.split(separator: "\n").last.map { $0.split(separator: " ").map(String.init) } ?? []
        try #require(command.first == "java" && command.count == 4, "\(build.standardOutput.suffix(1000))")
        return command
    }

    @Test("joins, a send from each and leaves, seen by the other two", .timeLimit(.minutes(4)))
    func oneRoom() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("kotlin-peer-\(getpid())").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let kotlinCommand = try Self.kotlinPeerCommand(in: folder)
        let bed = try RoomTestBed(user: "ann")
        let seen = Locked<[(event: String, data: JSONValue, from: String?)]>([])
        let chat = bed.bird.join("chat:3")
        chat.bindAll { event, data, meta in seen.withLock { $0.append((event, data, meta.from)) } }
        bed.bird.connect()
        try await chat.ready()
        func swiftSaw(_ event: String, _ key: String, _ value: String, from: String? = nil) async -> Bool {
            func matches(_ item: (event: String, data: JSONValue, from: String?)) -> Bool {
                guard item.event == event, item.data[key]?.string == value else { return false }
                return from == nil || item.from == from
            }
            return await eventually(timeout: .seconds(10)) { seen.withLock { $0.contains(where: matches) } }
        }

        let app = RoomTestBed.app
        let backend = try BackgroundPeer(executable: BuiltProduct.path("room-backend"), arguments: [
            "--app-id", app.id, "--app-key", app.key, "--app-secret", app.secret,
            "--room", "chat:{id},history=100,presence,members-send", "--port", "0",
        ])
        let backendPort = try #require(backend.lines(atLeast: 1).first.flatMap { $0.split(separator: " ").last })
        let peerArguments = [String(bed.port), app.key, "http://127.0.0.1:\(backendPort)/rooms/auth"]
        func saw(_ peer: BackgroundPeer, _ predicate: (Line) -> Bool) async -> Bool {
            await eventually(timeout: .seconds(15)) {
                peer.lines(atLeast: 1, timeout: 1).contains { line in
                    (try? JSONDecoder().decode(Line.self, from: Data(line.utf8))).map(predicate) ?? false
                }
            }
        }

        // Kotlin joins, then the browser: each lists who was there; the others are told.
        let kotlin = try BackgroundPeer(executable: "/usr/bin/java", arguments: Array(kotlinCommand.dropFirst()) + peerArguments + ["ko", "chat:3"])
        #expect(await saw(kotlin) { $0.ready == true && $0.members == ["ann", "ko"] }, "\(kotlin.lines(atLeast: 1))")
        #expect(await swiftSaw("join", "id", "ko"))
        let browser = try PythonPeer.start("browser_room_peer.py", peerArguments + ["bo", "chat:3"])
        #expect(await saw(browser) { $0.ready == true && $0.members == ["ann", "bo", "ko"] }, "\(browser.lines(atLeast: 1))")
        #expect(await swiftSaw("join", "id", "bo"))
        #expect(await saw(kotlin) { $0.event == "join" && $0.data?["id"]?.string == "bo" }, "\(kotlin.lines(atLeast: 1))")

        // A send from each, seen by the other two with its sender.
        try chat.send("said", data: .object(["by": .string("ann")]))
        for peer in [kotlin, browser] {
            #expect(await saw(peer) { $0.event == "said" && $0.from == "ann" && $0.data?["by"]?.string == "ann" }, "\(peer.lines(atLeast: 1))")
        }
        try kotlin.send(#"send said {"by":"ko"}"#)
        #expect(await swiftSaw("said", "by", "ko", from: "ko"))
        #expect(await saw(browser) { $0.event == "said" && $0.from == "ko" && $0.data?["by"]?.string == "ko" }, "\(browser.lines(atLeast: 1))")
        try browser.send(#"send said {"by":"bo"}"#)
        #expect(await swiftSaw("said", "by", "bo", from: "bo"))
        #expect(await saw(kotlin) { $0.event == "said" && $0.from == "bo" && $0.data?["by"]?.string == "bo" }, "\(kotlin.lines(atLeast: 1))")

        // Kotlin leaves: the Swift client and the page are told; then the page goes.
        try kotlin.send("leave")
        #expect(await swiftSaw("leave", "id", "ko"))
        #expect(await saw(browser) { $0.event == "leave" && $0.data?["id"]?.string == "ko" }, "\(browser.lines(atLeast: 1))")
        try browser.send("quit")
        #expect(await swiftSaw("leave", "id", "bo"))
        try kotlin.send("quit")
        #expect(browser.wait() == 0)
        #expect(kotlin.wait() == 0)
        bed.bird.disconnect()
    }
}

/// Whether the three clients' tools are here: always true with `CI=true` (a missing one fails).
enum ThreeClientsTools {
    static let available: Bool = {
        if ProcessInfo.processInfo.environment["CI"] == "true" { return true }
        return ["/usr/bin/kotlinc", "/usr/bin/java", "/usr/bin/chromium", "/usr/bin/chromedriver"].allSatisfy(FileManager.default.isExecutableFile(atPath:))
    }()
}
