import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import RealtimeBackend
import RealtimeProtocol
import RealtimeServer
import ReconnectTesting
import TestSupport
import Testing
import Spawn

/// `RealtimeBackend` (rules by pattern, the batched answer, grants, sealed rooms) with the real
/// server, and the `room-backend` sample over HTTP.
@Suite("Room backend")
struct RoomBackendTests {
    static func backend() throws -> RealtimeBackend {
        let backend = RealtimeBackend(appKey: ServerFixture.app.key, appSecret: ServerFixture.app.secret, encryptionMasterKey: Array(repeating: 7, count: 32))
        try backend.room("order:{id}", history: 20) { user, parameters in
            // An async authoriser: only the order's owner.
            await Task.yield()
            return user == "ann" && parameters["id"] != "13"
        }
        try backend.room("chat:{a}:{b}", history: 100, presence: true, membersSend: true) { user, parameters in
            user == parameters["a"] || user == parameters["b"]
        }
        try backend.room("news:{topic}", history: 10, isPublic: true)
        try backend.room("vault:{id}", history: 5, sealed: true)
        return backend
    }

    @Test("the batched answer gives a token per allowed room and an error code per refused one")
    func batchedAnswer() async throws {
        let backend = try Self.backend()
        let answer = await backend.authorizeRooms(["order:1", "order:13", "chat:ann:bob", "chat:bob:cy", "nothing:1", "bad room", "news:tech"], user: "ann")
        #expect(answer.rooms["order:1"]?.token != nil)
        #expect(answer.rooms["order:13"]?.error == .forbidden)
        #expect(answer.rooms["chat:ann:bob"]?.token != nil)
        #expect(answer.rooms["chat:bob:cy"]?.error == .forbidden)
        #expect(answer.rooms["nothing:1"]?.error == .noRule)
        #expect(answer.rooms["bad room"]?.error == .invalidRoom)
        #expect(answer.rooms["news:tech"]?.token != nil)
        #expect(abs(answer.time - Int64(Date().timeIntervalSince1970 * 1000)) < 5000)
        let expires = try #require(answer.rooms["order:1"]?.expires)
        #expect(abs(expires - answer.time - 3_600_000) < 2000)
        // A visitor who is not signed in gets only public rooms.
        let visitor = await backend.authorizeRooms(["order:1", "news:tech"], user: nil)
        #expect(visitor.rooms["order:1"]?.error == .forbidden && visitor.rooms["news:tech"]?.token != nil)
    }

    @Test("tokens from the backend join on the real server with the rule they carry; a public grant joins any matching room anonymously")
    func tokensOnServer() async throws {
        let backend = try Self.backend()
        let fixture = try ServerFixture()
        let answer = await backend.authorizeRooms(["chat:ann:bob"], user: "ann", info: .object(["name": .string("Ann")]))
        let client = try RoomClient(fixture)
        let token = try #require(answer.rooms["chat:ann:bob"]?.token)
        let joined = try #require(client.joined("chat:ann:bob", token: token))
        #expect(joined["members"]?.array?.first?["info"]?["name"]?.string == "Ann", "a presence room, from the token's rule")
        client.send(.roomSend, RoomSendRequest(room: "chat:ann:bob", event: "message", data: #"{"text":"hi"}"#))
        #expect(client.waitFor("message", room: "chat:ann:bob")?.from == "ann", "members_send, from the token's rule")

        let grants = backend.config().grants
        #expect(grants.map(\.pattern) == ["news:{topic}"])
        let visitor = try RoomClient(fixture)
        #expect(visitor.joined("news:sport", token: grants[0].token) != nil)
        visitor.join("order:1", token: grants[0].token)
        #expect(visitor.waitFor("error", room: "order:1")?.data["code"]?.string == "forbidden")
    }

    @Test("a sealed room's events are published sealed by the backend and opened with the key of the auth answer")
    func sealedRoom() async throws {
        let backend = try Self.backend()
        let fixture = try ServerFixture()
        let entry = try #require(await backend.authorizeRooms(["vault:1"], user: "ann").rooms["vault:1"])
        let key = try #require(entry.key.flatMap { Data(base64Encoded: $0) }.map(Array.init))
        let client = try RoomClient(fixture)
        let token = try #require(entry.token)
        #expect(client.joined("vault:1", token: token) != nil)
        let body = try backend.roomEventBody(room: "vault:1", event: "secret", data: .object(["pin": .string("1234")]))
        let (status, _) = try await fixture.api("POST", "/apps/1/room_events", body: body)
        #expect(status == 200)
        let event = try #require(client.waitFor("secret", room: "vault:1"))
        #expect(event.data["pin"] == nil, "the server relays it sealed")
        let opened = try SecretBox.open(EncryptedPayload(nonce: event.data["nonce"]?.string ?? "", ciphertext: event.data["ciphertext"]?.string ?? ""), key: key)
        #expect(String(decoding: opened, as: UTF8.self) == #"{"pin":"1234"}"#)
    }

    @Test("a public rule takes no authorizer and shares no name with another rule, so no grant admits a visitor to a room the backend refuses (issue 47, item 1)")
    func publicRulesNeverOutrunTheAuthorizer() async throws {
        let backend = RealtimeBackend(appKey: ServerFixture.app.key, appSecret: ServerFixture.app.secret)
        // The authorizer would refuse news:secret, but a grant is checked against the pattern alone.
        #expect(throws: RealtimeBackend.RuleError.publicAuthorizer("news:{topic}")) {
            try backend.room("news:{topic}", history: 10, isPublic: true) { _, parameters in parameters["topic"] != "secret" }
        }
        // Shadowing, in either order: news:x-staff is the staff rule's (first match wins).
        try backend.room("news:{topic}-staff", history: 10) { user, _ in user == "staff" }
        #expect(throws: RealtimeBackend.RuleError.publicOverlap("news:{topic}", other: "news:{topic}-staff")) {
            try backend.room("news:{topic}", history: 10, isPublic: true)
        }
        let reversed = RealtimeBackend(appKey: "k", appSecret: "s")
        try reversed.room("news:{topic}", isPublic: true)
        #expect(throws: RealtimeBackend.RuleError.publicOverlap("news:{topic}-staff", other: "news:{topic}")) {
            try reversed.room("news:{topic}-staff") { user, _ in user == "staff" }
        }
        #expect(throws: RealtimeBackend.RuleError.publicOverlap("{section}:{id}", other: "news:{topic}")) {
            try reversed.room("{section}:{id}", isPublic: true)
        }
        // Rules that overlap with no public one among them stay allowed (first match wins).
        try reversed.room("order:{id}")
        try reversed.room("order:{id}-gift", history: 5)

        #expect(backend.config().grants.isEmpty, "the refused public rule gave no grant")
        let visitor = await backend.authorizeRooms(["news:x-staff", "news:secret"], user: nil)
        #expect(visitor.rooms["news:x-staff"]?.error == .forbidden && visitor.rooms["news:secret"]?.error == .noRule)
        try backend.room("lobby:{topic}", history: 10, isPublic: true)
        let grants = backend.config().grants
        #expect(grants.map(\.pattern) == ["lobby:{topic}"])
        // On the real server the one grant admits its own rooms and nothing the staff rule claims.
        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        #expect(client.joined("lobby:x", token: grants[0].token) != nil)
        client.join("news:x-staff", token: grants[0].token)
        #expect(client.waitFor("error", room: "news:x-staff")?.data["code"]?.string == "forbidden")
    }

    @Test("rules with a bad pattern or out-of-range values are refused", arguments: [
        ("order:{id", 0), ("order:{id}{x}", 0), ("order:{id}", 100_001), ("bad room", 0),
    ])
    func badRules(pattern: String, history: Int) {
        let backend = RealtimeBackend(appKey: "k", appSecret: "s")
        #expect(throws: RealtimeBackend.RuleError.self) { try backend.room(pattern, history: history) }
        #expect(throws: RealtimeBackend.RuleError.self) { try backend.room("vault:{id}", sealed: true) }
    }

    static var roomBackend: String {
        BuiltProduct.path("room-backend")
    }

    static func post(_ url: String, body: String, user: String?) async throws -> (Int, String) {
        var request = URLRequest(url: URL(string: url)!)
        request.httpMethod = body.isEmpty ? "GET" : "POST"
        if !body.isEmpty { request.httpBody = Data(body.utf8) }
        if let user { request.setValue(user, forHTTPHeaderField: "X-User") }
        return try await HTTPRequests.send(request)
    }

    @Test("room-backend answers 40 rooms in one request, one without a rule refused alone, and gives the public grants")
    func sampleBackend() async throws {
        let process = try ChildProcess(Self.roomBackend, [
            "--app-id", "1", "--app-key", ServerFixture.app.key, "--app-secret", ServerFixture.app.secret,
            "--room", "order:{id},history=20", "--room", "news,public,history=5",
        ])
        let first = try process.waitForLines(count: 1, timeout: .seconds(30)).first
        let port = try #require(first?.split(separator: " ").last.map(String.init))
        let rooms = (1...39).map { "order:\($0)" } + ["unknown:1"]
        let (status, body) = try await Self.post("http://127.0.0.1:\(port)/rooms/auth", body: try RealtimeMessage.jsonText(RoomAuthorizationRequest(rooms: rooms)), user: "ann")
        #expect(status == 200)
        let answer = try JSONDecoder().decode(RoomAuthorizationResponse.self, from: Data(body.utf8))
        #expect(answer.rooms.count == 40)
        #expect(answer.rooms.values.filter { $0.token != nil }.count == 39)
        #expect(answer.rooms["unknown:1"]?.error == .noRule)

        let fixture = try ServerFixture()
        let client = try RoomClient(fixture)
        let token = try #require(answer.rooms["order:7"]?.token)
        #expect(client.joined("order:7", token: token) != nil)

        let (_, anonymous) = try await Self.post("http://127.0.0.1:\(port)/rooms/auth", body: #"{"rooms":["order:1"]}"#, user: nil)
        #expect(anonymous.contains("forbidden"))
        let (configStatus, config) = try await Self.post("http://127.0.0.1:\(port)/config", body: "", user: nil)
        #expect(configStatus == 200)
        let grants = try JSONDecoder().decode(RoomConfiguration.self, from: Data(config.utf8)).grants
        #expect(grants.map(\.pattern) == ["news"])
        #expect(client.joined("news", token: grants[0].token) != nil)
        let (badStatus, _) = try await Self.post("http://127.0.0.1:\(port)/rooms/auth", body: "not json", user: "ann")
        #expect(badStatus == 400)

        let refused = try ChildProcess.run(Self.roomBackend, ["--app-id", "1", "--app-key", "k", "--app-secret", "s", "--room", "order:{id},history=x"], timeout: .seconds(30))
        #expect(refused.termination == .exited(2))
        #expect(refused.standardError.contains("unknown setting"))
    }
}
