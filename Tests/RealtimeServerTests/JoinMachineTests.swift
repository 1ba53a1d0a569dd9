import Foundation
import RealtimeProtocol
@testable import RealtimeServer
import SystemSupport
import Testing

/// A join's steps as a machine (docs/rooms-protocol.md "Joining", "Replay"): fed events on a
/// plain `State` value (the join's arrival, its turns on the lane, the store's answers as
/// values) and compared by the requests it makes and the actions it queues. No lane, store,
/// thread or socket runs: the store's answers are written here.
@Suite("A join as a machine: events in, requests and actions out")
struct JoinMachineTests {
    static let app = RealtimeApp(id: "1", key: "app-key", secret: "app-secret", maxConnections: 10, activityTimeout: 30)
    static let rule = RoomRule(history: 1000)

    /// A hub for its configuration and decisions (its own state is never used), a state value,
    /// and one connection in it.
    final class Machine {
        let hub = RealtimeHub(configuration: RealtimeHub.Configuration(apps: [JoinMachineTests.app]))
        var state = RealtimeHub.State()
        let output = FillableOutput()
        let socketID = "1.1"

        init() {
            state.connections[socketID] = RealtimeHub.Connection(
                socketID: socketID, app: JoinMachineTests.app, namespace: .bird, output: output, budget: ConnectionBudget(openedAt: .now))
        }

        var connection: RealtimeHub.Connection { state.connections[socketID]! }

        /// A member's `room_join` arrives: the join it registers (or `nil` when refused).
        func join(_ room: String, since: RoomPosition? = nil) -> RealtimeHub.JoinJob? {
            let token = Tokens.make(room: room, user: "ann", rule: JoinMachineTests.rule, secret: JoinMachineTests.app.secret)
            guard case .join(let job) = hub.roomJoin(RoomJoinRequest(room: room, token: token, since: since), connection: connection, in: &state) else {
                return nil
            }
            return job
        }

        func turn(_ job: RealtimeHub.JoinJob, nodeOverReplayBudget: Bool = false) -> RealtimeHub.JoinNext {
            hub.joinTurn(job, nodeOverReplayBudget: nodeOverReplayBudget, in: &state)
        }

        func answer(_ job: RealtimeHub.JoinJob, _ answer: RealtimeHub.JoinAnswer) -> RealtimeHub.JoinNext {
            hub.joinAnswered(job, answer, nodeOverReplayBudget: false, in: &state)
        }

        /// The actions queued since the last call, each summed up in a line.
        func actions() -> [String] {
            defer { state.outbox.pending.removeAll() }
            return state.outbox.pending.map(Self.summary)
        }

        static func summary(_ action: RealtimeHub.Delivery) -> String {
            switch action {
            case .send(_, let text): return "send " + frameSummary(text)
            case .close(_, let code, _): return "close \(code)"
            case .abort: return "abort"
            case .webhook(_, let event): return "webhook \(event.name)"
            case .follow(let topic): return "follow \(topic)"
            case .unfollow(let topic): return "unfollow \(topic)"
            case .presence: return "presence"
            case .catchUp(_, let room): return "catch up \(room)"
            case .resumeJoin(let job): return "resume join \(job.room)"
            }
        }

        /// `#3 replayed`, `#4`, `joined 3 recovered`, `gap epoch_changed`, `error store_full`.
        static func frameSummary(_ text: String) -> String {
            guard let message = try? RealtimeMessage(parsing: text), let data = message.data.flatMap(StrictJSON.parse) else { return text }
            if let id = data["meta"]?["id"]?.number {
                return "#\(Int(id))" + (data["meta"]?["replayed"] != nil ? " replayed" : "")
            }
            let event = data["event"]?.string ?? "?"
            let body = data["data"]
            switch event {
            case RoomSystemEvent.joined:
                let recovered = body?["recovered"]
                return "joined \(Int(body?["id"]?.number ?? -1))" + (recovered == nil ? "" : recovered?.bool == true ? " recovered" : " unrecovered")
            case RoomSystemEvent.gap: return "gap \(body?["reason"]?.string ?? "?")"
            case RoomSystemEvent.error: return "error \(body?["code"]?.string ?? "?")"
            default: return event
            }
        }
    }

    static func record(_ id: UInt64) -> RoomEventRecord {
        RoomEventRecord(id: id, at: 1_700_000_000_000 + Int64(id), event: "moved", data: #"{"n":\#(id)}"#, from: nil)
    }

    static func page(_ ids: ClosedRange<UInt64>?, current: RoomPosition) -> RealtimeHub.JoinAnswer {
        .page(RoomReplayPage(events: ids.map { $0.map(record) } ?? [], current: current))
    }

    @Test("a join from no position: the rule settled, the position read, then joined; the member admitted, nothing pending")
    func joinFromNoPosition() throws {
        let machine = Machine()
        let job = try #require(machine.join("r"))
        #expect(machine.actions().isEmpty)
        guard case .perform(.settleRule(let offered)) = machine.turn(job) else { Issue.record("the first turn settles the rule"); return }
        #expect(offered.rule == Self.rule)
        #expect(machine.answer(job, .rule(offered)) == .perform(.position))
        #expect(machine.answer(job, .position(RoomPosition(epoch: "e1", id: 7))) == .done(catchUp: false))
        #expect(machine.actions() == ["send joined 7"])
        let room = try #require(machine.state.rooms[Self.app.id]?["r"])
        #expect(room.members[machine.socketID] != nil && room.pending.isEmpty && room.epoch == "e1")
    }

    @Test("a replay across a new epoch: the first page finds the epoch gone, the new one is read from its start; gap (epoch_changed), every event of the new epoch replayed, then joined unrecovered")
    func replayAcrossNewEpoch() throws {
        let machine = Machine()
        let job = try #require(machine.join("r", since: RoomPosition(epoch: "e1", id: 5)))
        guard case .perform(.settleRule(let offered)) = machine.turn(job) else { Issue.record("the first turn settles the rule"); return }
        guard case .perform(.replayPage(let after, _)) = machine.answer(job, .rule(offered)) else { Issue.record("the first page is read in the same turn"); return }
        #expect(after == RoomPosition(epoch: "e1", id: 5))
        guard case .perform(.replayPage(let again, _)) = machine.answer(job, Self.page(nil, current: RoomPosition(epoch: "e2", id: 3))) else {
            Issue.record("another epoch: read again from its start")
            return
        }
        #expect(again == RoomPosition(epoch: "e2", id: 0))
        #expect(machine.answer(job, Self.page(1...3, current: RoomPosition(epoch: "e2", id: 3))) == .done(catchUp: false))
        #expect(machine.actions() == ["send gap epoch_changed", "send #1 replayed", "send #2 replayed", "send #3 replayed", "send joined 3 unrecovered"])
    }

    @Test("a long replay: each page before the last in its own turn of the lane; the shard fails mid-join: the pages sent stay sent, the member is told store_full, and the room with nobody left closes")
    func shardFailsMidJoin() throws {
        let machine = Machine()
        let job = try #require(machine.join("r", since: RoomPosition(epoch: "e1", id: 0)))
        guard case .perform(.settleRule(let offered)) = machine.turn(job) else { Issue.record("the first turn settles the rule"); return }
        guard case .perform(.replayPage) = machine.answer(job, .rule(offered)) else { Issue.record("the first page is read in the same turn"); return }
        #expect(machine.answer(job, Self.page(1...2, current: RoomPosition(epoch: "e1", id: 10))) == .queue(after: nil))
        #expect(machine.actions() == ["send #1 replayed", "send #2 replayed"])
        guard case .perform(.replayPage(let after, _)) = machine.turn(job) else { Issue.record("the next turn reads the next page"); return }
        #expect(after == RoomPosition(epoch: "e1", id: 2))
        #expect(machine.answer(job, .failed("shard 0-5460 is down")) == .done(catchUp: false))
        #expect(machine.actions() == ["send error store_full"])
        #expect(machine.state.rooms[Self.app.id]?["r"] == nil)
        #expect(machine.connection.rooms.isEmpty)
    }

    @Test("a leave while the store reads: the answer finds no join of its generation and is dropped; a newer join of the same room is not taken by the older's answer")
    func answerAfterLeave() throws {
        let machine = Machine()
        let first = try #require(machine.join("r"))
        guard case .perform(.settleRule(let offered)) = machine.turn(first) else { Issue.record("the first turn settles the rule"); return }
        machine.hub.leaveRoom("r", socketID: machine.socketID, app: Self.app.id, in: &machine.state)
        #expect(machine.answer(first, .rule(offered)) == .done(catchUp: false))
        let second = try #require(machine.join("r"))
        #expect(second.generation != first.generation)
        #expect(machine.answer(first, .position(RoomPosition(epoch: "e1", id: 1))) == .done(catchUp: false))
        #expect(machine.actions().isEmpty)
        guard case .perform(.settleRule) = machine.turn(second) else { Issue.record("the newer join still takes its own steps"); return }
    }

    @Test("a full socket: one stream looks again on a timer, twice as long each time; the connection's other stream waits parked, and asks for its turn when the one that looks reads")
    func fullSocketParks() throws {
        let machine = Machine()
        let since = RoomPosition(epoch: "e1", id: 0)
        let a = try #require(machine.join("a", since: since))
        let b = try #require(machine.join("b", since: since))
        machine.output.queued.withLock { $0 = RealtimeHub.replayQueuedBytes + 1 }
        for job in [a, b] {
            guard case .perform(.settleRule(let offered)) = machine.turn(job) else { Issue.record("the first turn settles the rule"); return }
            let next = machine.answer(job, .rule(offered))
            #expect(next == (job == a ? .queue(after: .milliseconds(5)) : .done(catchUp: false)))
        }
        #expect(machine.turn(a) == .queue(after: .milliseconds(10)))
        #expect(machine.connection.replayParked.keys.sorted() == ["b"])
        #expect(machine.actions().isEmpty)
        machine.output.queued.withLock { $0 = 0 }
        guard case .perform(.replayPage) = machine.turn(a) else { Issue.record("room on the socket: the page is read"); return }
        #expect(machine.actions() == ["resume join b"])
        #expect(machine.connection.replayParked.isEmpty && machine.connection.replayLooker == nil)
        guard case .perform(.replayPage) = machine.turn(b) else { Issue.record("the parked stream reads in its turn"); return }
    }

    @Test("the lane refuses a join's turn: store_full, the join forgotten")
    func laneRefusal() throws {
        let machine = Machine()
        let job = try #require(machine.join("r"))
        machine.hub.joinRefused(job, in: &machine.state)
        #expect(machine.actions() == ["send error store_full"])
        #expect(machine.state.rooms[Self.app.id]?["r"] == nil)
        #expect(machine.turn(job) == .done(catchUp: false))
    }
}

/// A connection output whose queued bytes a test sets.
final class FillableOutput: ConnectionOutput {
    let queued = Locked(0)
    func send(text: String) {}
    func close(code: UInt16, reason: String) {}
    func abort() {}
    var queuedBytes: Int { queued.withLock { $0 } }
}
