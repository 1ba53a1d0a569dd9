import Foundation
import RealtimeProtocol
@testable import RealtimeServer
import SystemSupport
import Testing

/// The hub's decisions fed events on a plain `State` value, concern by concern (a connection's
/// frames, a join's turns on the lane and the store's answers as values, a node's catch-up, the
/// sweep's tick) and compared by the requests they make and the actions they queue. No lane,
/// store, bus, thread or socket runs: the store's answers are written here, the clock is moved
/// by hand.
enum HubMachine {
    static let app = RealtimeApp(id: "1", key: "app-key", secret: "app-secret", maxConnections: 10, activityTimeout: 30)
    static let rule = RoomRule(history: 1000, membersSend: true)

    /// A hub for its configuration and decisions (its own state is never used), a state value
    /// with one connection in it, and a manual clock.
    final class Machine {
        let hub: RealtimeHub
        var state = RealtimeHub.State()
        let output = FillableOutput()
        let socketID = "1.1"
        let clock = Locked(ContinuousClock.now)
        let wall = ManualWallClock()

        /// - Parameter cluster: whether the hub has a bus (`RealtimeFanout`): rooms then keep a
        ///   cursor, and a node's catch-up compares it with the store.
        init(cluster: Bool = false) {
            var configuration = RealtimeHub.Configuration(apps: [HubMachine.app])
            if cluster { configuration.fanout = UnusedFanout() }
            configuration.wallClock = wall.closure
            let clock = clock
            hub = RealtimeHub(configuration: configuration, now: { clock.withLock { $0 } })
            state.lastStoreExpiry = clock.withLock { $0 }
            state.connections[socketID] = RealtimeHub.Connection(
                socketID: socketID, app: HubMachine.app, namespace: .bird, output: output, budget: ConnectionBudget(openedAt: clock.withLock { $0 }))
            state.connectionsByApp[HubMachine.app.id] = 1
        }

        var now: ContinuousClock.Instant { clock.withLock { $0 } }

        func advance(_ duration: Duration) { clock.withLock { $0 += duration } }

        var connection: RealtimeHub.Connection { state.connections[socketID]! }

        /// A member's `room_join` arrives: the join it registers (or `nil` when refused).
        func join(_ room: String, since: RoomPosition? = nil, expiresIn: Int = 3600) -> RealtimeHub.JoinJob? {
            let token = Tokens.make(room: room, user: "ann", rule: HubMachine.rule, expiresIn: expiresIn, now: wall.now, secret: HubMachine.app.secret)
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
            case .console(let entry): return "console \(entry.kind.rawValue)"
            }
        }

        /// `#3 replayed`, `#4`, `joined 3 recovered`, `gap epoch_changed`, `error store_full`.
        static func frameSummary(_ text: String) -> String {
            guard let message = try? RealtimeMessage(parsing: text) else { return text }
            guard let data = message.data.flatMap(StrictJSON.parse) else { return message.event }
            if let request = data["request"]?.string {
                let events = data["events"]?.array?.compactMap { $0["meta"]?["id"]?.number }.map { "#\(Int($0))" } ?? []
                return "history \(request) " + (data["error"]?["code"]?.string ?? events.joined(separator: " "))
            }
            guard data["event"] != nil else { return message.event }
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

        /// A member joins from no position and the store says the room is at `position`: the
        /// join's steps fed their answers; its actions are taken.
        ///
        /// - Returns: what the last answer left to do (`nil`: a step asked something else).
        func joined(_ room: String, at position: RoomPosition, expiresIn: Int = 3600) throws -> RealtimeHub.JoinNext? {
            let job = try #require(join(room, expiresIn: expiresIn))
            guard case .perform(.settleRule(let offered)) = turn(job), answer(job, .rule(offered)) == .perform(.position) else { return nil }
            defer { _ = actions() }
            return answer(job, .position(position))
        }
    }

    static func record(_ id: UInt64) -> RoomEventRecord {
        RoomEventRecord(id: id, at: 1_700_000_000_000 + Int64(id), event: "moved", data: #"{"n":\#(id)}"#, from: nil)
    }
}

@Suite("A join as a machine: events in, requests and actions out")
struct JoinMachineTests {
    typealias Machine = HubMachine.Machine
    static let app = HubMachine.app
    static let rule = HubMachine.rule

    static func record(_ id: UInt64) -> RoomEventRecord { HubMachine.record(id) }

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

@Suite("A node's catch-up as a machine: the store's positions and replays in, deliveries and resyncs out")
struct CatchUpMachineTests {
    typealias Machine = HubMachine.Machine
    static let app = HubMachine.app.id

    @Test("a room behind the store in its epoch is caught up: the missed events delivered once, in id order, the cursor at the store's position; a second read for the old cursor changes nothing")
    func behindIsCaughtUp() throws {
        let machine = Machine(cluster: true)
        // On a cluster the first member's join opens the room here: a catch-up follows it.
        #expect(try machine.joined("r", at: RoomPosition(epoch: "e1", id: 5)) == .done(catchUp: true))
        let chosen = RealtimeHub.QuietRoom(app: Self.app, room: "r", cursor: RoomPosition(epoch: "e1", id: 5))
        #expect(machine.hub.roomsCompared([chosen], [RoomPosition(epoch: "e1", id: 8)], in: &machine.state) == [chosen])
        #expect(!chosen.lostWrites(RoomPosition(epoch: "e1", id: 8)))
        let replay = RoomReplay.events((5...8).map(HubMachine.record), current: RoomPosition(epoch: "e1", id: 8))
        machine.hub.roomCaughtUp(chosen, replay, forked: nil, in: &machine.state)
        #expect(machine.actions() == ["send #6", "send #7", "send #8"])
        #expect(machine.state.rooms[Self.app]?["r"]?.cursor == RoomPosition(epoch: "e1", id: 8))
        machine.hub.roomCaughtUp(chosen, replay, forked: nil, in: &machine.state)
        #expect(machine.actions().isEmpty)
    }

    @Test("compared with the store: a room on another epoch tells its members resync and takes the store's position; an unreachable one and one the bus moved meanwhile are left; a current one is only marked checked")
    func comparedWithTheStore() throws {
        let machine = Machine(cluster: true)
        for room in ["a", "b", "c", "d"] { _ = try machine.joined(room, at: RoomPosition(epoch: "e1", id: 5)) }
        let cursor = RoomPosition(epoch: "e1", id: 5)
        let chosen = ["a", "b", "c", "d"].map { RealtimeHub.QuietRoom(app: Self.app, room: $0, cursor: cursor) }
        // The bus moved c's cursor after it was chosen.
        machine.state.rooms[Self.app]?["c"]?.cursor = RoomPosition(epoch: "e1", id: 6)
        machine.advance(.seconds(3))
        let behind = machine.hub.roomsCompared(chosen, [RoomPosition(epoch: "e2", id: 1), nil, RoomPosition(epoch: "e2", id: 1), cursor], in: &machine.state)
        #expect(behind.isEmpty)
        #expect(machine.actions() == ["send error resync"])
        #expect(machine.state.rooms[Self.app]?["a"]?.cursor == RoomPosition(epoch: "e2", id: 1))
        #expect(machine.state.rooms[Self.app]?["b"]?.cursor == cursor)
        #expect(machine.state.rooms[Self.app]?["c"]?.cursor == RoomPosition(epoch: "e1", id: 6))
        #expect(machine.state.rooms[Self.app]?["d"]?.checkedAt == machine.now)
        #expect(machine.state.rooms[Self.app]?["b"]?.checkedAt != machine.now)
    }

    @Test("the store went back below the cursor in the same epoch (a failover lost writes): the room moves to the new epoch the store made, its members told resync")
    func lostWrites() throws {
        let machine = Machine(cluster: true)
        _ = try machine.joined("r", at: RoomPosition(epoch: "e1", id: 9))
        let chosen = RealtimeHub.QuietRoom(app: Self.app, room: "r", cursor: RoomPosition(epoch: "e1", id: 9))
        let back = RoomPosition(epoch: "e1", id: 4)
        #expect(chosen.lostWrites(back) && !chosen.lostWrites(RoomPosition(epoch: "e2", id: 4)))
        machine.hub.roomCaughtUp(chosen, .unrecoverable(.unknownPosition, current: back), forked: RoomPosition(epoch: "e9", id: 0), in: &machine.state)
        #expect(machine.actions() == ["send error resync"])
        #expect(machine.state.rooms[Self.app]?["r"]?.cursor == RoomPosition(epoch: "e9", id: 0))
    }
}

@Suite("The sweep as a machine: a tick of the clock in, pings, closes and store work out")
struct SweepMachineTests {
    typealias Machine = HubMachine.Machine

    @Test("a connection silent for its app's activity timeout is pinged once; one that does not answer within the pong timeout is left to close with 4201")
    func pingThenClose() {
        let machine = Machine()
        #expect(machine.hub.sweepTick(at: machine.now, in: &machine.state).expired.isEmpty)
        #expect(machine.actions().isEmpty)
        machine.advance(.seconds(30))
        #expect(machine.hub.sweepTick(at: machine.now, in: &machine.state).expired.isEmpty)
        #expect(machine.actions() == ["send bird:ping"])
        machine.advance(.seconds(29))
        #expect(machine.hub.sweepTick(at: machine.now, in: &machine.state).expired.isEmpty)
        #expect(machine.actions().isEmpty)
        machine.advance(.seconds(1))
        let expired = machine.hub.sweepTick(at: machine.now, in: &machine.state).expired
        #expect(expired.map(\.socketID) == [machine.socketID] && expired.map(\.code) == [.pongNotReceived])
    }

    @Test("on a cluster, rooms the bus brought nothing of for two seconds are handed to the store's check; the store drops expired events every five seconds")
    func quietRoomsAndExpiry() throws {
        let machine = Machine(cluster: true)
        _ = try machine.joined("r", at: RoomPosition(epoch: "e1", id: 3))
        #expect(machine.hub.sweepTick(at: machine.now, in: &machine.state).quietRooms.isEmpty)
        machine.advance(.seconds(2))
        var tick = machine.hub.sweepTick(at: machine.now, in: &machine.state)
        #expect(tick.quietRooms == [RealtimeHub.QuietRoom(app: HubMachine.app.id, room: "r", cursor: RoomPosition(epoch: "e1", id: 3))])
        #expect(!tick.expireStore)
        machine.advance(.seconds(3))
        tick = machine.hub.sweepTick(at: machine.now, in: &machine.state)
        #expect(tick.expireStore)
        #expect(!machine.hub.sweepTick(at: machine.now, in: &machine.state).expireStore)
    }

    @Test("a room's member count is told once it changed; a member whose token expired without a refresh is told expired and leaves the room")
    func countAndExpiredToken() throws {
        let machine = Machine()
        _ = try machine.joined("r", at: RoomPosition(epoch: "e1", id: 0), expiresIn: 10)
        _ = machine.hub.sweepTick(at: machine.now, in: &machine.state)
        #expect(machine.actions() == ["send count"])
        _ = machine.hub.sweepTick(at: machine.now, in: &machine.state)
        #expect(machine.actions().isEmpty)
        machine.wall.advance(seconds: 11)
        _ = machine.hub.sweepTick(at: machine.now, in: &machine.state)
        #expect(machine.actions() == ["send error expired"])
        #expect(machine.state.rooms[HubMachine.app.id]?["r"] == nil)
    }
}

@Suite("A publish as a machine: the rule it is kept by, the store's requests, the kept event delivered")
struct PublishMachineTests {
    typealias Machine = HubMachine.Machine
    static let app = HubMachine.app
    static let fallback = RoomRuleRecord(rule: RoomRule(history: 100), issuedAt: 0)

    static func publish(declared: RoomRule? = nil, known: RoomRuleRecord = fallback, data: String = "{}", member: String? = nil) -> RoomPublish {
        RoomPublish(app: app, room: "r", event: "moved", data: data, from: member == nil ? nil : "ann", declared: declared, member: member,
                    known: known, seen: RoomPosition(epoch: "e1", id: 4))
    }

    @Test("the app server's publish to a room the hub knows nothing of: the store's own rule asked first, not forced; a rule the backend issued is remembered and keeps the event; none, or no answer, leaves the hub's")
    func unknownRoom() throws {
        var publish = Self.publish()
        #expect(try publish.start(now: 1_000) == .settleRule(RoomRuleRecord(rule: RoomRule(history: 100), issuedAt: 0), force: false))
        let kept = RoomRuleRecord(rule: RoomRule(history: 3), issuedAt: 900)
        #expect(publish.storeRule(kept) == kept)
        #expect(try publish.next(now: 1_000) == .append(rule: RoomRule(history: 3), seen: RoomPosition(epoch: "e1", id: 4)))
        var silent = Self.publish()
        #expect(silent.storeRule(nil) == nil)
        #expect(silent.storeRule(Self.fallback) == nil)
        #expect(try silent.next(now: 1_000) == .append(rule: RoomRule(history: 100), seen: RoomPosition(epoch: "e1", id: 4)))
    }

    @Test("a rule the app server declares is settled by force (issued now), remembered, and keeps the event; declared again in the same second, the event is appended at once")
    func declaredRule() throws {
        let declared = RoomRule(history: 7)
        let publish = Self.publish(declared: declared, known: RoomRuleRecord(rule: RoomRule(history: 100), issuedAt: 500))
        let offered = RoomRuleRecord(rule: declared, issuedAt: 1_000)
        #expect(try publish.start(now: 1_000) == .settleRule(offered, force: true))
        #expect(publish.declaredRule(offered) == .append(rule: declared, seen: RoomPosition(epoch: "e1", id: 4)))
        let again = Self.publish(declared: declared, known: offered)
        #expect(try again.start(now: 1_000) == .append(rule: declared, seen: RoomPosition(epoch: "e1", id: 4)))
        #expect(try again.start(now: 1_001) == .settleRule(RoomRuleRecord(rule: declared, issuedAt: 1_001), force: true))
    }

    @Test("the app server's data that breaks the rule is refused before the store is asked anything; a member's was checked when it arrived; a sealed rule the store kept is remembered even when the data that asked for it breaks it")
    func dataChecked() throws {
        var kept = RoomRule(history: 10)
        kept.sealed = true
        var unknown = Self.publish(data: #"{"plain":1}"#)
        #expect(unknown.storeRule(RoomRuleRecord(rule: kept, issuedAt: 900)) == RoomRuleRecord(rule: kept, issuedAt: 900))
        #expect(throws: RoomError.self) { try unknown.next(now: 1_000) }
        var sealed = RoomRule(history: 10)
        sealed.sealed = true
        let publish = Self.publish(declared: sealed, data: #"{"plain":1}"#)
        #expect(throws: RoomError.self) { try publish.start(now: 1_000) }
        let member = Self.publish(known: RoomRuleRecord(rule: sealed, issuedAt: 10), data: #"{"plain":1}"#, member: "1.1")
        #expect(try member.start(now: 1_000) == .append(rule: sealed, seen: RoomPosition(epoch: "e1", id: 4)))
    }

    @Test("a member's room_send becomes a value for its room's lane: who sends what, as which user")
    func sendOutcome() throws {
        let machine = Machine()
        _ = try machine.joined("r", at: RoomPosition(epoch: "e1", id: 0))
        let send = try RealtimeMessage(event: ProtocolNamespace.bird.event(.roomSend), payload: RoomSendRequest(room: "r", event: "moved", data: #"{"n":1}"#))
        guard case .roomSend(let job) = machine.hub.handle(send, from: machine.connection, at: machine.now, in: &machine.state) else {
            Issue.record("a send is not left for the lane: \(machine.actions())")
            return
        }
        #expect(job == RealtimeHub.RoomSendJob(socketID: machine.socketID, app: Self.app, room: "r", event: "moved", data: #"{"n":1}"#, user: "ann", namespace: .bird))
        #expect(machine.actions().isEmpty)
    }

    @Test("on one node, a kept event is delivered to the members in the same step; a send from a member that left meanwhile is refused not_joined")
    func keptAndDelivered() throws {
        let machine = Machine()
        #expect(try machine.joined("r", at: RoomPosition(epoch: "e1", id: 0)) == .done(catchUp: false))
        let publish = try machine.hub.publishStarts(app: Self.app, room: "r", event: "moved", data: "{}", from: "ann", declared: nil, member: machine.socketID,
                                                    in: machine.state)
        #expect(try publish.start(now: 1_000) == .append(rule: HubMachine.rule, seen: nil))
        machine.hub.publishKept(publish, rule: HubMachine.rule, ("e1", HubMachine.record(1)), in: &machine.state)
        #expect(machine.actions() == ["send #1"])
        machine.hub.leaveRoom("r", socketID: machine.socketID, app: Self.app.id, in: &machine.state)
        #expect(throws: RoomError.self) {
            try machine.hub.publishStarts(app: Self.app, room: "r", event: "moved", data: "{}", from: "ann", declared: nil, member: machine.socketID, in: machine.state)
        }
    }
}

@Suite("A history request as a machine: checked at its turn, the page in, the frame out")
struct HistoryMachineTests {
    typealias Machine = HubMachine.Machine

    @Test("a member's page: its turn gives the rule to read by, the page comes back as its frame, charged to the read budget; a member that left meanwhile is told not_joined")
    func page() throws {
        let machine = Machine()
        #expect(try machine.joined("r", at: RoomPosition(epoch: "e1", id: 3)) == .done(catchUp: false))
        let job = RealtimeHub.HistoryJob(socketID: machine.socketID, app: HubMachine.app.id, room: "r", request: "q1", before: nil, limit: 3, namespace: .bird)
        #expect(machine.hub.historyTurn(job, in: &machine.state) == HubMachine.rule)
        // The `joined` frame counted too.
        let left = try #require(machine.hub.readBudgetLeft(machine.connection, in: machine.state))
        let bytes = machine.hub.historyAnswered(job, .success(RoomStorePage(events: (1...3).map(HubMachine.record), more: false)), in: &machine.state)
        #expect(bytes > 0)
        #expect(machine.actions() == ["send history q1 #1 #2 #3"])
        #expect(machine.hub.readBudgetLeft(machine.connection, in: machine.state) == left - bytes)
        machine.hub.historyAnswered(job, .failure(RoomError(.storeFull, "shard down")), in: &machine.state)
        #expect(machine.actions() == ["send history q1 store_full"])
        machine.hub.leaveRoom("r", socketID: machine.socketID, app: HubMachine.app.id, in: &machine.state)
        #expect(machine.hub.historyTurn(job, in: &machine.state) == nil)
        #expect(machine.actions() == ["send history q1 not_joined"])
    }

    @Test("a member's room_history becomes a value for its room's lane; a limit out of range is refused at once")
    func historyOutcome() throws {
        let machine = Machine()
        _ = try machine.joined("r", at: RoomPosition(epoch: "e1", id: 3))
        let ask = try RealtimeMessage(event: ProtocolNamespace.bird.event(.roomHistory), payload: RoomHistoryRequest(room: "r", request: "q3", limit: 20, before: 9))
        guard case .history(let job) = machine.hub.handle(ask, from: machine.connection, at: machine.now, in: &machine.state) else {
            Issue.record("a page is not left for the lane")
            return
        }
        #expect(job == RealtimeHub.HistoryJob(socketID: machine.socketID, app: HubMachine.app.id, room: "r", request: "q3", before: 9, limit: 20, namespace: .bird))
        let tooMany = try RealtimeMessage(event: ProtocolNamespace.bird.event(.roomHistory), payload: RoomHistoryRequest(room: "r", request: "q4", limit: 101))
        guard case .handled = machine.hub.handle(tooMany, from: machine.connection, at: machine.now, in: &machine.state) else {
            Issue.record("a limit of 101 is left for the lane")
            return
        }
        #expect(machine.actions() == ["send history q4 bad_request"])
    }

    @Test("a page whose most it may cost is over what is left of the read budget this second is refused rate_limited before the store is asked")
    func readBudget() throws {
        let machine = Machine()
        _ = try machine.joined("r", at: RoomPosition(epoch: "e1", id: 3))
        let job = RealtimeHub.HistoryJob(socketID: machine.socketID, app: HubMachine.app.id, room: "r", request: "q2", before: nil, limit: 100, namespace: .bird)
        machine.state.connections[machine.socketID]?.budget.chargeRead(bytes: RealtimeHub.readBytesPerSecond - 1000, at: machine.now)
        #expect(machine.hub.historyTurn(job, in: &machine.state) == nil)
        #expect(machine.actions() == ["send history q2 rate_limited"])
        machine.advance(.seconds(1))
        #expect(machine.hub.historyTurn(job, in: &machine.state) == HubMachine.rule)
    }
}

@Suite("A presence channel opening on a cluster node as a machine: the cluster's members in, the waiting confirmations out")
struct PresenceViewMachineTests {
    typealias Machine = HubMachine.Machine

    @Test("the first subscriber's confirmation waits for the cluster's members; they come back with a change the bus brought meanwhile applied, and the confirmation lists both nodes' users")
    func viewRead() throws {
        let machine = Machine(cluster: true)
        let signer = ChannelAuthorization(key: HubMachine.app.key, secret: HubMachine.app.secret)
        let data = #"{"user_id":"ann"}"#
        let subscribe = try RealtimeMessage(event: ProtocolNamespace.bird.event(.subscribe), payload: SubscribeRequest(
            channel: "presence-x", auth: signer.authorizeSubscription(socketID: machine.socketID, channel: "presence-x", channelData: data), channelData: data))
        guard case .presenceView = machine.hub.handle(subscribe, from: machine.connection, at: machine.now, in: &machine.state) else {
            Issue.record("the cluster's members are read on the lane")
            return
        }
        // Followed first: what the bus brings from now on is kept for the view.
        #expect(machine.actions() == ["follow \(FanoutTopic.channel(app: HubMachine.app.id, channel: "presence-x"))", "presence"])
        machine.hub.deliverPresence(PresenceFanoutEvent(topic: .channel(app: HubMachine.app.id, channel: "presence-x"), user: "cy", info: nil, joined: true),
                                    in: &machine.state)
        let read = machine.hub.presenceViewRead(app: HubMachine.app, channel: "presence-x", members: [("bob", nil)], in: &machine.state)
        #expect(read.overBudget.isEmpty && !read.readAgain)
        let frames = machine.state.outbox.pending.compactMap { action -> RealtimeMessage? in
            guard case .send(_, let text) = action else { return nil }
            return try? RealtimeMessage(parsing: text)
        }
        _ = machine.actions()
        #expect(frames.map(\.event) == ["bird_internal:subscription_succeeded"])
        let ids = frames.first?.data.flatMap(StrictJSON.parse)?["presence"]?["ids"]?.array?.compactMap(\.string).sorted()
        #expect(ids == ["ann", "bob", "cy"])
    }
}

@Suite("Connections as a machine: arrivals, frames over budget, slow readers, the bus's messages")
struct ConnectionMachineTests {
    typealias Machine = HubMachine.Machine

    @Test("connections past the app's limit are refused 4100; while shutting down, 4200; an admitted one is sent connection_established")
    func admission() {
        let machine = Machine()
        for _ in 1..<HubMachine.app.maxConnections {
            guard case .accepted = machine.hub.admit(app: HubMachine.app, namespace: .bird, output: RecordingOutput(), at: machine.now, in: &machine.state) else {
                Issue.record("refused under the limit")
                return
            }
        }
        #expect(Set(machine.actions()) == ["send bird:connection_established"])
        guard case .refused(.overCapacity) = machine.hub.admit(app: HubMachine.app, namespace: .bird, output: RecordingOutput(), at: machine.now, in: &machine.state) else {
            Issue.record("one past the app's limit is admitted")
            return
        }
        machine.state.open = false
        machine.state.connections = [:]
        machine.state.connectionsByApp = [:]
        guard case .refused(.reconnectNow) = machine.hub.admit(app: HubMachine.app, namespace: .bird, output: RecordingOutput(), at: machine.now, in: &machine.state) else {
            Issue.record("admitted while shutting down")
            return
        }
        #expect(machine.actions().isEmpty)
    }

    @Test("a connection sending more bytes a second than its budget is closed 4301; the next second it may send again")
    func bytesBudget() throws {
        let machine = Machine()
        let ping = try RealtimeMessage(parsing: #"{"event":"bird:ping","data":{}}"#)
        guard case .close(.clientEventRejected, _) = machine.hub.received(ping, bytes: (1 << 20) + 1, from: machine.socketID, at: machine.now, in: &machine.state) else {
            Issue.record("a megabyte and a byte in one second is taken")
            return
        }
        machine.advance(.seconds(1))
        guard case .handled = machine.hub.received(ping, bytes: 30, from: machine.socketID, at: machine.now, in: &machine.state) else {
            Issue.record("a ping the next second is not handled")
            return
        }
        #expect(machine.actions() == ["send bird:pong"])
    }

    @Test("a connection whose queue stays over 512 KiB while the node is over its replay memory is marked, then dropped without a close frame once the deadline passed; under the budget, the marks are forgotten")
    func slowReader() {
        let machine = Machine()
        let budget = machine.hub.configurationStorage.replayMemoryBudget
        machine.output.queued.withLock { $0 = RealtimeHub.replayQueuedBytes + 1 }
        #expect(machine.hub.slowReadersDropped(queued: budget + 1, at: machine.now, in: &machine.state).isEmpty)
        #expect(machine.connection.queueFullSince == machine.now)
        machine.advance(machine.hub.configurationStorage.replayStallDeadline)
        _ = machine.hub.slowReadersDropped(queued: budget - 1, at: machine.now, in: &machine.state)
        #expect(machine.state.connections[machine.socketID]?.queueFullSince == nil)
        #expect(machine.hub.slowReadersDropped(queued: budget + 1, at: machine.now, in: &machine.state).isEmpty)
        machine.advance(machine.hub.configurationStorage.replayStallDeadline)
        #expect(machine.hub.slowReadersDropped(queued: budget + 1, at: machine.now, in: &machine.state) == [machine.socketID])
        #expect(machine.actions() == ["abort"])
        #expect(machine.state.connections.isEmpty)
    }

    @Test("on a cluster, the bus's room events are delivered in id order; a skip asks for a catch-up instead, a duplicate is dropped")
    func busRoomEvents() throws {
        let machine = Machine(cluster: true)
        _ = try machine.joined("r", at: RoomPosition(epoch: "e1", id: 2))
        func arrive(_ id: UInt64) { machine.hub.busMessage(.room(app: HubMachine.app.id, room: "r", epoch: "e1", record: HubMachine.record(id)), in: &machine.state) }
        arrive(3)
        arrive(3)
        arrive(5)
        #expect(machine.actions() == ["send #3", "catch up r"])
    }
}

@Suite("The health check's stalled shards")
struct StalledShardsTests {
    @Test("a lane that ran one request half a second names its shard only when a connection its work uses (the store's, the bus's) says it stopped answering, or none can say: a long catch-up of quick commands on a shard that answers each is no stall")
    func stalledOnlyWhenNotAnswering() {
        let running: [(shard: String, running: Duration)] = [
            ("redis://a:1", .milliseconds(600)), ("redis://b:1", .milliseconds(700)), ("redis://c:1", .milliseconds(800)), ("", .milliseconds(900)),
        ]
        // a: both answer; b: the store's connection does not; c: the store's is idle, the bus's
        // presence call waits; "": nobody can tell (SQLite, memory).
        let answering: [String: [Bool?]] = ["redis://a:1": [true, true], "redis://b:1": [false, nil], "redis://c:1": [true, false], "": [nil, nil]]
        #expect(RealtimeHub.storeShardsStalled(running) { answering[$0] ?? [] } == [
            "redis://b:1 (not answering for 0.7 s)", "redis://c:1 (not answering for 0.8 s)", "the history store (not answering for 0.9 s)",
        ])
    }
}

/// A bus no decision calls (`RealtimeFanout`): it only makes the hub a cluster's node, for
/// decisions tested on plain values. Every call records a failure.
final class UnusedFanout: RealtimeFanout {
    private func called(_ name: String) { Issue.record("the bus was called (\(name)) by a decision") }
    func start(_ receiver: any FanoutReceiver) { called("start") }
    func follow(_ topic: FanoutTopic) { called("follow") }
    func unfollow(_ topic: FanoutTopic) { called("unfollow") }
    func publish(_ event: ChannelFanoutEvent) throws(RoomStoreError) { called("publish") }
    func terminate(app: String, user: String) throws(RoomStoreError) { called("terminate") }
    func kick(app: String, room: String, user: String, reason: String?) throws(RoomStoreError) { called("kick") }
    func stop() { called("stop") }
    func presenceJoin(_ topic: FanoutTopic, user: String, info: String?, excluding: String) throws(RoomStoreError) -> Bool {
        called("presenceJoin")
        return false
    }
    func presenceLeave(_ topic: FanoutTopic, user: String, excluding: String) throws(RoomStoreError) -> Bool {
        called("presenceLeave")
        return false
    }
    func presenceMembers(_ topic: FanoutTopic, limit: Int) throws(RoomStoreError) -> [(user: String, info: String?)] {
        called("presenceMembers")
        return []
    }
    func presenceMembers(_ topics: [FanoutTopic], limit: Int) throws(RoomStoreError) -> [[(user: String, info: String?)]] {
        called("presenceMembers")
        return []
    }
    func presenceSweep(local: [FanoutTopic: [String: String?]]) throws(RoomStoreError) -> [PresenceFanoutEvent] {
        called("presenceSweep")
        return []
    }
    var presenceNeedsReconcile: Bool { false }
    func isAnswering(shard: String) -> Bool? { nil }
    func presenceSuspect(_ topic: FanoutTopic) { called("presenceSuspect") }
    func presenceReconcile(local: [FanoutTopic: [String: String?]]) throws(RoomStoreError) -> [PresenceFanoutEvent] {
        called("presenceReconcile")
        return []
    }
}
