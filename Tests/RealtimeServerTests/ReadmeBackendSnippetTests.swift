// The "Rooms on the server" article's RealtimeBackend snippet with its one import: `import RealtimeBackend`
// must be enough for it (RealtimeMessage, JSONValue come with it).
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import RealtimeBackend
import RealtimeServer
import TestSupport
import Testing

struct Order { var userID: String }
@Sendable func findOrder(_ id: String) async -> Order? { id == "1042" ? Order(userID: "ann") : nil }

@Suite("The README's backend snippet")
struct ReadmeBackendSnippetTests {
    @Test("it compiles with import RealtimeBackend alone, answers as it says, and its publish request is accepted by the server")
    func snippet() async throws {
        let server = try RealtimeServer(options: RealtimeServerOptions(port: 0, apps: [RealtimeApp(id: "1", key: "app-key", secret: "app-secret")]))
        defer { server.shutdown(grace: .zero) }
        let serverURL = "http://127.0.0.1:\(server.port)"

        // From the "Rooms on the server" article (Sources/RealtimeServer/RealtimeServer.docc), as written but for `serverURL`, defined above
        // with this server's port:
        let backend = RealtimeBackend(appKey: "app-key", appSecret: "app-secret")
        try backend.room("order:{id}", history: 20) { user, params in
            await findOrder(params["id"] ?? "")?.userID == user   // may be async; `user` is nil if not signed in
        }
        try backend.room("chat:{id}", history: 100, presence: true, maxMembers: 50, membersSend: true, webhook: true)
        try backend.room("news", history: 10, isPublic: true)

        // the app's auth route: POST {"rooms": [...]} → per room a token and its expiry, or an error code
        let answer = await backend.authorizeRooms(["order:1042", "chat:7"], user: "ann")
        let body = try RealtimeMessage.jsonText(answer)
        // GET /config → the grants that join public rooms with no request
        let grants = backend.config()
        // publishing: POST /apps/{id}/room_events, signed, with the room's rule (URLSession sends it)
        let request = try backend.roomEventRequest(server: URL(string: serverURL)!, appID: "1", room: "order:1042",
                                                   event: "updated", data: .object(["status": .string("paid")]))

        #expect(answer.rooms["order:1042"]?.token != nil && answer.rooms["chat:7"]?.token != nil)
        #expect(body.contains("\"rooms\""))
        #expect(grants.grants.map(\.pattern) == ["news"])
        #expect(await backend.authorizeRooms(["order:7"], user: "ann").rooms["order:7"]?.error == .forbidden)
        let (status, text) = try await HTTPRequests.send(request)
        #expect(status == 200, "\(text)")
        let page = try server.hub.roomHistory(appID: "1", room: "order:1042")
        #expect(page.events.map(\.data) == [#"{"status":"paid"}"#])
    }
}
