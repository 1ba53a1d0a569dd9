import Foundation
import SystemSupport
@testable import Realtime
import RealtimeProtocol
import TestSupport
import Testing

/// The browser client (`Clients/javascript`, run in Node with its WebSocket) and the Swift
/// client in one presence room of the real server (issue 32, "Interop"): each sees the other's
/// join, sends and leave, with `meta.from` as the backend vouched for it. The browser client's
/// tokens come from the `room-backend` sample, the Swift client's from `RealtimeBackend`.
@Suite("The browser client and the Swift client in one room", .enabled(if: BrowserPeer.available, "needs node 20 (CI=true requires it)"))
struct BrowserClientInteropTests {
    struct Line: Decodable {
        var event: String?
        var data: JSONValue?
        var from: String?
        var ready: Bool?
        var members: [String]?
        var sent: String?
        var left: String?
    }

    @Test("joins, sends both ways and a leave, seen on both sides", .timeLimit(.minutes(1)))
    func sameRoom() async throws {
        let bed = try RoomTestBed(user: "ann")
        let seen = Locked<[(event: String, data: JSONValue, from: String?)]>([])
        let chat = bed.bird.join("chat:1")
        chat.bindAll { event, data, meta in seen.withLock { $0.append((event, data, meta.from)) } }
        bed.bird.connect()
        try await chat.ready()

        let app = RoomTestBed.app
        let backend = try BackgroundPeer(executable: BuiltProduct.path("room-backend"), arguments: [
            "--app-id", app.id, "--app-key", app.key, "--app-secret", app.secret,
            "--room", "chat:{id},history=100,presence,members-send", "--port", "0",
        ])
        let backendPort = try #require(backend.lines(atLeast: 1).first.flatMap { $0.split(separator: " ").last })
        let browser = try BackgroundPeer(executable: "/usr/bin/node", arguments: [
            "--experimental-websocket", PythonPeer.directory.appendingPathComponent("js_room_peer.mjs").path,
            String(bed.port), app.key, "http://127.0.0.1:\(backendPort)/rooms/auth", "bo", "chat:1",
        ])
        func lines(_ count: Int) -> [Line] {
            browser.lines(atLeast: count, timeout: 10).compactMap { try? JSONDecoder().decode(Line.self, from: Data($0.utf8)) }
        }
        func browserSaw(_ predicate: (Line) -> Bool) async -> Bool {
            await eventually { lines(1).contains(where: predicate) }
        }

        // The browser joins: it lists both users; the Swift member is told of its arrival.
        #expect(await browserSaw { $0.ready == true && $0.members == ["ann", "bo"] }, "\(lines(1))")
        #expect(await eventually { seen.withLock { $0.contains { $0.event == "join" && $0.data["id"]?.string == "bo" } } })

        // Sends both ways, each from its user.
        try chat.send("said", data: .object(["by": .string("ann")]))
        #expect(await browserSaw { $0.event == "said" && $0.from == "ann" && $0.data?["by"]?.string == "ann" }, "\(lines(1))")
        try browser.send(#"send said {"by":"bo"}"#)
        #expect(await eventually { seen.withLock { $0.contains { $0.event == "said" && $0.from == "bo" && $0.data["by"]?.string == "bo" } } })

        // The browser leaves: the Swift member is told.
        try browser.send("leave")
        #expect(await eventually { seen.withLock { $0.contains { $0.event == "leave" && $0.data["id"]?.string == "bo" } } })
        try browser.send("quit")
        #expect(browser.wait() == 0)
    }
}

/// Whether `node` is here to run the browser client: always true with `CI=true` (a missing
/// one fails).
enum BrowserPeer {
    static let available = ProcessInfo.processInfo.environment["CI"] == "true" || FileManager.default.isExecutableFile(atPath: "/usr/bin/node")
}
