import Foundation
@testable import Realtime
import RealtimeProtocol
import Testing

/// Rooms on `ConnectionStateMachine`, on plain values and instants (a manual clock): the
/// batching window, the token cache and its deadlines, 401/403, positions, duplicates, holes,
/// and the rejoin after each kind of drop.
@Suite("Rooms on the connection state machine")
struct RoomStateMachineTests {
    typealias Machine = ConnectionStateMachine
    typealias Action = ConnectionStateMachine.Action

    static let start = ContinuousClock.now
    static let hour: Int64 = 3_600_000
    /// The backend's clock: far from the client's on purpose (expiry is taken in its time).
    static let serverTime: Int64 = 1_000_000_000_000

    static func machine(connected: Bool = true) -> Machine {
        var machine = Machine(configuration: ConnectionStateMachineTests.configuration)
        if connected { connect(&machine, generation: 1) }
        return machine
    }

    @discardableResult
    static func connect(_ machine: inout Machine, generation: UInt64, at now: ContinuousClock.Instant = start) -> [Action] {
        _ = machine.prepareConnect()
        _ = machine.startAttempt()
        return machine.textReceived(generation: generation, text: ConnectionStateMachineTests.handshake("1.\(generation)"), now: now)
    }

    /// The `room_join` frames among `actions`, decoded.
    static func joins(_ actions: [Action]) -> [RoomJoinRequest] {
        frames(actions, "bird:room_join", as: RoomJoinRequest.self)
    }

    static func frames<T: Decodable>(_ actions: [Action], _ event: String, as type: T.Type) -> [T] {
        ConnectionStateMachineTests.sent(actions).compactMap { text in
            guard let message = try? RealtimeMessage(parsing: text), message.event == event else { return nil }
            return try? message.decodeData(T.self)
        }
    }

    static func authorizations(_ actions: [Action]) -> [(names: [String], request: UInt64)] {
        actions.compactMap { if case .authorizeRooms(let names, let request) = $0 { (names, request) } else { nil } }
    }

    static func deliveries(_ actions: [Action]) -> [RoomDelivery] {
        actions.compactMap { if case .deliverRoom(let delivery) = $0 { delivery } else { nil } }
    }

    static func scheduled(_ actions: [Action], _ id: Machine.TimerID) -> ContinuousClock.Instant? {
        actions.lazy.compactMap { if case .schedule(id, let at) = $0 { at } else { nil } }.first
    }

    static func answer(_ names: [String], lifetime: Int64 = hour, refused: [String: RoomErrorCode] = [:]) -> RoomAuthorizationResponse {
        var rooms: [String: RoomAuthorizationResponse.Entry] = [:]
        for name in names {
            rooms[name] = refused[name].map { .init(error: $0) } ?? .init(token: "token-\(name)", expires: serverTime + lifetime)
        }
        return RoomAuthorizationResponse(time: serverTime, rooms: rooms)
    }

    static func event(_ room: String, id: UInt64, replayed: Bool = false, name: String = "updated") -> String {
        let data = #"{"data":{"n":\#(id)},"event":"\#(name)","meta":{"at":1,"from":null,"id":\#(id)\#(replayed ? #","replayed":true"# : "")}}"#
        return RealtimeMessage(event: "bird:room_event", channel: room, data: data).text
    }

    static func system(_ room: String, _ name: String, _ data: String) -> String {
        RealtimeMessage(event: "bird:room_event", channel: room, data: #"{"data":\#(data),"event":"\#(name)"}"#).text
    }

    static func joined(_ room: String, epoch: String = "e1", id: UInt64, extra: String = "") -> String {
        system(room, "joined", #"{"count":1,"epoch":"\#(epoch)","id":\#(id)\#(extra)}"#)
    }

    /// A machine with `room` joined at position (e1, `id`), its token from an answer at `start`.
    static func joinedMachine(_ room: String = "order:1", id: UInt64 = 5) -> Machine {
        var machine = machine()
        _ = machine.joinRoom(room, now: start)
        let batch = machine.timerFired(.roomAuthBatch, now: start + .milliseconds(10))
        let request = authorizations(batch)[0].request
        _ = machine.roomsAuthorized(request: request, .success(answer([room])), now: start + .milliseconds(20))
        _ = machine.textReceived(generation: 1, text: joined(room, id: id), now: start + .milliseconds(30))
        return machine
    }

    // MARK: - Batching

    @Test("rooms joined within the batching window go into one auth request; 100 rooms (the most a client joins) into one")
    func batching() throws {
        var machine = Self.machine()
        var first: [Action] = []
        for index in 0..<40 {
            first += machine.joinRoom("order:\(index)", now: Self.start + .microseconds(index * 100)).actions
        }
        #expect(Self.scheduled(first, .roomAuthBatch) == Self.start + .milliseconds(10), "the window starts with the first join")
        #expect(first.filter { if case .schedule(.roomAuthBatch, _) = $0 { true } else { false } }.count == 1)
        #expect(Self.authorizations(first).isEmpty, "nothing is asked before the window closes")
        let due = machine.timerFired(.roomAuthBatch, now: Self.start + .milliseconds(10))
        let requests = Self.authorizations(due)
        #expect(requests.count == 1)
        #expect(requests.first?.names == (0..<40).map { "order:\($0)" })

        var big = Self.machine()
        for index in 0..<RoomTable.maxRooms { _ = big.joinRoom("r:\(index)", now: Self.start) }
        let all = Self.authorizations(big.timerFired(.roomAuthBatch, now: Self.start + .milliseconds(10)))
        #expect(all.map(\.names.count) == [RoomAuthorizationRequest.maxRooms])
    }

    @Test("a join made after the window closed starts a new batch; the same room joined twice is asked once")
    func secondBatch() {
        var machine = Self.machine()
        _ = machine.joinRoom("a", now: Self.start)
        #expect(machine.joinRoom("a", now: Self.start).actions.isEmpty)
        _ = machine.timerFired(.roomAuthBatch, now: Self.start + .milliseconds(10))
        let later = machine.joinRoom("b", now: Self.start + .milliseconds(50)).actions
        #expect(Self.scheduled(later, .roomAuthBatch) == Self.start + .milliseconds(60))
        #expect(Self.authorizations(machine.timerFired(.roomAuthBatch, now: Self.start + .milliseconds(60))).map(\.names) == [["b"]])
    }

    @Test("each room's answer stands alone: a forbidden room fails, the others join")
    func perRoomRefusal() {
        var machine = Self.machine()
        for name in ["a", "b", "c"] { _ = machine.joinRoom(name, now: Self.start) }
        let request = Self.authorizations(machine.timerFired(.roomAuthBatch, now: Self.start + .milliseconds(10)))[0].request
        let actions = machine.roomsAuthorized(request: request, .success(Self.answer(["a", "b", "c"], refused: ["b": .forbidden])), now: Self.start)
        #expect(Self.joins(actions).map(\.room) == ["a", "c"])
        #expect(machine.rooms["b"]?.state == .failed && machine.rooms["b"]?.error?.code == .forbidden)
        #expect(Self.deliveries(actions).map { "\($0.room) \($0.event) \($0.data["code"]?.string ?? "")" } == ["b error forbidden"])
        #expect(machine.rooms["a"]?.state == .joining)
    }

    // MARK: - Tokens

    @Test("a token is kept until 10 minutes before it expires in the server's time: a reconnect before that sends no auth request, one after asks again")
    func tokenCache() throws {
        var machine = Self.joinedMachine()
        let received = Self.start + .milliseconds(20)
        let keepUntil = try #require(machine.rooms["order:1"]?.token?.keepUntil)
        #expect(keepUntil == received + .seconds(3000), "one hour minus 10 minutes, whatever the client's clock reads")

        // Drop, reconnect 40 minutes later: the cached token rejoins, from the position.
        _ = machine.socketClosed(generation: 1, code: 1006, reason: "")
        #expect(machine.rooms["order:1"]?.state == .joining)
        let back = Self.connect(&machine, generation: 2, at: received + .seconds(2400))
        #expect(Self.authorizations(back).isEmpty)
        #expect(Self.scheduled(back, .roomAuthBatch) == nil, "no auth request for a room with a valid token")
        #expect(Self.joins(back).map(\.token) == ["token-order:1"])
        #expect(Self.joins(back).first?.since == RoomPosition(epoch: "e1", id: 5))

        // Drop again; back after keepUntil: the token is never sent, a new one is asked for.
        _ = machine.socketClosed(generation: 2, code: 1006, reason: "")
        let late = Self.connect(&machine, generation: 3, at: keepUntil)
        #expect(Self.joins(late).isEmpty, "a token at its keepUntil is not sent")
        #expect(Self.scheduled(late, .roomAuthBatch) != nil)
        let request = Self.authorizations(machine.timerFired(.roomAuthBatch, now: keepUntil + .milliseconds(10)))[0].request
        let rejoin = machine.roomsAuthorized(request: request, .success(Self.answer(["order:1"])), now: keepUntil + .milliseconds(20))
        #expect(Self.joins(rejoin).first?.since == RoomPosition(epoch: "e1", id: 5), "the position outlives the token")
    }

    @Test("a token shorter-lived than 20 minutes is kept for half its life")
    func shortToken() {
        let token = RoomToken(value: "t", key: nil, expires: Self.serverTime + 60_000, time: Self.serverTime, now: Self.start)
        #expect(token.keepUntil == Self.start + .seconds(30))
        let expired = RoomToken(value: "t", key: nil, expires: Self.serverTime - 1, time: Self.serverTime, now: Self.start)
        #expect(!expired.isUsable(at: Self.start))
    }

    @Test("while joined, the token is refreshed at its deadline with room_refresh, with no rejoin")
    func refresh() throws {
        var machine = Self.joinedMachine()
        let keepUntil = try #require(machine.rooms["order:1"]?.token?.keepUntil)
        #expect(machine.timerFired(.roomToken(room: "order:1"), now: keepUntil - .seconds(1)).isEmpty, "an early timer does nothing")
        let due = machine.timerFired(.roomToken(room: "order:1"), now: keepUntil)
        #expect(Self.scheduled(due, .roomAuthBatch) != nil)
        let request = Self.authorizations(machine.timerFired(.roomAuthBatch, now: keepUntil + .milliseconds(10)))[0].request
        let answer = RoomAuthorizationResponse(time: Self.serverTime + 3_000_000, rooms: ["order:1": .init(token: "fresh", expires: Self.serverTime + 3_000_000 + Self.hour)])
        let actions = machine.roomsAuthorized(request: request, .success(answer), now: keepUntil + .milliseconds(20))
        #expect(Self.frames(actions, "bird:room_refresh", as: RoomRefreshRequest.self) == [RoomRefreshRequest(room: "order:1", token: "fresh")])
        #expect(Self.joins(actions).isEmpty)
        #expect(machine.rooms["order:1"]?.state == .joined)
    }

    @Test("a 401 is asked once more, then the rooms fail unauthorized; a 403 fails them at once")
    func unauthorizedAndForbidden() {
        var machine = Self.machine()
        _ = machine.joinRoom("a", now: Self.start)
        let first = Self.authorizations(machine.timerFired(.roomAuthBatch, now: Self.start + .milliseconds(10)))[0].request
        let retry = machine.roomsAuthorized(request: first, .failure(.httpStatus(401, body: "no session")), now: Self.start)
        let second = Self.authorizations(retry)
        #expect(second.map(\.names) == [["a"]], "asked again at once")
        let end = machine.roomsAuthorized(request: second[0].request, .failure(.httpStatus(401, body: "no session")), now: Self.start)
        #expect(Self.authorizations(end).isEmpty)
        #expect(machine.rooms["a"]?.state == .failed && machine.rooms["a"]?.error?.code == .unauthorized)

        var refused = Self.machine()
        _ = refused.joinRoom("b", now: Self.start)
        let request = Self.authorizations(refused.timerFired(.roomAuthBatch, now: Self.start + .milliseconds(10)))[0].request
        let actions = refused.roomsAuthorized(request: request, .failure(.httpStatus(403, body: "")), now: Self.start)
        #expect(Self.authorizations(actions).isEmpty)
        #expect(refused.rooms["b"]?.error?.code == .forbidden)
        // A failed room is not rejoined by a reconnect.
        _ = refused.socketClosed(generation: 1, code: 1006, reason: "")
        let back = Self.connect(&refused, generation: 2)
        #expect(Self.joins(back).isEmpty && Self.scheduled(back, .roomAuthBatch) == nil)
    }

    @Test("a failing auth route is retried with backoff 1, 2, 4, 8 s and then the rooms fail: never without end; a 404 fails at once")
    func transientFailures() {
        var machine = Self.machine()
        _ = machine.joinRoom("a", now: Self.start)
        var request = Self.authorizations(machine.timerFired(.roomAuthBatch, now: Self.start))[0].request
        var now = Self.start
        var delays: [Duration] = []
        for _ in 0..<10 {
            let actions = machine.roomsAuthorized(request: request, .failure(.httpStatus(503, body: "")), now: now)
            guard let retry = actions.lazy.compactMap({ action -> (UInt64, ContinuousClock.Instant)? in
                if case .schedule(.roomAuthRetry(let id), let at) = action { (id, at) } else { nil }
            }).first else { break }
            delays.append(retry.1 - now)
            now = retry.1
            let again = Self.authorizations(machine.timerFired(.roomAuthRetry(request: retry.0), now: now))
            #expect(again.map(\.names) == [["a"]])
            request = retry.0
        }
        #expect(delays == [.seconds(1), .seconds(2), .seconds(4), .seconds(8)])
        #expect(machine.rooms["a"]?.state == .failed && machine.rooms["a"]?.error?.code == .authFailed)

        // A 404 (a wrong route) is not asked again.
        var wrong = Self.machine()
        _ = wrong.joinRoom("b", now: Self.start)
        let first = Self.authorizations(wrong.timerFired(.roomAuthBatch, now: Self.start))[0].request
        let answered = wrong.roomsAuthorized(request: first, .failure(.httpStatus(404, body: "not found")), now: Self.start)
        #expect(Self.authorizations(answered).isEmpty && Self.scheduled(answered, .roomAuthRetry(request: first + 1)) == nil)
        #expect(wrong.rooms["b"]?.error?.code == .authFailed && wrong.rooms["b"]?.error?.message.contains("404") == true)
    }

    @Test("a public grant joins a matching room with no auth request")
    func grants() {
        var machine = Machine(configuration: ConnectionStateMachineTests.configuration)
        machine.setRoomGrants(RoomConfiguration(time: Self.serverTime, grants: [.init(pattern: "news:{topic}", token: "grant", expires: Self.serverTime + 24 * Self.hour)]), now: Self.start)
        _ = machine.joinRoom("news:sport", now: Self.start)
        _ = machine.joinRoom("order:1", now: Self.start)
        let actions = Self.connect(&machine, generation: 1)
        #expect(Self.joins(actions).map { "\($0.room) \($0.token)" } == ["news:sport grant"])
        #expect(Self.authorizations(machine.timerFired(.roomAuthBatch, now: Self.start + .milliseconds(10))).map(\.names) == [["order:1"]])
    }

    @Test("an expired refusal asks for one new token and rejoins from the position; a second one is final")
    func expiredToken() {
        var machine = Self.joinedMachine()
        let refusal = machine.textReceived(generation: 1, text: Self.system("order:1", "error", #"{"code":"expired","message":"the token expired"}"#), now: Self.start + .seconds(1))
        #expect(machine.rooms["order:1"]?.state == .joining && machine.rooms["order:1"]?.token == nil)
        #expect(Self.deliveries(refusal).map(\.event) == ["error"])
        // The last auth request was at +10 ms: the next may go 5 s later.
        #expect(Self.scheduled(refusal, .roomRetry(room: "order:1")) == Self.start + .milliseconds(10) + .seconds(5))
        _ = machine.timerFired(.roomRetry(room: "order:1"), now: Self.start + .seconds(6))
        let request = Self.authorizations(machine.timerFired(.roomAuthBatch, now: Self.start + .seconds(6))).first?.request ?? 0
        let rejoin = machine.roomsAuthorized(request: request, .success(Self.answer(["order:1"])), now: Self.start + .seconds(6))
        #expect(Self.joins(rejoin).first?.since == RoomPosition(epoch: "e1", id: 5))
        _ = machine.textReceived(generation: 1, text: Self.system("order:1", "error", #"{"code":"expired","message":"again"}"#), now: Self.start + .seconds(7))
        #expect(machine.rooms["order:1"]?.state == .failed && machine.rooms["order:1"]?.error?.code == .expired)
    }

    // MARK: - Positions

    @Test("events advance the position before delivery; a duplicate id is dropped; a hole rejoins from the position and the replay fills it")
    func positionsAndHoles() {
        var machine = Self.joinedMachine(id: 5)
        var delivered: [UInt64] = []
        func feed(_ text: String) -> [Action] {
            let actions = machine.textReceived(generation: 1, text: text, now: Self.start + .seconds(1))
            delivered += Self.deliveries(actions).filter { $0.meta.isKept }.map(\.meta.id)
            return actions
        }
        _ = feed(Self.event("order:1", id: 6))
        #expect(machine.rooms["order:1"]?.position == RoomPosition(epoch: "e1", id: 6))
        _ = feed(Self.event("order:1", id: 6))
        _ = feed(Self.event("order:1", id: 4))
        #expect(delivered == [6], "duplicates are dropped by id")
        let hole = feed(Self.event("order:1", id: 8))
        #expect(Self.joins(hole).map(\.since) == [RoomPosition(epoch: "e1", id: 6)], "a hole: rejoin from the position")
        #expect(Self.joins(feed(Self.event("order:1", id: 9))).isEmpty, "one rejoin at a time")
        for id in 7...9 { _ = feed(Self.event("order:1", id: UInt64(id), replayed: true)) }
        let done = feed(Self.joined("order:1", id: 9, extra: #","recovered":true"#))
        _ = feed(Self.event("order:1", id: 10))
        #expect(delivered == [6, 7, 8, 9, 10], "every id once, in order")
        #expect(Self.deliveries(done).map(\.event) == ["joined"])
        #expect(machine.rooms["order:1"]?.phase == .joined(RoomTable.Membership(generation: 1)), "a clean membership: no rejoin, no hole counted")
    }

    @Test("after a drop the room rejoins from its position on the next socket; events of the old socket are ignored")
    func rejoinAfterDrop() {
        var machine = Self.joinedMachine(id: 5)
        _ = machine.textReceived(generation: 1, text: Self.event("order:1", id: 6), now: Self.start)
        _ = machine.socketClosed(generation: 1, code: 1006, reason: "")
        #expect(Self.deliveries(machine.textReceived(generation: 1, text: Self.event("order:1", id: 7), now: Self.start)).isEmpty)
        let back = Self.connect(&machine, generation: 2, at: Self.start + .seconds(5))
        #expect(Self.joins(back).map(\.since) == [RoomPosition(epoch: "e1", id: 6)])
        var ids: [UInt64] = []
        for id in 7...9 {
            ids += Self.deliveries(machine.textReceived(generation: 2, text: Self.event("order:1", id: UInt64(id), replayed: true), now: Self.start)).map(\.meta.id)
        }
        let settled = machine.textReceived(generation: 2, text: Self.joined("order:1", id: 9, extra: #","recovered":true"#), now: Self.start)
        #expect(ids == [7, 8, 9])
        #expect(settled.contains { if case .settleRoom("order:1", nil) = $0 { true } else { false } })
        #expect(machine.rooms["order:1"]?.state == .joined)
    }

    /// `joinedMachine` at (e1, 10), dropped and reconnected: its rejoin from the position is in flight.
    static func rejoiningMachine() -> Machine {
        var machine = Self.joinedMachine(id: 10)
        _ = machine.socketClosed(generation: 1, code: 1006, reason: "")
        _ = Self.connect(&machine, generation: 2, at: Self.start + .seconds(5))
        return machine
    }

    @Test("a gap must start at the position (the next id, or after the lost position in a new epoch); one that does not, or comes with no rejoin asked, is reported and ignored")
    func gapChecked() {
        var joined = Self.joinedMachine(id: 10)
        let unasked = joined.textReceived(generation: 1, text: Self.system("order:1", "gap", #"{"reason":"expired","epoch":"e1","first":11,"last":90}"#), now: Self.start)
        #expect(unasked.contains { if case .report = $0 { true } else { false } })
        #expect(joined.rooms["order:1"]?.position == RoomPosition(epoch: "e1", id: 10))
        var machine = Self.rejoiningMachine()
        for data in [#"{"reason":"expired","epoch":"e1","first":3,"last":5}"#, #"{"reason":"expired","epoch":"e1","first":12,"last":20}"#,
                     #"{"reason":"expired","epoch":"e1","first":12}"#, #"{"reason":"expired","epoch":"e1","before":1.5,"first":11,"last":12}"#,
                     #"{"reason":"epoch_changed","epoch":"e2","first":5,"last":9,"previous":{"epoch":"e1","id":10}}"#,
                     #"{"reason":"epoch_changed","epoch":"e2","previous":{"epoch":"e1","id":9}}"#, #"{"reason":"epoch_changed","epoch":"e2"}"#] {
            let actions = machine.textReceived(generation: 2, text: Self.system("order:1", "gap", data), now: Self.start + .seconds(5))
            #expect(actions.contains { if case .report = $0 { true } else { false } }, "\(data)")
            #expect(Self.deliveries(actions).isEmpty, "\(data)")
        }
        #expect(machine.rooms["order:1"]?.position == RoomPosition(epoch: "e1", id: 10))
        #expect(machine.rooms["order:1"]?.error == nil)
    }

    @Test("after a gap, a joined past where the replay reached is a hole: rejoined from the position, never a silent skip")
    func holeAfterGap() {
        var machine = Self.rejoiningMachine()
        let now = Self.start + .seconds(5)
        let told = machine.textReceived(generation: 2, text: Self.system("order:1", "gap", #"{"reason":"expired","epoch":"e1","first":11,"last":14}"#), now: now)
        #expect(Self.deliveries(told).map { $0.event } == ["error"])
        #expect(machine.rooms["order:1"]?.position == RoomPosition(epoch: "e1", id: 14))
        _ = machine.textReceived(generation: 2, text: Self.event("order:1", id: 15, replayed: true), now: now)
        let short = machine.textReceived(generation: 2, text: Self.joined("order:1", id: 20, extra: #","recovered":false,"reason":"expired""#), now: now)
        #expect(Self.joins(short).map(\.since) == [RoomPosition(epoch: "e1", id: 15)], "rejoined from 15")
        #expect(!Self.deliveries(short).contains { $0.event == "error" }, "the hole is not a loss yet")
        // A replay that reaches the position: joined, nothing told twice.
        var whole = Self.rejoiningMachine()
        _ = whole.textReceived(generation: 2, text: Self.system("order:1", "gap", #"{"reason":"expired","epoch":"e1","first":11,"last":14}"#), now: now)
        _ = whole.textReceived(generation: 2, text: Self.event("order:1", id: 15, replayed: true), now: now)
        let done = whole.textReceived(generation: 2, text: Self.joined("order:1", id: 15, extra: #","recovered":false,"reason":"expired""#), now: now)
        #expect(Self.deliveries(done).map { $0.event } == ["joined"])
        #expect(whole.rooms["order:1"]?.error?.gap?.missing == 11...14)
    }

    @Test("resync (a cluster node's stream changed): one rejoin from the position, even after the holes' budget is spent; not a second while one is on its way")
    func resyncError() {
        var machine = Self.joinedMachine(id: 5)
        func feed(_ text: String) -> [Action] { machine.textReceived(generation: 1, text: text, now: Self.start + .seconds(1)) }
        // Three holes in a row spend the budget for rejoins.
        machine.rooms.table.update("order:1") { $0.updateMembership { $0.resyncs = RoomsMachine.maxResyncs } }
        let resync = Self.system("order:1", "error", #"{"code":"resync","message":"the room's history was lost"}"#)
        let first = feed(resync)
        #expect(Self.joins(first).map(\.since) == [RoomPosition(epoch: "e1", id: 5)])
        #expect(Self.deliveries(first).map { $0.data["code"]?.string } == ["resync"], "the app hears it")
        #expect(Self.joins(feed(resync)).isEmpty, "one rejoin at a time")
        let answered = feed(Self.joined("order:1", epoch: "e2", id: 2, extra: #","recovered":false,"reason":"epoch_changed""#))
        #expect(Self.deliveries(answered).map { $0.data["code"]?.string ?? $0.event } == ["joined", "not_recovered"])
        #expect(machine.rooms["order:1"]?.position == RoomPosition(epoch: "e2", id: 2))
    }

    @Test("a rejoin the server cannot recover tells the room (not_recovered with the reason) and takes the room's position")
    func notRecovered() {
        var machine = Self.joinedMachine(id: 5)
        _ = machine.socketClosed(generation: 1, code: 1006, reason: "")
        _ = Self.connect(&machine, generation: 2)
        let actions = machine.textReceived(generation: 2, text: Self.joined("order:1", epoch: "e2", id: 3, extra: #","recovered":false,"reason":"epoch_changed""#), now: Self.start)
        let told = Self.deliveries(actions).map { "\($0.event) \($0.data["code"]?.string ?? "") \($0.data["reason"]?.string ?? "")" }
        #expect(told == ["joined  epoch_changed", "error not_recovered epoch_changed"])
        #expect(machine.rooms["order:1"]?.position == RoomPosition(epoch: "e2", id: 3))
        #expect(machine.rooms["order:1"]?.state == .joined)
    }

    @Test("kicked: the room fails and is not rejoined; leave sends room_leave and forgets the room")
    func kickedAndLeave() {
        var machine = Self.joinedMachine()
        _ = machine.textReceived(generation: 1, text: Self.system("order:1", "kicked", #"{"reason":"bye"}"#), now: Self.start)
        #expect(machine.rooms["order:1"]?.state == .failed && machine.rooms["order:1"]?.error?.code == .kicked)
        _ = machine.socketClosed(generation: 1, code: 1006, reason: "")
        #expect(Self.joins(Self.connect(&machine, generation: 2)).isEmpty)

        var other = Self.joinedMachine(id: 1)
        let leave = other.leaveRoom("order:1")
        #expect(Self.frames(leave, "bird:room_leave", as: RoomLeaveRequest.self) == [RoomLeaveRequest(room: "order:1")])
        #expect(other.rooms["order:1"] == nil)
        _ = other.socketClosed(generation: 1, code: 1006, reason: "")
        #expect(Self.joins(Self.connect(&other, generation: 2)).isEmpty)
    }

    @Test("presence: joined lists the members, join and leave change them, members who left while away are gone; a joined nobody asked for is ignored")
    func presence() {
        var machine = Self.machine()
        _ = machine.joinRoom("order:1", now: Self.start)
        let request = Self.authorizations(machine.timerFired(.roomAuthBatch, now: Self.start + .milliseconds(10)))[0].request
        _ = machine.roomsAuthorized(request: request, .success(Self.answer(["order:1"])), now: Self.start)
        _ = machine.textReceived(generation: 1, text: Self.joined("order:1", id: 5, extra: #","members":[{"id":"ann"},{"id":"bob","info":{"name":"Bob"}}]"#), now: Self.start)
        _ = machine.textReceived(generation: 1, text: Self.system("order:1", "join", #"{"id":"cy"}"#), now: Self.start)
        _ = machine.textReceived(generation: 1, text: Self.system("order:1", "leave", #"{"id":"ann"}"#), now: Self.start)
        #expect(machine.rooms.members["order:1"]?.keys.sorted() == ["bob", "cy"])
        let unasked = machine.textReceived(generation: 1, text: Self.joined("order:1", id: 2, extra: #","members":[]"#), now: Self.start)
        #expect(machine.rooms.members["order:1"]?.keys.sorted() == ["bob", "cy"] && machine.rooms["order:1"]?.position?.id == 5,
                "an unasked joined neither moves the position back nor replaces the members")
        #expect(unasked.contains { if case .report(let error) = $0 { error.kind == .protocolViolation } else { false } })
        _ = machine.socketClosed(generation: 1, code: 1006, reason: "")
        _ = Self.connect(&machine, generation: 2)
        _ = machine.textReceived(generation: 2, text: Self.joined("order:1", id: 5, extra: #","recovered":true,"members":[{"id":"bob"}]"#), now: Self.start)
        #expect(machine.rooms.members["order:1"]?.keys.sorted() == ["bob"])
    }

    @Test("a join with no joined within the deadline is retried with backoff, then fails timed_out; an unanswered rejoin for a hole tells the room and lets events flow")
    func joinDeadlines() throws {
        var machine = Self.machine()
        _ = machine.joinRoom("order:1", now: Self.start)
        let request = Self.authorizations(machine.timerFired(.roomAuthBatch, now: Self.start))[0].request
        let sent = machine.roomsAuthorized(request: request, .success(Self.answer(["order:1"])), now: Self.start)
        let deadline = try #require(Self.scheduled(sent, .roomJoin(room: "order:1")))
        #expect(deadline == Self.start + .seconds(10))
        var now = deadline
        for _ in 0..<RoomsMachine.maxJoinRetries {
            let retry = machine.timerFired(.roomJoin(room: "order:1"), now: now)
            let at = try #require(Self.scheduled(retry, .roomRetry(room: "order:1")))
            now = at
            #expect(Self.joins(machine.timerFired(.roomRetry(room: "order:1"), now: now)).count == 1)
        }
        _ = machine.timerFired(.roomJoin(room: "order:1"), now: now + .seconds(10))
        #expect(machine.rooms["order:1"]?.state == .failed && machine.rooms["order:1"]?.error?.code == .timedOut)

        var holes = Self.joinedMachine(id: 5)
        let gap = holes.textReceived(generation: 1, text: Self.event("order:1", id: 8), now: Self.start)
        #expect(Self.joins(gap).count == 1)
        let given = holes.timerFired(.roomJoin(room: "order:1"), now: Self.start + .seconds(10))
        #expect(Self.deliveries(given).map { $0.data["code"]?.string } == ["not_recovered"])
        let flowing = holes.textReceived(generation: 1, text: Self.event("order:1", id: 9), now: Self.start + .seconds(11))
        #expect(Self.deliveries(flowing).compactMap { $0.meta.isKept ? $0.meta.id : nil } == [9], "after telling the room, events flow from the next one")
        #expect(Self.joins(flowing).isEmpty)
    }

    @Test("a rejoin whose streamed replay is still coming when its deadline passes is given more time; one that stops is retried")
    func longReplayKeepsItsJoin() throws {
        var machine = Self.joinedMachine(id: 5)
        _ = machine.socketClosed(generation: 1, code: 1006, reason: "")
        let rejoin = Self.connect(&machine, generation: 2)
        #expect(Self.joins(rejoin).map(\.since) == [RoomPosition(epoch: "e1", id: 5)])
        let deadline = try #require(Self.scheduled(rejoin, .roomJoin(room: "order:1")))
        for id in 6...400 { _ = machine.textReceived(generation: 2, text: Self.event("order:1", id: UInt64(id), replayed: true), now: deadline - .seconds(1)) }
        let moving = machine.timerFired(.roomJoin(room: "order:1"), now: deadline)
        #expect(Self.scheduled(moving, .roomJoin(room: "order:1")) == deadline + .seconds(10), "the replay moved the position: more time")
        #expect(Self.scheduled(moving, .roomRetry(room: "order:1")) == nil && Self.joins(moving).isEmpty)
        let later = machine.textReceived(generation: 2, text: Self.event("order:1", id: 401, replayed: true), now: deadline + .seconds(5))
        #expect(Self.deliveries(later).compactMap { $0.meta.isKept ? $0.meta.id : nil } == [401], "still joining: the replay is delivered")
        let stalled = machine.timerFired(.roomJoin(room: "order:1"), now: deadline + .seconds(10))
        #expect(Self.scheduled(stalled, .roomJoin(room: "order:1")) == deadline + .seconds(20))
        let stopped = machine.timerFired(.roomJoin(room: "order:1"), now: deadline + .seconds(20))
        #expect(Self.scheduled(stopped, .roomRetry(room: "order:1")) != nil, "no progress since the last deadline: retried with backoff")
    }

    @Test("a hole found while the token needs renewing rejoins with the new token (no silent stall); a room asks the auth route at most once per 5 s")
    func holeDuringRefreshAndAuthSpacing() throws {
        var machine = Self.joinedMachine(id: 5)
        let keepUntil = try #require(machine.rooms["order:1"]?.token?.keepUntil)
        let late = keepUntil + .seconds(1)
        let gap = machine.textReceived(generation: 1, text: Self.event("order:1", id: 7), now: late)
        #expect(Self.joins(gap).isEmpty && Self.scheduled(gap, .roomAuthBatch) != nil, "the token is past keeping: a new one first")
        let request = Self.authorizations(machine.timerFired(.roomAuthBatch, now: late + .milliseconds(10)))[0].request
        let answered = machine.roomsAuthorized(request: request, .success(Self.answer(["order:1"])), now: late + .milliseconds(20))
        #expect(Self.joins(answered).map(\.since) == [RoomPosition(epoch: "e1", id: 5)], "the rejoin goes out with the new token")
        #expect(Self.frames(answered, "bird:room_refresh", as: RoomRefreshRequest.self).isEmpty)

        // A server that refuses each new token at once: the next auth request waits for 5 s.
        let now = late + .milliseconds(30)
        let refused = machine.textReceived(generation: 1, text: Self.system("order:1", "error", #"{"code":"expired","message":"x"}"#), now: now)
        #expect(Self.scheduled(refused, .roomAuthBatch) == nil)
        #expect(Self.scheduled(refused, .roomRetry(room: "order:1")) == late + .milliseconds(10) + .seconds(5))
    }

    @Test("history: sent only while joined, answered by request id, failed with disconnected when the socket drops")
    func history() {
        var machine = Self.joinedMachine()
        let actions = machine.requestHistory("order:1", before: 5, limit: 2, request: 900, now: Self.start)
        #expect(Self.frames(actions, "bird:room_history", as: RoomHistoryRequest.self) == [RoomHistoryRequest(room: "order:1", request: "h900", limit: 2, before: 5)])
        let page = RealtimeMessage(event: "bird:room_history", channel: "order:1",
                                   data: #"{"events":[{"data":{"n":3},"event":"updated","meta":{"at":7,"from":"ann","id":3}},{"data":{"n":4},"event":"updated","meta":{"at":8,"from":null,"id":4}}],"more":true,"request":"h900"}"#).text
        let answered = machine.textReceived(generation: 1, text: page, now: Self.start)
        let result = answered.compactMap { if case .finishHistory(900, let result) = $0 { result } else { nil } }.first
        let events = (try? result?.get())?.events
        #expect(events?.map(\.meta.id) == [3, 4] && events?.first?.meta.from == "ann" && (try? result?.get())?.more == true)

        _ = machine.requestHistory("order:1", before: nil, limit: 50, request: 901, now: Self.start)
        let dropped = machine.socketClosed(generation: 1, code: 1006, reason: "")
        #expect(dropped.contains { if case .finishHistory(901, .failure(let error)) = $0 { error.code == .disconnected } else { false } })
        #expect(machine.requestHistory("order:1", before: nil, limit: 101, request: 902, now: Self.start).contains {
            if case .finishHistory(902, .failure(let error)) = $0 { error.code == .badRequest } else { false }
        })
    }

    @Test("bounds a hostile server cannot move: 100 rooms, members listed, token lifetimes that overflow")
    func bounds() {
        var machine = Self.machine()
        for index in 0..<RoomTable.maxRooms { _ = machine.joinRoom("r:\(index)", now: Self.start) }
        let over = machine.joinRoom("r:extra", now: Self.start).actions
        #expect(machine.rooms["r:extra"]?.state == .failed && machine.rooms["r:extra"]?.error?.code == .tooManyRooms)
        #expect(over.contains { if case .settleRoom("r:extra", let error?) = $0 { error.code == .tooManyRooms } else { false } })

        var presence = Self.joinedMachine()
        for index in 0..<(RoomsMachine.maxRoomMembers + 5) {
            _ = presence.textReceived(generation: 1, text: Self.system("order:1", "join", #"{"id":"u\#(index)"}"#), now: Self.start)
        }
        #expect(presence.rooms.members["order:1"]?.count == RoomsMachine.maxRoomMembers)

        let far = RoomToken(value: "t", key: nil, expires: .max, time: .min, now: Self.start)
        #expect(far.keepUntil == Self.start + .milliseconds(RoomToken.longestLife) - RoomToken.margin)
        let backwards = RoomToken(value: "t", key: nil, expires: .min, time: .max, now: Self.start)
        #expect(!backwards.isUsable(at: Self.start))
    }
}
