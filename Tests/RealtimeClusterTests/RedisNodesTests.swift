import Foundation
import Realtime
import RealtimeBackend
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import Testing

/// Two real servers in this process sharing one private Redis for rooms' history.
@Suite("Two nodes on one Redis: rooms' history")
struct RedisNodesTests {
    static let app = RealtimeApp(id: "1", key: "cluster-key", secret: "cluster-secret")

    @Test("events published through node A are paged by a client of node B, which never saw the room")
    func historyFromTheOtherNode() async throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        func node() throws -> RealtimeServer {
            let store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
            return try RealtimeServer(options: RealtimeServerOptions(apps: [Self.app]), configure: { $0.roomStore = store })
        }
        let nodeA = try node()
        let nodeB = try node()
        defer {
            nodeA.shutdown(grace: .zero)
            nodeB.shutdown(grace: .zero)
        }
        for seq in 1...30 {
            _ = try nodeA.hub.publishRoom(appID: Self.app.id, room: "order:7", event: "updated", data: #"{"seq":\#(seq)}"#)
        }
        let backend = RealtimeBackend(appKey: Self.app.key, appSecret: Self.app.secret)
        try backend.room("order:{id}", history: 100)
        var options = BirdRealtime.Options(appKey: Self.app.key, host: "127.0.0.1", port: nodeB.port)
        options.watchesReachability = false
        options.roomAuthorizer = { rooms in await backend.authorizeRooms(rooms, user: "u1") }
        let bird = BirdRealtime(options: options)
        defer { bird.disconnect() }
        let room = bird.join("order:7")
        bird.connect()
        let newest = try await room.history(limit: 20)
        #expect(newest.events.map(\.meta.id) == Array(11...30))
        #expect(newest.more)
        let oldest = try await room.history(before: 11, limit: 20)
        #expect(oldest.events.map(\.meta.id) == Array(1...10))
        #expect(!oldest.more)
        #expect(oldest.events.first?.data["seq"] == .number(1))
        // The room's position on B is A's: the next event published through B follows on.
        #expect(room.position?.id == 30)
        let next = try nodeB.hub.publishRoom(appID: Self.app.id, room: "order:7", event: "updated", data: #"{"seq":31}"#)
        #expect(next.record.id == 31)
    }
}
