import Dispatch
import Foundation
import Reachability
import Realtime
import RealtimeBackend
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport
import TestSupport
import Testing

/// Real server nodes in this process, each with its own history store connection and bus on
/// one private Redis, or on a private Redis Cluster.
final class ClusterBed: Sendable {
    static let app = RealtimeApp(id: "1", key: "cluster-key", secret: "cluster-secret")

    /// The private Redis (a bed on one).
    var redis: PrivateRedis { single! }
    private let single: PrivateRedis?
    let nodes: [RealtimeServer]
    let logs = Locked<[String]>([])
    let backend: RealtimeBackend
    let queue = DispatchQueue(label: "ClusterBed.delivery")

    /// Nodes on a private Redis of their own, or on `cluster` (a Redis Cluster the caller
    /// started and stops).
    init(nodes count: Int, cluster: PrivateRedisCluster? = nil) throws {
        let redis = cluster == nil ? try PrivateRedis() : nil
        self.single = redis
        let logs = logs
        nodes = try (0..<count).map { index in
            let store: RedisRoomStore
            let fanout: RedisFanout
            if let redis {
                store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
                fanout = RedisFanout(endpoint: redis.endpoint, timeout: 500)
            } else {
                let seeds = cluster?.endpoints ?? []
                store = RedisRoomStore(redis: RedisClusterConnection(seeds: seeds, timeout: 500))
                fanout = RedisFanout(cluster: seeds, timeout: 500)
            }
            return try RealtimeServer(options: RealtimeServerOptions(apps: [Self.app]), configure: {
                $0.roomStore = store
                $0.fanout = fanout
            }, log: { line in logs.withLock { $0.append("node\(index): \(line)") } })
        }
        backend = RealtimeBackend(appKey: Self.app.key, appSecret: Self.app.secret)
        try backend.room("order:{id}", history: 1000)
        try backend.room("chat:{id}", history: 100, membersSend: true)
        try backend.room("team:{id}", history: 10, presence: true)
    }

    deinit {
        for node in nodes { node.shutdown(grace: .zero) }
        single?.stop()
    }

    /// Whether node `index` logged a line containing `text`.
    func logged(_ index: Int, _ text: String) -> Bool {
        logs.withLock { $0.contains { $0.hasPrefix("node\(index): ") && $0.contains(text) } }
    }

    /// Waits until every node's bus is ready.
    func ready() async -> Bool {
        await eventually { nodes.allSatisfy(\.hub.isFanoutHealthy) }
    }

    /// A client of node `index` joined to `room` once every bus is ready, with what it sees.
    func member(_ index: Int, user: String, room name: String) async throws -> (BirdRealtime, Room, RoomLog) {
        #expect(await ready())
        let client = client(index, user: user)
        let room = client.join(name)
        let log = RoomLog(room)
        client.connect()
        try await room.ready()
        return (client, room, log)
    }

    /// Ann signed in on node A and on node B, Bob on node B, all connected.
    func annTwiceAndBob() async -> [BirdRealtime] {
        #expect(await ready())
        let clients = [client(0, user: "ann"), client(1, user: "ann"), client(1, user: "bob")]
        for client in clients {
            client.signin()
            client.connect()
        }
        #expect(await eventually { clients.allSatisfy { $0.connectionState == .connected } && nodes.map(\.hub.connectionCount) == [1, 2] })
        // The signins' round trips: a user channel is refused before the server knows the user.
        #expect(await eventually { clients.allSatisfy { $0.connection.signedInUserData != nil } })
        return clients
    }

    /// Publishes `{"seq": n}` for each n through node `index`'s hub.
    func publish(_ index: Int, room: String, seqs: ClosedRange<Int>) throws {
        for seq in seqs {
            _ = try nodes[index].hub.publishRoom(appID: Self.app.id, room: room, event: "updated", data: #"{"seq":\#(seq)}"#)
        }
    }

    /// A client of node `index`.
    func client(_ index: Int, user: String) -> BirdRealtime {
        var options = BirdRealtime.Options(appKey: Self.app.key, host: "127.0.0.1", port: nodes[index].port)
        options.watchesReachability = false
        options.deliveryQueue = queue
        let backend = backend
        options.roomAuthorizer = { rooms in await backend.authorizeRooms(rooms, user: user) }
        let signer = ChannelAuthorization(key: Self.app.key, secret: Self.app.secret)
        options.authorizer = { request in
            guard request.channelName.hasPrefix("presence-") else {
                return ChannelAuthorizationResponse(auth: signer.authorizeSubscription(socketID: request.socketID, channel: request.channelName))
            }
            let data = #"{"user_id":"\#(user)","user_info":{"name":"\#(user)"}}"#
            return ChannelAuthorizationResponse(auth: signer.authorizeSubscription(socketID: request.socketID, channel: request.channelName, channelData: data), channelData: data)
        }
        options.userAuthenticator = { socketID in
            let data = #"{"id":"\#(user)"}"#
            return UserAuthenticationResponse(auth: signer.authorizeSignin(socketID: socketID, userData: data), userData: data)
        }
        return BirdRealtime(options: options)
    }
}

/// What one member saw in one room: kept event ids with their `seq`, and room errors.
final class RoomLog: Sendable {
    let ids = Locked<[UInt64]>([])
    let seqs = Locked<[Int]>([])
    let errors = Locked<[String]>([])
    /// Kept events that came as a replay.
    let replayed = Locked(0)
    let token: Locked<RoomListener?> = Locked(nil)

    init(_ room: Room) {
        let ids = ids, seqs = seqs, errors = errors, replayed = replayed
        let listener = room.bindAll { event, data, meta in
            if event == RoomSystemEvent.error {
                errors.withLock { $0.append(data["code"]?.string ?? "?") }
                return
            }
            guard meta.id > 0 else { return }
            ids.withLock { $0.append(meta.id) }
            if meta.replayed { replayed.withLock { $0 += 1 } }
            if let seq = data["seq"]?.number { seqs.withLock { $0.append(Int(seq)) } }
        }
        token.withLock { $0 = listener }
    }

    var count: Int { ids.withLock { $0.count } }
}

@Suite("Live fan-out across nodes over Redis pub/sub", .serialized)
struct FanoutTests {
    @Test("a room event published through A reaches members on A, B and C once each, in the history's order")
    func roomAcrossThreeNodes() async throws {
        let bed = try ClusterBed(nodes: 3)
        #expect(await bed.ready())
        let clients = (0..<3).map { bed.client($0, user: "u\($0)") }
        defer { clients.forEach { $0.disconnect() } }
        let rooms = clients.map { $0.join("order:1") }
        let logs = rooms.map(RoomLog.init)
        clients.forEach { $0.connect() }
        for room in rooms { try await room.ready() }
        // Publishers on every node at once: one order, the store's, for everybody.
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<3 {
                group.addTask {
                    for seq in 0..<30 {
                        _ = try? bed.nodes[index].hub.publishRoom(appID: ClusterBed.app.id, room: "order:1", event: "updated", data: #"{"seq":\#(index * 100 + seq)}"#)
                    }
                }
            }
        }
        #expect(await eventually { logs.allSatisfy { $0.count >= 90 } })
        try? await Task.sleep(for: .milliseconds(200))
        for log in logs {
            #expect(log.ids.withLock { $0 } == Array(1...90))
        }
        #expect(Set(logs.map { $0.seqs.withLock { $0 } }).count == 1, "every member saw the same order")
        #expect(logs.allSatisfy { $0.errors.withLock { $0 }.isEmpty })
    }

    @Test("a member's send on B reaches members on A and C; a node follows only rooms it has members for")
    func memberSendAndFollowing() async throws {
        let bed = try ClusterBed(nodes: 3)
        #expect(await bed.ready())
        let onA = bed.client(0, user: "ann")
        let onB = bed.client(1, user: "bob")
        defer { onA.disconnect(); onB.disconnect() }
        let roomA = onA.join("chat:9")
        let roomB = onB.join("chat:9")
        let logA = RoomLog(roomA)
        let logB = RoomLog(roomB)
        onA.connect()
        onB.connect()
        try await roomA.ready()
        try await roomB.ready()
        for seq in 1...5 { try roomB.send("line", data: .object(["seq": .number(Double(seq))])) }
        #expect(await eventually { logA.count == 5 && logB.count == 5 })
        #expect(logA.seqs.withLock { $0 } == [1, 2, 3, 4, 5])
        #expect(logB.seqs.withLock { $0 } == [1, 2, 3, 4, 5], "the sender gets its own kept events")
        // Node C has no member: an event still reaches A and B, and C never followed the room.
        let hubC = bed.nodes[2].hub
        _ = try hubC.publishRoom(appID: ClusterBed.app.id, room: "chat:9", event: "line", data: #"{"seq":6}"#)
        #expect(await eventually { logA.count == 6 && logB.count == 6 })
        onB.leave("chat:9")
        #expect(await eventually { (try? RedisConnection(endpoint: bed.redis.endpoint).command("PUBSUB", "NUMSUB", RedisFanoutProbe.roomChannel("chat:9")))?.array?.last?.integer == 1 })
    }

    @Test("a public channel event through any node's HTTP API reaches every subscriber once; client events skip their sender")
    func channelsAcrossNodes() async throws {
        let bed = try ClusterBed(nodes: 3)
        #expect(await bed.ready())
        let clients = (0..<3).map { bed.client($0, user: "u\($0)") }
        defer { clients.forEach { $0.disconnect() } }
        let seen = (0..<3).map { _ in Locked<[String]>([]) }
        var tokens: [ObservationToken] = []
        for (index, client) in clients.enumerated() {
            let log = seen[index]
            let news = client.subscribe("news")
            let team = client.subscribe("private-team")
            tokens.append(news.bind("headline") { event in log.withLock { $0.append("news:" + (event.data ?? "")) } })
            tokens.append(team.bind("client-typing") { event in log.withLock { $0.append("team:" + (event.data ?? "")) } })
            client.connect()
        }
        #expect(await eventually { clients.allSatisfy { $0.channel(named: "news")?.subscribed == true && $0.channel(named: "private-team")?.subscribed == true } })
        for index in 0..<3 {
            bed.nodes[index].hub.publish(appID: ClusterBed.app.id, channels: ["news"], event: "headline", data: #"{"n":\#(index)}"#)
        }
        #expect(clients[1].channel(named: "private-team")?.trigger("client-typing", data: #"{"who":"u1"}"#) == true)
        #expect(await eventually { seen[0].withLock { $0.count } == 4 && seen[2].withLock { $0.count } == 4 && seen[1].withLock { $0.count } == 3 })
        try? await Task.sleep(for: .milliseconds(200))
        for index in 0..<3 {
            let news = seen[index].withLock { $0.filter { $0.hasPrefix("news:") } }
            #expect(news.sorted() == [#"news:{"n":0}"#, #"news:{"n":1}"#, #"news:{"n":2}"#])
        }
        #expect(seen[0].withLock { $0.filter { $0.hasPrefix("team:") } } == [#"team:{"who":"u1"}"#])
        #expect(seen[2].withLock { $0.filter { $0.hasPrefix("team:") } } == [#"team:{"who":"u1"}"#])
        #expect(seen[1].withLock { $0.filter { $0.hasPrefix("team:") } }.isEmpty, "never echoed to the sender")
        _ = tokens
    }

    @Test("terminate_connections through node A closes the user's connections on A and B with 4009, and nobody else's; /health says whether the bus is up")
    func terminateAcrossNodes() async throws {
        let bed = try ClusterBed(nodes: 2)
        let clients = await bed.annTwiceAndBob()
        let (annOnA, annOnB, bobOnB) = (clients[0], clients[1], clients[2])
        defer { clients.forEach { $0.disconnect() } }
        #expect(bed.nodes[0].hub.terminateUser(appID: ClusterBed.app.id, userID: "ann") == 1)
        #expect(await eventually { annOnA.connectionState == .failed && annOnB.connectionState == .failed }, "4009 on both nodes: failed, no retry")
        #expect(bobOnB.connectionState == .connected)
        let health = bed.nodes[1].api.handle(HTTPRequest(method: "GET", path: "/health", query: [], body: []))
        #expect(health.status == 200)
        bed.redis.stop()
        #expect(await eventually { bed.nodes[1].api.handle(HTTPRequest(method: "GET", path: "/health", query: [], body: [])).status == 503 })
    }

    @Test("send_to_user through node A reaches the user's connections on A and B (its #server-to-user- channel), nobody else; the channel is the signed-in user's own")
    func sendToUserAcrossNodes() async throws {
        let bed = try ClusterBed(nodes: 2)
        let clients = await bed.annTwiceAndBob()
        let bobOnB = clients[2]
        defer { clients.forEach { $0.disconnect() } }
        let seen = clients.map { _ in Locked<[String]>([]) }
        var tokens: [ObservationToken] = []
        let refused = Locked(false)
        for (index, client) in clients.enumerated() {
            let user = index < 2 ? "ann" : "bob"
            let channel = client.subscribe(RealtimeHub.serverToUserPrefix + user)
            let log = seen[index]
            tokens.append(channel.bind("notice") { event in log.withLock { $0.append(event.data ?? "") } })
        }
        // Bob may not listen to Ann's channel.
        let spy = bobOnB.subscribe(RealtimeHub.serverToUserPrefix + "ann")
        tokens.append(spy.bind(BirdProtocol.Event.subscriptionError) { _ in refused.withLock { $0 = true } })
        #expect(await eventually { clients.enumerated().allSatisfy { index, client in
            client.channel(named: RealtimeHub.serverToUserPrefix + (index < 2 ? "ann" : "bob"))?.subscribed == true
        } })
        #expect(await eventually { refused.withLock { $0 } })
        bed.nodes[0].hub.sendToUser(appID: ClusterBed.app.id, userID: "ann", event: "notice", data: #"{"n":1}"#)
        #expect(await eventually { seen[0].withLock { $0 } == [#"{"n":1}"#] && seen[1].withLock { $0 } == [#"{"n":1}"#] })
        try? await Task.sleep(for: .milliseconds(200))
        #expect(seen[2].withLock { $0 }.isEmpty)
        _ = tokens
    }

    @Test("events published while B's bus is cut are caught up from the stream, in order, none twice")
    func busCutCaughtUp() async throws {
        let bed = try ClusterBed(nodes: 2)
        let (onB, _, log) = try await bed.member(1, user: "bob", room: "order:5")
        defer { onB.disconnect() }
        try bed.publish(0, room: "order:5", seqs: 1...10)
        #expect(await eventually { log.count == 10 })
        // Redis drops every subscriber connection; A publishes on at once.
        _ = try RedisConnection(endpoint: bed.redis.endpoint).command("CLIENT", "KILL", "TYPE", "pubsub")
        try bed.publish(0, room: "order:5", seqs: 11...40)
        #expect(await eventually { log.count >= 40 })
        try? await Task.sleep(for: .milliseconds(200))
        #expect(log.ids.withLock { $0 } == Array(1...40))
        #expect(log.seqs.withLock { $0 } == Array(1...40))
        #expect(bed.logged(1, "cluster bus lost"))
        #expect(await eventually { bed.logged(1, "cluster bus ready") })
    }

    @Test("after FLUSHALL the next event opens a new epoch: members on other nodes are told to resync, learn what was lost, and get every event of the new epoch")
    func flushedHistory() async throws {
        let bed = try ClusterBed(nodes: 2)
        let (onB, room, log) = try await bed.member(1, user: "bob", room: "order:8")
        defer { onB.disconnect() }
        let hubA = bed.nodes[0].hub
        try bed.publish(0, room: "order:8", seqs: 1...3)
        #expect(await eventually { log.count == 3 })
        let before = try #require(room.position)
        _ = try RedisConnection(endpoint: bed.redis.endpoint).command("FLUSHALL")
        let kept = try hubA.publishRoom(appID: ClusterBed.app.id, room: "order:8", event: "updated", data: #"{"seq":4}"#)
        #expect(kept.epoch != before.epoch)
        #expect(await eventually { log.errors.withLock { $0 }.contains("not_recovered") })
        #expect(await eventually { room.position?.epoch == kept.epoch })
        #expect(log.errors.withLock { $0 }.first == "resync")
        // Live again on the new epoch.
        let next = try hubA.publishRoom(appID: ClusterBed.app.id, room: "order:8", event: "updated", data: #"{"seq":5}"#)
        #expect(await eventually { log.ids.withLock { $0 }.last == next.record.id })
        // The event of the new epoch published before the rejoin is new to the member: replayed
        // after the gap, never skipped.
        #expect(log.seqs.withLock { $0 } == [1, 2, 3, 4, 5])
        #expect(room.error?.gap?.previous == before && room.error?.gap?.epoch == kept.epoch && room.error?.gap?.reason == "epoch_changed")
    }
}

/// The names the bus uses, for assertions on Redis's side.
enum RedisFanoutProbe {
    static func roomChannel(_ room: String, app: String = ClusterBed.app.id) -> String {
        "rt:{\(app.utf8.count):\(app):\(room)}:live"
    }
}
