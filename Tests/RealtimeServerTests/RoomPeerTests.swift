import Foundation
import RealtimeBackend
import RealtimeProtocol
import RealtimeServer
import TestSupport
import Testing

/// Rooms with third-party peers: tokens minted and checked by PyJWT, a Python `websockets`
/// client joining, and webhooks checked by Pusher's Python library.
@Suite(.enabled(if: PythonPeer.isAvailable, "needs python3 with websockets, pusher and PyJWT (scripts/setup installs them)"))
struct RoomPeerTests {
    struct Frame: Decodable {
        var event: String
        var channel: String?
        var data: String?
    }

    static func roomEvents(_ lines: [String]) -> [[String: JSONValue]] {
        lines.compactMap { try? JSONDecoder().decode(Frame.self, from: Data($0.utf8)) }
            .filter { $0.event == "bird:room_event" }
            .compactMap { $0.data.flatMap { try? JSONDecoder().decode([String: JSONValue].self, from: Data($0.utf8)) } }
    }

    /// Signed with the app's secret under another algorithm (`alg` none, HS384, HS512): the
    /// signature is checked as HS256 before the header is read, so `bad_signature`, as
    /// docs/rooms-protocol.md says (issue 47, item 7: the docs said `invalid_token`).
    @Test("a token minted with PyJWT joins; one with another key or algorithm, an expired exp or another room is refused", arguments: [
        ("app-secret", "order:1", 600, "HS256", "joined"),
        ("wrong-secret", "order:1", 600, "HS256", "bad_signature"),
        ("app-secret", "order:1", 600, "HS384", "bad_signature"),
        ("app-secret", "order:1", 600, "HS512", "bad_signature"),
        ("app-secret", "order:1", 600, "none", "bad_signature"),
        ("app-secret", "order:1", -5, "HS256", "expired"),
        ("app-secret", "order:2", 600, "HS256", "forbidden"),
    ])
    func pyJWTTokens(secret: String, room: String, offset: Int, algorithm: String, outcome: String) throws {
        let fixture = try ServerFixture()
        let token = try PythonPeer.run("jwt_mint.py", [secret, "ann", room, String(offset), #"{"history": 10}"#, algorithm]).trimmingCharacters(in: .whitespacesAndNewlines)
        try fixture.server.hub.publishRoom(appID: "1", room: "order:1", event: "updated", data: #"{"status":"paid"}"#)
        let client = try PythonPeer.start("ws_room_client.py", ["\(fixture.base)/app/\(ServerFixture.app.key)", "order:1", token, "-", "0"])
        let status = client.wait()
        let events = Self.roomEvents(client.lines(atLeast: 2))
        if outcome == "joined" {
            #expect(status == 0)
            #expect(events.last?["event"]?.string == "joined")
            #expect(events.last?["data"]?["id"]?.number == 1)
        } else {
            #expect(status == 3)
            #expect(events.last?["data"]?["code"]?.string == outcome)
        }
    }

    @Test("docs/rooms-protocol.md says what the server answers a token of another algorithm: bad_signature, not invalid_token (issue 47, item 7)")
    func documentedAlgorithms() throws {
        let document = try String(contentsOf: URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../docs/rooms-protocol.md").standardizedFileURL, encoding: .utf8)
        let row = try #require(document.split(separator: "\n").first { $0.hasPrefix("| `bad_signature` |") })
        #expect(["`none`", "HS384", "HS512"].allSatisfy { row.contains($0) }, "\(row)")
        let invalid = try #require(document.split(separator: "\n").first { $0.hasPrefix("| `invalid_token` |") })
        #expect(invalid.contains("signed with this app's secret"), "\(invalid)")
    }

    @Test("the Python websockets client resumes from a position and gets the missed events marked replayed")
    func pythonResume() async throws {
        let fixture = try ServerFixture()
        let hub = fixture.server.hub
        let backend = RealtimeBackend(appKey: ServerFixture.app.key, appSecret: ServerFixture.app.secret)
        try backend.room("order:{id}", history: 20)
        let answer = try #require(await backend.authorizeRooms(["order:5"], user: "ann").rooms["order:5"]?.token)
        let start = try hub.publishRoom(appID: "1", room: "order:5", event: "updated", data: #"{"n":0}"#, rule: RoomRule(history: 20))
        for index in 1...3 { try hub.publishRoom(appID: "1", room: "order:5", event: "updated", data: #"{"n":\#(index)}"#) }
        let since = #"{"epoch":"\#(start.epoch)","id":\#(start.record.id)}"#
        let client = try PythonPeer.start("ws_room_client.py", ["\(fixture.base)/app/\(ServerFixture.app.key)", "order:5", answer, since, "3"])
        #expect(client.wait() == 0)
        let events = Self.roomEvents(client.lines(atLeast: 5))
        #expect(events.compactMap { $0["data"]?["n"]?.number } == [1, 2, 3])
        #expect(events.filter { $0["meta"]?["replayed"]?.bool == true }.count == 3)
        #expect(events.last?["event"]?.string == "joined" && events.last?["data"]?["recovered"]?.bool == true)
    }

    @Test("a room token from RealtimeBackend verifies with PyJWT and carries the rule")
    func backendTokenInPyJWT() async throws {
        let backend = RealtimeBackend(appKey: "k", appSecret: "s3cret")
        try backend.room("chat:{id}", history: 30, presence: true, membersSend: true)
        let token = try #require(await backend.authorizeRooms(["chat:9"], user: "ann").rooms["chat:9"]?.token)
        let claims = try PythonPeer.run("jwt_verify.py", ["s3cret", token])
        let decoded = try JSONDecoder().decode([String: JSONValue].self, from: Data(claims.utf8))
        #expect(decoded["sub"]?.string == "ann" && decoded["room"]?.string == "chat:9")
        #expect(decoded["rule"]?["history"]?.number == 30 && decoded["rule"]?["presence"]?.bool == true)
        #expect(throws: PythonPeer.Failure.self) { try PythonPeer.run("jwt_verify.py", ["other", token]) }
    }

    @Test("webhooks are signed so the pusher library validates them, and the one answered 500 is retried")
    func webhooks() throws {
        let receiver = try PythonPeer.start("webhook_receiver.py", [ServerFixture.app.key, ServerFixture.app.secret, "1"])
        let port = try #require(receiver.lines(atLeast: 1).first?.split(separator: " ").last.map(String.init))
        var app = ServerFixture.app
        app.webhookURL = "http://127.0.0.1:\(port)/webhooks"
        let fixture = try ServerFixture(apps: [app])
        let client = try RoomClient(fixture)
        let rule = RoomRule(history: 10, presence: true, webhook: true)
        #expect(client.joined("chat:1", token: Tokens.make(room: "chat:1", user: "ann", rule: rule)) != nil)
        try fixture.server.hub.publishRoom(appID: "1", room: "chat:1", event: "message", data: #"{"text":"hi"}"#)
        client.send(.subscribe, SubscribeRequest(channel: "news"))

        // The first request is answered 500 and retried about a second later, with what was
        // queued meanwhile in the same batch.
        func validEvents() -> [JSONValue] {
            receiver.lines(atLeast: 0).compactMap { try? JSONDecoder().decode([String: JSONValue].self, from: Data($0.utf8)) }
                .filter { $0["valid"]?.bool == true }.flatMap { $0["events"]?.array ?? [] }
        }
        // Membership and message events queue apart: wait for one of each (either request may
        // have been the refused one, and retried).
        func arrived() -> Bool {
            let names = validEvents().compactMap { $0["name"]?.string }
            return names.contains("channel_occupied") && names.contains("room_event")
        }
        let deadline = ContinuousClock.now + .seconds(20)
        while !arrived(), ContinuousClock.now < deadline { usleep(50_000) }
        let lines = receiver.lines(atLeast: 0)
        #expect(lines.filter { $0.hasPrefix(#"{"refused""#) } == [#"{"refused": 1}"#])
        #expect(!lines.contains(#"{"valid": false}"#))
        let events = validEvents()
        #expect(events.contains { $0["name"]?.string == "room_member_added" && $0["user_id"]?.string == "ann" })
        #expect(events.contains { $0["name"]?.string == "channel_occupied" && $0["channel"]?.string == "news" })
        let roomEvent = try #require(events.first { $0["name"]?.string == "room_event" })
        #expect(roomEvent["room"]?.string == "chat:1" && roomEvent["event"]?.string == "message" && roomEvent["id"]?.number == 1)
        #expect(roomEvent["data"]?.string == #"{"text":"hi"}"#)
        #expect(fixture.server.webhooks.counts.requests >= 2)
    }

    @Test("the docs' Python publishing example publishes to a room whose name has : and ;, and pages it back percent-encoded")
    func pythonPublish() throws {
        let fixture = try ServerFixture()
        let output = try PythonPeer.run("room_publish.py", ["127.0.0.1:\(fixture.server.port)", "1", ServerFixture.app.key, ServerFixture.app.secret,
                                                            "chat:a;b", "message", #"{"text":"hi"}"#])
        let lines = output.split(separator: "\n").compactMap { try? JSONDecoder().decode([String: JSONValue].self, from: Data($0.utf8)) }
        #expect(lines.first?["events"]?.array?.first?["id"]?.number == 1, "\(output)")
        #expect(lines.dropFirst().first?["events"]?.array?.first?["data"]?["text"]?.string == "hi", "\(output)")
        let wrong = try PythonPeer.run("room_publish.py", ["127.0.0.1:\(fixture.server.port)", "1", ServerFixture.app.key, "wrong",
                                                           "chat:1", "message", "{}"])
        #expect(wrong.contains(#""status": 401"#))
    }
}
