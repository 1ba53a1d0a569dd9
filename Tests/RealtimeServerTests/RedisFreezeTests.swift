import Foundation
import Glibc
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import TestSupport
import Testing

/// A node whose Redis stops answering (SIGSTOP: what a fork for a snapshot, a failover or a
/// network stall does) must go on serving everything that needs no Redis (issue 31). Each test
/// freezes a real private `redis-server` and pings over a real socket meanwhile.
@Suite("The node while Redis is frozen")
struct RedisFreezeTests {
    @Test("a channel client's ping stays under 50 ms through a 4 s freeze of the node's Redis while a room with a member is quiet: the sweep compares quiet rooms with the store holding no lock (issue 31)", .timeLimit(.minutes(1)))
    func pingDuringRedisFreezeQuietRoom() async throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
        let fanout = RedisFanout(endpoint: redis.endpoint)
        let fixture = try ServerFixture { $0.roomStore = store; $0.fanout = fanout }
        #expect(await eventually { fixture.server.hub.isFanoutHealthy })
        let client = try RoomClient(fixture)
        client.sendRaw(#"{"event":"bird:subscribe","data":{"channel":"news"}}"#)
        #expect(client.wait { $0.messages.contains { $0.event == "bird_internal:subscription_succeeded" } })
        let member = try RoomClient(fixture)
        #expect(member.joined("chat:1", token: Tokens.make(room: "chat:1", user: "ann", rule: RoomRule(history: 100))) != nil)
        // An event that came back over the bus: the node follows the room, confirmed.
        try fixture.server.hub.publishRoom(appID: "1", room: "chat:1", event: "m", data: "{}")
        #expect(member.waitFor("m", room: "chat:1") != nil)
        kill(redis.processIdentifier, SIGSTOP)
        let frozen = ContinuousClock.now
        var roundTrips: [Duration] = []
        // Past fanoutCheckInterval (2 s) of quiet: the sweep compares the room with the store.
        while ContinuousClock.now - frozen < .seconds(4) {
            roundTrips += HostileRoomTests.pingRoundTrips(client)
            try await Task.sleep(for: .milliseconds(50))
        }
        kill(redis.processIdentifier, SIGCONT)
        let slowest = roundTrips.max() ?? .zero
        #expect(slowest < .milliseconds(50 * Sanitizers.slowdown), "the slowest of \(roundTrips.count) pings took \(slowest)")
        // The room still delivers once Redis answers.
        #expect(await eventually { fixture.server.hub.isFanoutHealthy })
        try fixture.server.hub.publishRoom(appID: "1", room: "chat:1", event: "m", data: "{}")
        #expect(member.waitFor("m", room: "chat:1", count: 2) != nil)
    }
}
