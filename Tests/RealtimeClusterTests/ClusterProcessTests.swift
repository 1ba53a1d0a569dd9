import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Realtime
import RealtimeBackend
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Reconnect
import SystemSupport
import TestSupport
import Testing

/// Real `realtime-server` processes on a private Redis behind a real nginx (`PrivateCluster`),
/// a `BirdRealtime` client connected through nginx, nodes killed with SIGKILL under it.
@Suite("A cluster of server processes behind nginx", .serialized)
struct ClusterProcessTests {
    static let app = RealtimeApp(id: "1", key: "cluster-key", secret: "cluster-secret")

    static var serverPath: String {
        BuiltProduct.path("realtime-server")
    }

    /// Publishes `{"seq": n}` through the first running node's HTTP API, trying the others
    /// (a node just killed refuses); retried while Redis comes back.
    static func publish(_ seq: Int, room: String, backend: RealtimeBackend, cluster: PrivateCluster) async throws {
        for attempt in 0..<200 {
            for node in cluster.nodes where node.isRunning {
                let request = try backend.roomEventRequest(server: URL(string: "http://127.0.0.1:\(node.port)")!, appID: app.id, room: room,
                                                           event: "updated", data: .object(["seq": .number(Double(seq))]))
                if let (status, _) = try? await HTTPRequests.send(request), status == 200 { return }
            }
            try await Task.sleep(for: .milliseconds(attempt < 10 ? 10 : 50))
        }
        Issue.record("event \(seq) could not be published")
    }

    /// The node the client's connection is on, from the nodes' connection logs.
    static func node(of client: BirdRealtime, in cluster: PrivateCluster) -> PrivateCluster.Node? {
        guard let socketID = client.connection.connectionId else { return nil }
        return cluster.nodes.first { $0.isRunning && $0.logLines.contains { $0.contains("connected \(socketID) ") } }
    }

    func makeClient(port: Int, backend: RealtimeBackend, queue: DispatchQueue, user: String = "mover") -> BirdRealtime {
        var options = BirdRealtime.Options(appKey: Self.app.key, host: "127.0.0.1", port: port)
        let signer = ChannelAuthorization(key: Self.app.key, secret: Self.app.secret)
        options.authorizer = { request in
            let data = #"{"user_id":"\#(user)"}"#
            return ChannelAuthorizationResponse(auth: signer.authorizeSubscription(socketID: request.socketID, channel: request.channelName, channelData: data), channelData: data)
        }
        options.watchesReachability = false
        options.deliveryQueue = queue
        options.backoff = ExponentialBackoff(base: .milliseconds(50), cap: .milliseconds(300))
        options.roomAuthorizer = { rooms in await backend.authorizeRooms(rooms, user: user) }
        return BirdRealtime(options: options)
    }

    @Test("a client on a node killed with SIGKILL lands on the other through nginx and replays what it missed, in order, twice in a row")
    func movesBetweenNodes() async throws {
        let cluster = try PrivateCluster(nodes: 2, app: Self.app, serverExecutable: Self.serverPath, loadBalancer: true)
        defer { cluster.stop() }
        let balancer = try #require(cluster.balancerPort)
        let backend = RealtimeBackend(appKey: Self.app.key, appSecret: Self.app.secret)
        try backend.room("order:{id}", history: 1000)
        let client = makeClient(port: balancer, backend: backend, queue: DispatchQueue(label: "movesBetweenNodes"))
        defer { client.disconnect() }
        let room = client.join("order:1")
        let log = RoomLog(room)
        client.connect()
        try await room.ready()

        var seq = 0
        for move in 1...2 {
            for _ in 0..<40 {
                seq += 1
                try await Self.publish(seq, room: "order:1", backend: backend, cluster: cluster)
            }
            let before = try #require(Self.node(of: client, in: cluster), "the client's node, move \(move)")
            // The other node must be up for the client to move there.
            for node in cluster.nodes where !node.isRunning { try node.start() }
            before.kill()
            // Published while the client has no connection: replayed on the other node.
            for _ in 0..<40 {
                seq += 1
                try await Self.publish(seq, room: "order:1", backend: backend, cluster: cluster)
            }
            #expect(await eventually(timeout: .seconds(20)) { Self.node(of: client, in: cluster).map { $0 !== before } == true },
                    "move \(move): the client reconnected to another node")
        }
        for _ in 0..<20 {
            seq += 1
            try await Self.publish(seq, room: "order:1", backend: backend, cluster: cluster)
        }
        #expect(await eventually(timeout: .seconds(20)) { log.count >= seq })
        try? await Task.sleep(for: .milliseconds(300))
        #expect(log.ids.withLock { $0 } == Array(1...UInt64(seq)), "lost 0, duplicated 0, out of order 0")
        #expect(log.seqs.withLock { $0 } == Array(1...seq))
        #expect(log.errors.withLock { $0 }.isEmpty)
        #expect(log.replayed.withLock { $0 } > 0, "what was missed during each move came as a replay")
    }

    @Test("a node killed with SIGKILL takes its presence members out within the stated bound, once")
    func deadNodePresence() async throws {
        let cluster = try PrivateCluster(nodes: 2, app: Self.app, serverExecutable: Self.serverPath)
        defer { cluster.stop() }
        let backend = RealtimeBackend(appKey: Self.app.key, appSecret: Self.app.secret)
        let queue = DispatchQueue(label: "deadNodePresence")
        let ann = makeClient(port: cluster.nodes[0].port, backend: backend, queue: queue, user: "ann")
        let bob = makeClient(port: cluster.nodes[1].port, backend: backend, queue: queue, user: "bob")
        defer { ann.disconnect(); bob.disconnect() }
        try backend.room("team:{id}", history: 10, presence: true)
        _ = ann.subscribe("presence-team")
        let annRoom = ann.join("team:1")
        let channel = try #require(bob.subscribe("presence-team") as? PresenceChannel)
        let removed = Locked<[String]>([])
        let token = channel.onMemberRemoved { id in removed.withLock { $0.append(id) } }
        ann.connect()
        #expect(await eventually { ann.channel(named: "presence-team")?.subscribed == true })
        try await annRoom.ready()
        bob.connect()
        // A presence room too, its members without info.
        let bobRoom = bob.join("team:1")
        let left = Locked<[String]>([])
        bobRoom.bindAll { event, data, _ in if event == RoomSystemEvent.leave { left.withLock { $0.append(data["id"]?.string ?? "?") } } }
        try await bobRoom.ready()
        #expect(await eventually { Set(channel.members.map(\.userID)) == ["ann", "bob"] })
        #expect(Set(bobRoom.members.map(\.id)) == ["ann", "bob"])
        ann.reconnector.stop()
        let killed = ContinuousClock.now
        cluster.nodes[0].kill()
        #expect(await eventually(timeout: RealtimeHub.presenceDeadNodeBound + .seconds(5)) { removed.withLock { $0 } == ["ann"] })
        let took = ContinuousClock.now - killed
        #expect(took <= RealtimeHub.presenceDeadNodeBound, "taken out after \(took)")
        #expect(channel.members.map(\.userID) == ["bob"])
        #expect(await eventually { left.withLock { $0 } == ["ann"] }, "the presence room's member without info left too")
        try? await Task.sleep(for: .seconds(2))
        #expect(removed.withLock { $0 } == ["ann"], "once")
        #expect(left.withLock { $0 } == ["ann"], "once")
        token.cancel()
    }

    @Test("Redis restarted under load: the nodes report it, reconnect by themselves, members learn the history was lost, then get new events in order")
    func redisRestarted() async throws {
        let cluster = try PrivateCluster(nodes: 2, app: Self.app, serverExecutable: Self.serverPath)
        defer { cluster.stop() }
        let backend = RealtimeBackend(appKey: Self.app.key, appSecret: Self.app.secret)
        try backend.room("order:{id}", history: 1000)
        let queue = DispatchQueue(label: "redisRestarted")
        let clients = cluster.nodes.map { makeClient(port: $0.port, backend: backend, queue: queue) }
        defer { clients.forEach { $0.disconnect() } }
        let rooms = clients.map { $0.join("order:2") }
        let logs = rooms.map(RoomLog.init)
        clients.forEach { $0.connect() }
        for room in rooms { try await room.ready() }
        for seq in 1...20 { try await Self.publish(seq, room: "order:2", backend: backend, cluster: cluster) }
        #expect(await eventually { logs.allSatisfy { $0.count == 20 } })

        // Under load: an app server publishing every 5 ms while Redis goes away and comes back.
        let publisher = Task {
            for seq in 21...120 {
                try await Self.publish(seq, room: "order:2", backend: backend, cluster: cluster)
                try await Task.sleep(for: .milliseconds(5))
            }
        }
        try await Task.sleep(for: .milliseconds(100))
        try #require(cluster.redis).restart()
        try await publisher.value
        for node in cluster.nodes {
            #expect(await eventually { node.logLines.contains { $0.contains("cluster bus lost") } }, "\(node.name) reported the loss")
            #expect(await eventually { node.logLines.filter { $0.contains("cluster bus ready") }.count >= 2 }, "\(node.name) reconnected")
        }
        for log in logs {
            #expect(await eventually { log.errors.withLock { $0 }.contains("not_recovered") }, "told the history was lost")
        }
        // Events kept into the new history before the members rejoined are not handed over as a
        // partial replay: the members are told `recovered: false` (the app fetches state). From
        // the rejoin on, the new epoch's events flow.
        for seq in 121...130 { try await Self.publish(seq, room: "order:2", backend: backend, cluster: cluster) }
        for log in logs {
            let live = await eventually { log.seqs.withLock { $0 }.last == 130 }
            #expect(live, "live again after the restart: \(log.seqs.withLock { $0 }) errors \(log.errors.withLock { $0 })")
            let seqs = log.seqs.withLock { $0 }
            #expect(Array(seqs.prefix(20)) == Array(1...20))
            #expect(seqs == seqs.sorted() && Set(seqs).count == seqs.count, "nothing twice, nothing out of order: \(seqs)")
            #expect(Array(seqs.suffix(10)) == Array(121...130))
        }
    }
}
