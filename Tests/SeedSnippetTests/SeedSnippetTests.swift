import BirdRealtime
import Dispatch
import Foundation
import SystemSupport
import RealtimeBackend
import RealtimeServer
import Testing

/// The seed's snippets (Snippets.swift) run against the reference server and do what the seed
/// says: banners follow the states, presence members are rendered, a refused authorisation
/// arrives on the channel, 4009 shows the signed-out screen.
@Suite("The lifecycle seed's Swift snippets", .serialized)
struct SeedSnippetTests {
    static let app = RealtimeApp(id: "seed", key: "your-app-key", secret: "seed-secret")

    /// Waits until `condition` holds (10 s at most), on the cooperative pool.
    func eventually(_ condition: () -> Bool) async -> Bool {
        for _ in 0..<500 {
            if condition() { return true }
            try? await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test("the region options name the hosted host over TLS; a hostile region never names another host")
    func regionOptions() {
        let bird = seedMakeClient()
        #expect(bird.options.region == "us1")
        #expect(bird.options.endpoint.hasPrefix("wss://ws-us1.realtime.bird.com/app/your-app-key?"))
        #expect(bird.connectionState == .initialized, "making the client opens nothing")
        let local = BirdRealtime.Options(appKey: "app-key", region: "local", hostTemplate: "127.0.0.1", port: 6001, useTLS: false)
        #expect(local.endpoint.hasPrefix("ws://127.0.0.1:6001/app/app-key?"))
        for hostile in ["evil.test/x", "a b", "", String(repeating: "a", count: 64), "us1@evil.test"] {
            #expect(BirdRealtime.Options(appKey: "k", region: hostile).host == "invalid-region.invalid")
        }
    }

    @Test("against the reference server: banners follow the states, members are rendered, 403 arrives on the channel, 4009 shows the signed-out screen")
    func snippetsAgainstServer() async throws {
        appCalls.withLock { $0 = ([:], []) }
        let server = try RealtimeServer(options: RealtimeServerOptions(port: 0, apps: [Self.app]))
        defer { server.shutdown(grace: .zero) }
        let signer = AuthorizationSigner(key: Self.app.key, secret: Self.app.secret)
        var options = BirdRealtime.Options(appKey: "your-app-key", region: "local", hostTemplate: "127.0.0.1", port: server.port, useTLS: false)
        options.deliveryQueue = DispatchQueue(label: "seed.delivery")
        options.watchesReachability = false
        options.backoff = ExponentialBackoff(base: .milliseconds(50), cap: .milliseconds(200))
        options.authorizer = { request in
            guard request.channelName == "presence-room-1" else { throw AuthorizationError.httpStatus(403, body: "forbidden") }
            return try signer.authorizeChannel(socketID: request.socketID, channel: request.channelName, member: PresenceMember(userID: "ana"))
        }
        let bird = BirdRealtime(options: options)
        let errors = Locked([String?]())
        seedStateChanges(bird)
        seedSigninError(bird)
        seedConnectionError(bird)
        seedSignedOut(bird)
        seedPresence(bird)
        let refused = bird.subscribe("presence-room-2")
        seedSubscriptionError(refused)
        refused.bind(BirdProtocol.Event.subscriptionError) { error in errors.withLock { $0.append(error) } }
        seedConnect(bird)

        #expect(await eventually { appCalls.withLock { $0.rendered } == [["ana"]] }, "members rendered on subscription_succeeded")
        #expect(await eventually { appCalls.withLock { $0.counts["hideReconnectingBanner"] } == 1 })
        #expect(await eventually { errors.withLock { $0.first??.contains("403") == true } }, "the 403 arrives on the channel")

        // A drop without a close frame: unavailable (banner), then connected again (banner
        // hidden), and the presence channel is resubscribed and rendered again.
        let socketID = try #require(bird.connection.connectionId)
        #expect(server.hub.drop(appID: Self.app.id, socketID: socketID))
        #expect(await eventually { appCalls.withLock { $0.counts["showReconnectingBanner"] } == 1 })
        #expect(await eventually { appCalls.withLock { $0.counts["hideReconnectingBanner"] } == 2 })
        #expect(await eventually { appCalls.withLock { $0.rendered.count } == 2 })

        // 4009: failed, no retry; the signed-out screen.
        let second = try #require(await eventually { bird.connection.connectionId != nil } ? bird.connection.connectionId : nil)
        #expect(server.hub.terminate(appID: Self.app.id, socketID: second))
        #expect(await eventually { appCalls.withLock { $0.counts["showSignedOutScreen"] } == 1 })
        #expect(await eventually { bird.connectionState == .failed })

        seedConnect(bird)
        #expect(await eventually { bird.connectionState == .connected })
        seedDisconnect(bird)
        #expect(await eventually { bird.connectionState == .disconnected })
    }

    @Test("presence channels are PresenceChannel, others are not; BirdProtocol events bind in the client's namespace")
    func channelTypes() {
        var options = BirdRealtime.Options(appKey: "k", host: "127.0.0.1", port: 9, namespace: .pusher)
        options.watchesReachability = false
        let bird = BirdRealtime(options: options)
        #expect(bird.subscribe("presence-a") is PresenceChannel)
        #expect(!(bird.subscribe("private-a") is PresenceChannel))
        #expect(!(bird.subscribe("news") is PresenceChannel))
        #expect(BirdProtocol.Event.subscriptionSucceeded.name(in: bird.subscribe("news").namespace) == "pusher:subscription_succeeded")
    }

    @Test("the getting-started article's client snippet compiles as written (without its closing dispatchMain) and makes the endpoint it says")
    func readmeClientSnippet() {
        // From the "Getting started with the client" article (Sources/Realtime/Realtime.docc):
        var options = BirdRealtime.Options(appKey: "app-key", host: "127.0.0.1", port: 6001)
        options.deliveryQueue = DispatchQueue(label: "realtime")   // main by default
        let bird = BirdRealtime(options: options)                    // keep it: releasing it disconnects
        bird.onConnectionStateChange { previous, current in print(previous, "->", current) }
        bird.onError { error in print(error.code ?? 0, error.message) }
        let prices = bird.subscribe("prices")                        // same object for the same name
        prices.bind("price-update") { event in print(event.data ?? "") }
        prices.bind(BirdProtocol.Event.subscriptionSucceeded) { _ in print("subscribed") }

        #expect(bird.options.endpoint.hasPrefix("ws://127.0.0.1:6001/app/app-key?"))
        #expect(bird.channelNames == ["prices"])
    }

    @Test("the rooms-and-replay article's client snippet compiles as written and works against the reference server")
    func readmeRoomsSnippet() async throws {
        let app = RealtimeApp(id: "1", key: "app-key", secret: "app-secret")
        let server = try RealtimeServer(options: RealtimeServerOptions(port: 0, apps: [app]))
        defer { server.shutdown(grace: .zero) }
        let backend = RealtimeBackend(appKey: app.key, appSecret: app.secret)
        try backend.room("order:{id}", history: 20)
        // From the "Rooms and replay" article (Sources/Realtime/Realtime.docc) (the route replaced by the in-process backend,
        // the port by the test server's, and the endless loop by one that stops):
        var options = BirdRealtime.Options(appKey: "app-key", host: "127.0.0.1", port: server.port)
        options.roomAuthEndpoint = URL(string: "http://127.0.0.1:8080/rooms/auth")   // the app's route
        options.authHeaders = ["X-User": "ann"]                                       // the app's session
        options.roomAuthorizer = { rooms in await backend.authorizeRooms(rooms, user: "ann") }
        options.deliveryQueue = DispatchQueue(label: "readme.rooms")
        options.watchesReachability = false
        let bird = BirdRealtime(options: options)
        let order = bird.join("order:1042")
        order.on("updated") { data, meta in print(data["status"]?.string ?? "", meta.id, meta.replayed) }
        order.on("error") { error, _ in print(error["code"]?.string ?? "") }   // forbidden, no_rule, full, not_recovered …
        bird.connect()
        try await order.ready()                                  // throws the room's error
        let hub = server.hub
        Task {
            // After the sequence below is made: it hears events from then on.
            try await Task.sleep(for: .milliseconds(100))
            _ = try hub.publishRoom(appID: app.id, room: "order:1042", event: "updated", data: #"{"status":"paid"}"#)
        }
        var received: [UInt64] = []
        for await (update, meta) in order.events("updated") {
            print(update, meta.id)
            received.append(meta.id)
            break
        }
        #expect(received == [1])
        let page = try await order.history(limit: 50)            // oldest first; page.more
        #expect(page.events.map(\.meta.id) == [1] && !page.more)
        bird.disconnect()
    }

    @Test("the server articles' embedded-server and authoriser snippets compile as written and work together")
    func readmeServerAndAuthorizer() async throws {
        // From the "Running the server" article (Sources/RealtimeServer/RealtimeServer.docc) (the last line moved to the end of the test):
        let server = try RealtimeServer(options: RealtimeServerOptions(port: 0, apps: [RealtimeApp(id: "1", key: "app-key", secret: "app-secret")]))
        print(server.url(appKey: "app-key"))                      // ws://127.0.0.1:PORT/app/app-key
        server.hub.publish(appID: "1", channels: ["prices"], event: "price-update", data: #"{"price":42}"#)

        var options = try BirdRealtime.Options(url: server.url(appKey: "app-key"))
        options.deliveryQueue = DispatchQueue(label: "readme.delivery")
        options.watchesReachability = false
        // From the "Getting started with the client" article (Sources/Realtime/Realtime.docc):
        let signer = AuthorizationSigner(key: "app-key", secret: "app-secret")
        options.authorizer = { request in
            try signer.authorizeChannel(socketID: request.socketID, channel: request.channelName, member: PresenceMember(userID: "ana"))
        }

        let bird = BirdRealtime(options: options)
        let room = bird.subscribe("presence-room")
        bird.connect()
        #expect(await eventually { room.subscribed && room.members.map(\.userID) == ["ana"] })
        bird.disconnect()
        server.shutdown()                                          // clients are closed with 4200
    }
}

/// The rooms seed's snippets (RoomSnippets.swift) on the main queue, the default delivery
/// queue, against the reference server with a `RealtimeBackend` answering the auth requests.
@Suite("The rooms seed's Swift snippets", .serialized)
@MainActor
struct RoomSeedSnippetTests {
    @Test("join, on, ready, events(as:), history and leave, as written, against the reference server")
    func roomSnippets() async throws {
        let app = RealtimeApp(id: "seed-rooms", key: "rooms-key", secret: "rooms-secret")
        let server = try RealtimeServer(options: RealtimeServerOptions(port: 0, apps: [app]))
        defer { server.shutdown(grace: .zero) }
        let backend = RealtimeBackend(appKey: app.key, appSecret: app.secret)
        try backend.room("order:{id}", history: 20) { user, parameters in user == "ann" && parameters["id"] == "1042" }
        try backend.room("chat:{a}:{b}", history: 100)
        var options = BirdRealtime.Options(appKey: app.key, host: "127.0.0.1", port: server.port)
        options.watchesReachability = false
        options.roomAuthorizer = { rooms in await backend.authorizeRooms(rooms, user: "ann") }
        let rt = BirdRealtime(options: options)
        rt.connect()

        let order = try await seedJoin(rt)
        #expect(live && order.state == .joined)
        let sequence = Task { await seedSequence(order) }
        try await Task.sleep(for: .milliseconds(50))
        _ = try server.hub.publishRoom(appID: app.id, room: "order:1042", event: "updated", data: #"{"status":"paid"}"#)
        try await waitUntil { status == "paid" }
        _ = try server.hub.publishRoom(appID: app.id, room: "order:1042", event: "updated", data: #"{"nope":true}"#)
        _ = try server.hub.publishRoom(appID: app.id, room: "order:1042", event: "updated", data: #"{"status":"shipped"}"#)
        try await waitUntil { status == "shipped" }
        sequence.cancel()

        let chat = rt.join("chat:34:42")
        for n in 1...120 { _ = try server.hub.publishRoom(appID: app.id, room: "chat:34:42", event: "line", data: #"{"n":\#(n)}"#) }
        let (page, older) = try await seedHistory(chat)
        #expect(page.events.map(\.meta.id) == Array(71...120), "the newest 50, oldest first")
        #expect(page.more && older.events.map(\.meta.id) == Array(21...70), "the rule keeps 100")
        #expect(shown.count == page.events.count && shown.first?.0 == "line")

        seedLeave(rt, order)
        #expect(order.state == .left && rt.room("order:1042") == nil)
        let refused = rt.join("order:7")
        await #expect(throws: RoomError.self) { try await refused.ready() }
        try await waitUntil { printedErrors.isEmpty && refused.error?.code == .forbidden }
        rt.disconnect()
    }

    func waitUntil(_ condition: @MainActor () -> Bool) async throws {
        for _ in 0..<500 where !condition() { try await Task.sleep(for: .milliseconds(10)) }
        #expect(condition())
    }
}
