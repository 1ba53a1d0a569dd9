import Foundation
import RealtimeProtocol
@testable import RealtimeServer
import Testing

/// Streamed replays waiting for a full socket (docs/rooms-protocol.md "Replay"): one stream per
/// connection looks on a timer, the others wait parked, one per room at most.
@Suite("Replays parked while their socket is full", .serialized)
struct ReplayParkingTests {
    @Test("a client that stops reading and joins and leaves a room 50 times while another room's replay waits: one parked replay for that room, not 50, and every event of the other room once when it reads again", .timeLimit(.minutes(1)))
    func joinAndLeaveWhileFull() throws {
        let fixture = try ServerFixture()
        let hub = fixture.server.hub
        let rule = RoomRule(history: 1000)
        // 9 MB: more than the kernel's socket buffers hold, so the server's queue fills.
        let first = try RoomServerTests.backlog(hub, room: "park:a", rule: rule, events: 1000, bytes: 9000)
        let second = try RoomServerTests.backlog(hub, room: "park:b", rule: rule, events: 200, bytes: 5000)
        let client = try RoomClient(fixture)
        let socketID = try #require(client.socketID)
        client.setReceiving(false)
        client.join("park:a", token: Tokens.make(room: "park:a", user: "ann", rule: rule), since: first)
        // park:a's replay fills the socket, then looks on its timer.
        let deadline = ContinuousClock.now + .seconds(10)
        while hub.metrics.replayWaits.load(ordering: .relaxed) == 0, ContinuousClock.now < deadline { usleep(10_000) }
        #expect(hub.metrics.replayWaits.load(ordering: .relaxed) > 0, "park:a's replay never waited for its socket")
        for _ in 0..<50 {
            client.join("park:b", token: Tokens.make(room: "park:b", user: "ann", rule: rule), since: second)
            usleep(10_000)
            client.send(.roomLeave, RoomLeaveRequest(room: "park:b"))
        }
        usleep(300_000)
        let parked = hub.state.withLock { $0.connections[socketID]?.replayParked.count ?? -1 }
        #expect(parked <= 1, "\(parked) replays parked for one room")
        client.setReceiving(true)
        #expect(client.wait(timeout: .seconds(30)) { $0.frames.contains { $0.room == "park:a" && $0.event == "joined" } })
        #expect(client.kept("park:a").map(\.id) == Array((first.id + 1)...(first.id + 1000)).map(Optional.some))
        #expect(client.closeCode == nil)
    }
}

extension ReplayParkingTests {
    /// A server whose node may queue 1 MiB for its clients, a full queue dropped after 2 s.
    static func tightNode() throws -> ServerFixture {
        try ServerFixture { configuration in
            configuration.replayMemoryBudget = 1024 * 1024
            configuration.replayStallDeadline = .seconds(2)
        }
    }

    @Test(
        "two clients that stop reading their replays on a node whose replay memory is 1 MiB: their replays wait for the node, then the one whose queue stayed full longest is dropped and the other, reading again, gets every event once (issue 47, item 3: each connection was bounded, the node not)",
        .timeLimit(.minutes(1)))
    func nodeReplayMemory() throws {
        let fixture = try Self.tightNode()
        let hub = fixture.server.hub
        let rule = RoomRule(history: 1000)
        let start = try RoomServerTests.backlog(hub, room: "node:a", rule: rule, events: 1000, bytes: 9000)
        var clients: [RoomClient] = []
        for user in ["ann", "bob"] {
            let client = try RoomClient(fixture)
            client.setReceiving(false)
            client.join("node:a", token: Tokens.make(room: "node:a", user: user, rule: rule), since: start)
            clients.append(client)
            // ann's replay stalls first.
            let deadline = ContinuousClock.now + .seconds(10)
            let socketID = try #require(client.socketID)
            while hub.state.withLock({ $0.connections[socketID]?.output.queuedBytes ?? 0 }) <= RealtimeHub.replayQueuedBytes, ContinuousClock.now < deadline { usleep(10_000) }
        }
        var queued = 0
        let filled = ContinuousClock.now + .seconds(10)
        while queued <= 1024 * 1024, ContinuousClock.now < filled {
            usleep(10_000)
            queued = hub.configurationStorage.queuedBytes?() ?? 0
        }
        #expect(queued > 1024 * 1024 && queued < 3 * 1024 * 1024, "both stalled, the node over its 1 MiB and no more than two sockets' worth: \(queued)")
        // Past the deadline the sweep drops one of them (both found full in the same look: the
        // one holding most), which brings the node under.
        let deadline = ContinuousClock.now + .seconds(15)
        while hub.metrics.slowReadersDropped.load(ordering: .relaxed) == 0, ContinuousClock.now < deadline { usleep(50_000) }
        usleep(2_500_000)
        #expect(hub.metrics.slowReadersDropped.load(ordering: .relaxed) == 1)
        let ids = try clients.map { try #require($0.socketID) }
        let open = hub.state.withLock { state in ids.map { state.connections[$0] != nil } }
        #expect(open.filter { $0 }.count == 1, "\(open)")
        let kept = try #require(open.firstIndex(of: true).map { clients[$0] })
        kept.setReceiving(true)
        #expect(kept.wait(timeout: .seconds(30)) { $0.frames.contains { $0.room == "node:a" && $0.event == "joined" } })
        #expect(kept.kept("node:a").map(\.id) == Array((start.id + 1)...(start.id + 1000)).map(Optional.some))
    }
}

extension ReplayParkingTests {
    @Test(
        "two members resuming 1 MB each on a node paced at 1 MiB/s of replay: within the first 0.8 s they share about 1 MiB, each a part, and both then get every event once (issue 47, item 4: each connection was paced alone at 16 MiB/s)",
        .timeLimit(.minutes(1)))
    func nodeReplayRate() throws {
        let fixture = try ServerFixture { $0.replayBytesPerSecond = 1024 * 1024 }
        let rule = RoomRule(history: 1000)
        let start = try RoomServerTests.backlog(fixture.server.hub, room: "rate:a", rule: rule, events: 1000, bytes: 1000)
        let clients = try ["ann", "bob"].map { _ in try RoomClient(fixture) }
        for (index, client) in clients.enumerated() {
            client.join("rate:a", token: Tokens.make(room: "rate:a", user: "u\(index)", rule: rule), since: start)
        }
        usleep(800_000)
        let early = clients.map { $0.kept("rate:a").count }
        // 1 MiB is about 900 of these frames; each connection may pass its share by one page (256 KiB).
        #expect(early.reduce(0, +) < 1_500, "\(early)")
        #expect(early.allSatisfy { $0 >= 100 }, "each member got a share: \(early)")
        for client in clients {
            #expect(client.wait(timeout: .seconds(20)) { $0.frames.contains { $0.room == "rate:a" && $0.event == "joined" } })
            #expect(client.kept("rate:a").map(\.id) == Array((start.id + 1)...(start.id + 1000)).map(Optional.some))
        }
    }
}

extension ReplayParkingTests {
    @Test(
        "members of a live room who stop reading, replaying nothing, hold a 1 MiB node over its replay memory: past the deadline they are dropped too, and a reading member's replay, held back meanwhile, then ends with every event (a hostile review: only stalled replays were dropped, so every replay waited forever)",
        .timeLimit(.minutes(1)))
    func liveNonReadersShed() throws {
        let fixture = try Self.tightNode()
        let hub = fixture.server.hub
        let live = RoomRule(history: 10)
        var idle: [RoomClient] = []
        for index in 0..<3 {
            let client = try RoomClient(fixture)
            #expect(client.joined("live:1", token: Tokens.make(room: "live:1", user: "idle\(index)", rule: live)) != nil)
            client.setReceiving(false)
            idle.append(client)
        }
        // Live events until the idle members' kernel buffers are full and 3 MiB wait on the
        // server: about 1 MiB each, under the 4 MiB that would drop them as slow consumers.
        let data = #"{"pad":"\#(String(repeating: "y", count: 8000))"}"#
        let queuedDeadline = ContinuousClock.now + .seconds(20)
        while (hub.configurationStorage.queuedBytes?() ?? 0) <= 3 * 1024 * 1024, ContinuousClock.now < queuedDeadline {
            for _ in 0..<50 { try hub.publishRoom(appID: "1", room: "live:1", event: "e", data: data, rule: live) }
            usleep(50_000)
        }
        #expect((hub.configurationStorage.queuedBytes?() ?? 0) > 1024 * 1024, "the idle members hold the node over its budget")
        let rule = RoomRule(history: 1000)
        let start = try RoomServerTests.backlog(hub, room: "node:b", rule: rule, events: 200, bytes: 1000)
        let reader = try RoomClient(fixture)
        reader.join("node:b", token: Tokens.make(room: "node:b", user: "reader", rule: rule), since: start)
        #expect(reader.wait(timeout: .seconds(20)) { $0.frames.contains { $0.room == "node:b" && $0.event == "joined" } })
        #expect(reader.kept("node:b").map(\.id) == Array((start.id + 1)...(start.id + 200)).map(Optional.some))
        #expect(hub.metrics.slowReadersDropped.load(ordering: .relaxed) >= 1)
        #expect(reader.closeCode == nil)
    }
}
