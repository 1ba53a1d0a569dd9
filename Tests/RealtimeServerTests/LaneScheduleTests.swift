@testable import RealtimeServer
import SystemSupport
import TestSupport
import Dispatch
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Glibc
import Testing

@Suite("The room lane's fair share")
struct LaneScheduleTests {
    static let start = ContinuousClock.now

    /// Runs every waiting job in turn, each costing what `cost` says of its client, one after
    /// another on a manual clock from `at`; returns the jobs in the order run.
    static func drain(_ schedule: inout LaneSchedule<String>, from instant: ContinuousClock.Instant, cost: (String) -> Duration) -> [String] {
        var order: [String] = []
        var now = instant
        while let (client, job) = schedule.next(at: now) {
            order.append(job)
            let took = cost(client)
            now += took
            schedule.charge(client, cost: Double(took.components.attoseconds) / 1e18 + Double(took.components.seconds), at: now)
        }
        return order
    }

    /// A small seeded generator (xorshift64*), for the property below.
    struct Xorshift: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state ^= state >> 12
            state ^= state << 25
            state ^= state >> 27
            return state &* 2_685_821_657_736_338_717
        }
    }

    @Test("the next client is the one with the least decayed usage now, whenever the clients were charged (the ranks agree with the decay)")
    func ranksAgreeWithDecayedUsage() {
        var random = Xorshift(state: 48)
        for _ in 0..<500 {
            var schedule = LaneSchedule<String>(maxJobs: 1000, maxPerClient: 8)
            let clients = (0..<Int.random(in: 2...12, using: &random)).map { "c\($0)" }
            var instant = Self.start
            for client in clients {
                instant += .milliseconds(Int.random(in: 0...3000, using: &random))
                if Bool.random(using: &random) { schedule.charge(client, cost: Double.random(in: 0.0001...5, using: &random), at: instant) }
                _ = schedule.enqueue("job of \(client)", client: client, node: false, at: instant)
            }
            let now = instant + .milliseconds(Int.random(in: 0...5000, using: &random))
            let usages = clients.map { schedule.usage(of: $0, at: now) }
            let least = usages.min() ?? 0
            // Of equal usages (clients never charged, say), the one that queued first.
            let expected = clients[usages.firstIndex { abs($0 - least) <= least * 1e-9 } ?? 0]
            #expect(schedule.next(at: now)?.client == expected, "usages \(usages)")
        }
    }

    @Test("a member that used the lane little goes before a crowd that queued much, each client's own jobs in order")
    func lightClientFirst() {
        var schedule = LaneSchedule<String>(maxJobs: 10_000, maxPerClient: 32)
        // 150 pagers used 4 ms each a moment ago; the member 0.3 ms.
        for pager in 0..<150 { schedule.charge("pager\(pager)", cost: 0.004, at: Self.start) }
        schedule.charge("member", cost: 0.0003, at: Self.start)
        for round in 0..<3 {
            for pager in 0..<150 { #expect(schedule.enqueue("page \(pager).\(round)", client: "pager\(pager)", node: false, at: Self.start) .isQueued) }
        }
        #expect(schedule.enqueue("send 1", client: "member", node: false, at: Self.start).isQueued)
        #expect(schedule.enqueue("send 2", client: "member", node: false, at: Self.start).isQueued)
        let order = Self.drain(&schedule, from: Self.start) { $0 == "member" ? .microseconds(300) : .milliseconds(4) }
        #expect(Array(order.prefix(2)) == ["send 1", "send 2"])
        #expect(order.count == 452)
        // Each pager's pages in the order they were asked for.
        for pager in 0..<150 {
            #expect(order.filter { $0.hasPrefix("page \(pager).") } == (0..<3).map { "page \(pager).\($0)" })
        }
    }

    @Test("clients that used the lane alike take turns; an idle client banks nothing")
    func turns() {
        var schedule = LaneSchedule<String>(maxJobs: 100, maxPerClient: 32)
        for index in 0..<3 {
            _ = schedule.enqueue("a\(index)", client: "a", node: false, at: Self.start)
            _ = schedule.enqueue("b\(index)", client: "b", node: false, at: Self.start)
        }
        #expect(Self.drain(&schedule, from: Self.start) { _ in .milliseconds(1) } == ["a0", "b0", "a1", "b1", "a2", "b2"])
        // 20 s later "a" and "b" keep a millionth of their 3 ms each ("a" less: charged
        // earlier), a newcomer "c" nothing: what they used then no longer holds them back.
        let later = Self.start + .seconds(20)
        #expect(schedule.usage(of: "a", at: later) < 3e-9 && schedule.usage(of: "b", at: later) < 3e-9)
        _ = schedule.enqueue("b3", client: "b", node: false, at: later)
        _ = schedule.enqueue("c0", client: "c", node: false, at: later)
        _ = schedule.enqueue("a3", client: "a", node: false, at: later)
        _ = schedule.enqueue("b4", client: "b", node: false, at: later)
        _ = schedule.enqueue("c1", client: "c", node: false, at: later)
        #expect(Self.drain(&schedule, from: later) { _ in .milliseconds(1) } == ["c0", "a3", "b3", "c1", "b4"])
    }

    @Test("usage halves every second")
    func decay() {
        var schedule = LaneSchedule<String>(maxJobs: 10, maxPerClient: 10)
        schedule.charge("a", cost: 0.8, at: Self.start)
        #expect(abs(schedule.usage(of: "a", at: Self.start + .seconds(1)) - 0.4) < 1e-9)
        #expect(abs(schedule.usage(of: "a", at: Self.start + .seconds(3)) - 0.1) < 1e-9)
        #expect(schedule.usage(of: "nobody", at: Self.start) == 0)
    }

    @Test("bounded: a connection's own share, then the heaviest client's newest job gives way, never a lighter one's")
    func bounds() {
        var schedule = LaneSchedule<String>(maxJobs: 4, maxPerClient: 3)
        schedule.charge("heavy", cost: 1, at: Self.start)
        schedule.charge("light", cost: 0.001, at: Self.start)
        for index in 0..<3 { #expect(schedule.enqueue("h\(index)", client: "heavy", node: false, at: Self.start).isQueued) }
        #expect(!schedule.enqueue("h3", client: "heavy", node: false, at: Self.start).isQueued, "over its own share")
        #expect(schedule.enqueue("l0", client: "light", node: false, at: Self.start).isQueued)
        // Full: a lighter newcomer takes the heavy client's newest place.
        guard case .displaced(let displaced) = schedule.enqueue("l1", client: "light", node: false, at: Self.start) else {
            Issue.record("the heavy client's newest job was not displaced")
            return
        }
        #expect(displaced == "h2")
        // Full: the heavy client cannot take the light one's places; the node's work (which
        // has used nothing) takes nobody's.
        #expect(!schedule.enqueue("h4", client: "heavy", node: false, at: Self.start).isQueued)
        #expect(!schedule.enqueue("sweep", client: RoomLane.node, node: true, at: Self.start).isQueued)
        #expect(schedule.count == 4)
        #expect(Self.drain(&schedule, from: Self.start) { _ in .milliseconds(1) } == ["l0", "l1", "h0", "h1"])
        // The node's work is bounded by the total only, and never displaced: a newcomer finds
        // no connection's job to take the place of.
        for index in 0..<4 { #expect(schedule.enqueue("n\(index)", client: RoomLane.node, node: true, at: Self.start).isQueued) }
        #expect(!schedule.enqueue("n4", client: RoomLane.node, node: true, at: Self.start).isQueued)
        #expect(!schedule.enqueue("l2", client: "light", node: false, at: Self.start).isQueued)
    }

    @Test("the lane runs the fairest job waiting, on its queue, and refuses what it displaces", .timeLimit(.minutes(1)))
    func laneRuns() {
        let lane = RoomLane(maxBacklog: 100, maxPerClient: 100)
        let order = Locked<[String]>([])
        let gate = Locked(true)
        // The first job holds the lane until the others wait.
        #expect(lane.submit(LaneJob(client: "busy", run: { while gate.withLock({ $0 }) { usleep(1000) }; order.withLock { $0.append("busy") } }, refused: {})))
        usleep(20_000)
        for index in 0..<3 {
            #expect(lane.submit(LaneJob(client: "busy", run: { order.withLock { $0.append("busy\(index)") } }, refused: {})))
        }
        #expect(lane.submit(LaneJob(client: "member", run: { order.withLock { $0.append("member") } }, refused: {})))
        #expect(lane.depth == 5)
        gate.withLock { $0 = false }
        #expect(lane.perform { 42 } == 42)
        while order.withLock({ $0.count }) < 5 { usleep(1000) }
        // The member never used the lane; "busy" used 20 ms, so the member goes first (and
        // `perform`, the node's work, which has used nothing either, before busy's rest).
        #expect(order.withLock { $0 } == ["busy", "member", "busy0", "busy1", "busy2"])
        #expect(lane.depth == 0)
    }
}

@Suite("The room lane's shards")
struct RoomLaneShardTests {
    @Test("a shard that stops answering holds its own rooms' jobs only, and is named as stalled; the node's work runs on the lane \"\"", .timeLimit(.minutes(1)))
    func frozenShard() {
        // Rooms "a:…" on the shard "redis://a", "b:…" on "redis://b".
        let lane = RoomLane(maxBacklog: 100, shardOf: { _, room in "redis://" + room.prefix(1) })
        let frozen = DispatchSemaphore(value: 0)
        let ran = Locked<[String]>([])
        #expect(lane.submit(LaneJob(client: "s1", room: ("1", "a:1"), run: { frozen.wait(); ran.withLock { $0.append("a:1") } }, refused: {})))
        #expect(lane.submit(LaneJob(client: "s2", room: ("1", "a:2"), run: { ran.withLock { $0.append("a:2") } }, refused: {})))
        // The other shard's rooms and the node's work go on meanwhile.
        #expect(lane.perform(room: ("1", "b:1")) { ran.withLock { $0.append("b:1") }; return true } == true)
        #expect(lane.perform { ran.withLock { $0.append("node") }; return true } == true)
        #expect(ran.withLock { $0 } == ["b:1", "node"])
        // `perform` answers from inside its job: the lane counts it until the job returns.
        for _ in 0..<1000 where lane.depth > 2 { usleep(1000) }
        #expect(lane.depth == 2)
        // Named once its job has run for the threshold.
        #expect(lane.stalledShards(after: .seconds(60)).isEmpty)
        usleep(120_000)
        #expect(lane.stalledShards(after: .milliseconds(100)).map(\.shard) == ["redis://a"])
        frozen.signal()
        while lane.depth > 0 { usleep(1000) }
        #expect(ran.withLock { $0 } == ["b:1", "node", "a:1", "a:2"])
        #expect(lane.stalledShards(after: .milliseconds(100)).isEmpty)
    }

    @Test("a room whose shard moves keeps its jobs in flight on one lane, in order; its next ones go to the new shard", .timeLimit(.minutes(1)))
    func slotMove() {
        let map = Locked("redis://a")
        let lane = RoomLane(maxBacklog: 100, shardOf: { _, _ in map.withLock { $0 } })
        let gate = DispatchSemaphore(value: 0)
        let ran = Locked<[String]>([])
        #expect(lane.submit(LaneJob(client: "s1", room: ("1", "r"), run: { gate.wait(); ran.withLock { $0.append("first") } }, refused: {})))
        // The slot moves (a failover): the room's next request still follows the first.
        map.withLock { $0 = "redis://b" }
        #expect(lane.submit(LaneJob(client: "s1", room: ("1", "r"), run: { ran.withLock { $0.append("second") } }, refused: {})))
        usleep(50_000)
        #expect(ran.withLock { $0 }.isEmpty)
        gate.signal()
        while lane.depth > 0 { usleep(1000) }
        #expect(ran.withLock { $0 } == ["first", "second"])
        // Nothing in flight: the next goes to the new master's lane, while the old one is held.
        let held = DispatchSemaphore(value: 0)
        map.withLock { $0 = "redis://a" }
        #expect(lane.submit(LaneJob(client: "s2", room: ("1", "other"), run: { held.wait() }, refused: {})))
        map.withLock { $0 = "redis://b" }
        #expect(lane.perform(room: ("1", "r")) { ran.withLock { $0.append("third") }; return true } == true)
        #expect(ran.withLock { $0 } == ["first", "second", "third"])
        held.signal()
    }

    @Test("node work about many rooms runs once per shard, each with its rooms, in order with their requests; a frozen shard holds its own share only, and a second call while one waits there leaves those rooms to the next", .timeLimit(.minutes(1)))
    func perShardNodeWork() {
        let lane = RoomLane(maxBacklog: 100, shardOf: { _, room in "redis://" + room.prefix(1) })
        let frozen = DispatchSemaphore(value: 0)
        let ran = Locked<[String]>([])
        // A member's request on "a" that does not return (a frozen master).
        #expect(lane.submit(LaneJob(client: "s1", room: ("1", "a:1"), run: { frozen.wait(); ran.withLock { $0.append("join a:1") } }, refused: {})))
        let done = DispatchSemaphore(value: 0)
        let left = lane.submitPerShard("check", [(app: "1", room: "a:1"), (app: "1", room: "b:1"), (app: "1", room: "a:2"), (app: "1", room: "b:2")], room: { $0 }) { rooms in
            ran.withLock { $0.append("check " + rooms.map(\.room).joined(separator: ",")) }
            done.signal()
        }
        #expect(left.isEmpty)
        // "b"'s share runs; "a"'s waits behind the frozen join.
        done.wait()
        #expect(ran.withLock { $0 } == ["check b:1,b:2"])
        // One waiting per shard and key: the second call's "a" rooms are left to the next.
        let again = lane.submitPerShard("check", [(app: "1", room: "a:3"), (app: "1", room: "b:3")], room: { $0 }) { rooms in
            ran.withLock { $0.append("check " + rooms.map(\.room).joined(separator: ",")) }
        }
        #expect(again.map(\.room) == ["a:3"])
        // A topic's presence work on its shard's lane: "b" is not held either.
        #expect(lane.perform(room: nil) { true } == true)
        let presence = DispatchSemaphore(value: 0)
        #expect(lane.submit(shard: "redis://b") { presence.signal() })
        presence.wait()
        frozen.signal()
        while lane.depth > 0 { usleep(1000) }
        #expect(ran.withLock { $0 } == ["check b:1,b:2", "check b:3", "join a:1", "check a:1,a:2"])
    }

    @Test("perform gives up on a job that has not started by its deadline: it answers nil and the body never runs; a started one is waited for", .timeLimit(.minutes(1)))
    func performDeadline() {
        let lane = RoomLane(maxBacklog: 100, shardOf: { _, room in "redis://" + room.prefix(1) })
        let frozen = DispatchSemaphore(value: 0)
        #expect(lane.submit(LaneJob(client: "s1", room: ("1", "a:1"), run: { frozen.wait() }, refused: {})))
        let ran = Locked(false)
        #expect(lane.perform(room: ("1", "a:2"), startDeadline: .milliseconds(50)) { ran.withLock { $0 = true }; return true } == nil)
        frozen.signal()
        while lane.depth > 0 { usleep(1000) }
        #expect(!ran.withLock { $0 }, "withdrawn: never run")
        // Started before its deadline, longer than it: waited for.
        #expect(lane.perform(room: ("1", "a:3"), startDeadline: .milliseconds(50)) { usleep(150_000); return 7 } == 7)
    }

    @Test("the hub's /health names a stalled store shard, and no more once it answers", .timeLimit(.minutes(1)))
    func healthNamesStalledShard() async throws {
        let fixture = try ServerFixture()
        let hub = fixture.server.hub
        func health() async -> String {
            var request = URLRequest(url: URL(string: "http://127.0.0.1:\(fixture.server.port)/health")!)
            request.timeoutInterval = 2
            return (try? await HTTPRequests.send(request))?.body ?? ""
        }
        #expect(await health().contains(#""status":"ok""#))
        // A store call that does not return, as a frozen Redis: the HTTP API's publish waits on
        // the lane "" (the in-memory store is reached whole).
        let gate = DispatchSemaphore(value: 0)
        #expect(hub.lane.submit { gate.wait() })
        try await Task.sleep(for: .milliseconds(600))
        let answer = await health()
        #expect(answer.contains(#""status":"degraded""#) && answer.contains("the history store (not answering for"), "\(answer)")
        gate.signal()
        var healthy = false
        for _ in 0..<100 where !healthy {
            healthy = await health().contains(#""status":"ok""#)
            if !healthy { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(healthy)
    }
}

extension LaneSchedule.Admission {
    var isQueued: Bool {
        switch self {
        case .queued, .displaced: true
        case .refused: false
        }
    }
}
