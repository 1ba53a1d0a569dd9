import Foundation
@testable import Realtime
import RealtimeProtocol
import Testing

/// `RoomsMachine` on its own, on plain values and instants (issue 34, item 5): every transition
/// of a room's phase (`RoomTable.Phase`, whose cases carry their data), with the actions each
/// one asks for. The connection's side is two calls: `connected(generation:now:)` and
/// `disconnected()`.
@Suite("The rooms machine, phase by phase")
struct RoomsMachineTests {
    typealias Action = ConnectionStateMachine.Action
    typealias Phase = RoomTable.Phase
    typealias Attempt = RoomTable.Attempt
    typealias Join = RoomTable.Join
    typealias Membership = RoomTable.Membership

    static let start = ContinuousClock.now
    static let room = "order:1"

    var machine = RoomsMachine(configuration: ConnectionStateMachineTests.configuration)
    var ids = RequestIDs()

    init() {
        _ = machine.connected(generation: 1, now: Self.start)
    }

    var phase: Phase? { machine[Self.room]?.phase }

    // MARK: - Steps the tests take

    /// The auth batch's timer fires; the request ids asked.
    mutating func batch(at now: ContinuousClock.Instant = start + .milliseconds(10)) -> [UInt64] {
        RoomStateMachineTests.authorizations(machine.authBatchDue(now: now, ids: &ids)).map(\.request)
    }

    /// The auth route grants `room` a token of an hour for `request`.
    mutating func grant(_ request: UInt64, at now: ContinuousClock.Instant = start + .milliseconds(20)) -> [Action] {
        machine.authorized(request: request, .success(RoomStateMachineTests.answer([Self.room])), now: now, ids: &ids)
    }

    /// A frame from the server on socket `generation`.
    mutating func feed(_ text: String, generation: UInt64 = 1, at now: ContinuousClock.Instant = start + .seconds(1)) -> [Action] {
        guard let message = try? RealtimeMessage(parsing: text) else { return [] }
        return machine.frame(message, name: .roomEvent, generation: generation, now: now)
    }

    /// Joined at (e1, `id`) on socket 1, through the auth route.
    mutating func joinedRoom(id: UInt64 = 5) {
        _ = machine.join(Self.room, now: Self.start)
        _ = grant(batch()[0])
        _ = feed(RoomStateMachineTests.joined(Self.room, id: id))
    }

    static func error(_ code: String) -> String {
        RoomStateMachineTests.system(room, "error", #"{"code":"\#(code)","message":"m"}"#)
    }

    static func joins(_ actions: [Action]) -> [RoomJoinRequest] { RoomStateMachineTests.joins(actions) }

    // MARK: - Joining

    @Test("join → needs token → authorising → join sent → joined: each step its phase, the public state read from it")
    mutating func firstJoin() throws {
        let joined = machine.join(Self.room, now: Self.start)
        #expect(joined.added)
        #expect(phase == .joining(Attempt(step: .needsToken)) && machine[Self.room]?.state == .joining)
        let requests = batch()
        #expect(requests.count == 1 && phase == .joining(Attempt(step: .authorizing(request: requests[0]))))
        let sent = grant(requests[0])
        #expect(Self.joins(sent).map(\.room) == [Self.room])
        #expect(phase == .joining(Attempt(step: .sent(Join(generation: 1, from: nil)))))
        let answer = feed(RoomStateMachineTests.joined(Self.room, id: 3))
        #expect(phase == .joined(Membership(generation: 1)) && machine[Self.room]?.state == .joined)
        #expect(machine[Self.room]?.position == RoomPosition(epoch: "e1", id: 3))
        #expect(answer.contains { if case .settleRoom(Self.room, nil) = $0 { true } else { false } }, "ready() is answered")
    }

    @Test("with no socket a room with a token waits; the handshake sends its join from the saved position")
    mutating func waitsForSocket() {
        _ = machine.disconnected()
        let saved = RoomPosition(epoch: "e1", id: 40)
        _ = machine.join(Self.room, from: saved, now: Self.start)
        _ = grant(batch()[0])
        #expect(phase == .joining(Attempt(step: .waiting)), "the token arrived with no socket")
        let sent = machine.connected(generation: 2, now: Self.start + .seconds(1))
        #expect(Self.joins(sent).map(\.since) == [saved])
        #expect(phase == .joining(Attempt(step: .sent(Join(generation: 2, from: saved)))))
    }

    @Test("a drop while the join is sent: waiting, with the attempt's counts kept; a member's drop starts a new attempt that keeps its holes count")
    mutating func drops() {
        _ = machine.join(Self.room, now: Self.start)
        _ = grant(batch()[0])
        _ = feed(Self.error("rate_limited"))
        _ = machine.retryDue(Self.room, now: Self.start + .seconds(2))
        #expect(phase == .joining(Attempt(step: .sent(Join(generation: 1, from: nil)), retries: 1)))
        _ = machine.disconnected()
        #expect(phase == .joining(Attempt(step: .waiting, retries: 1)))
        _ = machine.connected(generation: 2, now: Self.start + .seconds(3))
        _ = feed(RoomStateMachineTests.joined(Self.room, id: 5), generation: 2)
        machine.table.update(Self.room) { $0.updateMembership { $0.resyncs = 2 } }
        _ = machine.disconnected()
        #expect(phase == .joining(Attempt(step: .waiting, resyncs: 2)))
    }

    @Test("rate_limited and store_full: waiting with a retry timer (1 s, 2 s …), the join again when it fires, failed after the last retry")
    mutating func refusedJoinsRetry() {
        _ = machine.join(Self.room, now: Self.start)
        _ = grant(batch()[0])
        var now = Self.start + .seconds(1)
        for retry in 0..<RoomsMachine.maxJoinRetries {
            let refused = feed(Self.error(retry.isMultiple(of: 2) ? "rate_limited" : "store_full"), at: now)
            #expect(phase == .joining(Attempt(step: .waiting, retries: retry + 1)))
            #expect(RoomStateMachineTests.scheduled(refused, .roomRetry(room: Self.room)) == now + RoomsMachine.retryDelay(afterRetries: retry))
            now += RoomsMachine.retryDelay(afterRetries: retry)
            #expect(Self.joins(machine.retryDue(Self.room, now: now)).count == 1)
        }
        _ = feed(Self.error("rate_limited"), at: now)
        #expect(phase == .failed && machine[Self.room]?.error?.code == .rateLimited)
    }

    @Test("a join's deadline: re-armed while the replay moves the position, else waiting with a retry; a failed room after the last")
    mutating func joinDeadline() {
        let saved = RoomPosition(epoch: "e1", id: 10)
        _ = machine.join(Self.room, from: saved, now: Self.start)
        _ = grant(batch()[0])
        _ = feed(RoomStateMachineTests.event(Self.room, id: 11, replayed: true))
        let moved = machine.joinTimedOut(Self.room, now: Self.start + .seconds(10))
        #expect(RoomStateMachineTests.scheduled(moved, .roomJoin(room: Self.room)) == Self.start + .seconds(20))
        #expect(phase == .joining(Attempt(step: .sent(Join(generation: 1, from: RoomPosition(epoch: "e1", id: 11))))))
        _ = machine.joinTimedOut(Self.room, now: Self.start + .seconds(20))
        #expect(phase == .joining(Attempt(step: .waiting, retries: 1)), "no progress: retried")
        machine.table.update(Self.room) { record in
            record.phase = .joining(Attempt(step: .sent(Join(generation: 1, from: record.position)), retries: RoomsMachine.maxJoinRetries))
        }
        _ = machine.joinTimedOut(Self.room, now: Self.start + .seconds(60))
        #expect(phase == .failed && machine[Self.room]?.error?.code == .timedOut)
    }

    @Test("a refused token (invalid_token while joining) is asked for once more; a second refusal fails the room")
    mutating func tokenRefusedTwice() {
        _ = machine.join(Self.room, now: Self.start)
        _ = grant(batch()[0])
        _ = feed(Self.error("invalid_token"))
        #expect(phase == .joining(Attempt(step: .waiting, tokenRefused: true)), "asked again after the 5 s between two auth requests")
        #expect(machine[Self.room]?.token == nil)
        _ = machine.retryDue(Self.room, now: Self.start + .seconds(6))
        let requests = batch(at: Self.start + .seconds(6))
        #expect(requests.count == 1 && phase == .joining(Attempt(step: .authorizing(request: requests[0]), tokenRefused: true)))
        _ = grant(requests[0], at: Self.start + .seconds(6))
        _ = feed(Self.error("bad_signature"), at: Self.start + .seconds(7))
        #expect(phase == .failed && machine[Self.room]?.error?.code == .badSignature)
    }

    @Test("a refusal that will not change (forbidden) fails a joining room; the app's join starts it again")
    mutating func refusedForGood() {
        _ = machine.join(Self.room, now: Self.start)
        _ = grant(batch()[0])
        _ = feed(Self.error("forbidden"))
        #expect(phase == .failed && machine[Self.room]?.state == .failed)
        #expect(machine.join(Self.room, now: Self.start + .seconds(10)).added == false)
        #expect(phase == .joining(Attempt(step: .needsToken)), "its token went with the failure: the join asks for a new one")
    }

    // MARK: - A member

    @Test("a hole: the member rejoins from its position, holds the later events, and the rejoin's joined makes a clean membership")
    mutating func hole() {
        joinedRoom(id: 5)
        let rejoin = feed(RoomStateMachineTests.event(Self.room, id: 8))
        #expect(Self.joins(rejoin).map(\.since) == [RoomPosition(epoch: "e1", id: 5)])
        #expect(phase == .joined(Membership(generation: 1, resyncs: 1, rejoin: .sent(Join(generation: 1, from: RoomPosition(epoch: "e1", id: 5))))))
        #expect(RoomStateMachineTests.deliveries(feed(RoomStateMachineTests.event(Self.room, id: 9))).isEmpty, "held for the rejoin's replay")
        for id in 6...9 { _ = feed(RoomStateMachineTests.event(Self.room, id: UInt64(id), replayed: true)) }
        _ = feed(RoomStateMachineTests.joined(Self.room, id: 9))
        #expect(phase == .joined(Membership(generation: 1)))
    }

    @Test("a hole with a token past its use: the rejoin waits for the renewal, which the next batch asks for, then goes out with it")
    mutating func holeNeedsToken() {
        joinedRoom(id: 5)
        let late = Self.start + .seconds(3_600)
        _ = feed(RoomStateMachineTests.event(Self.room, id: 8), at: late)
        #expect(phase == .joined(Membership(generation: 1, resyncs: 1, renewal: .needsToken, rejoin: .awaitingToken)))
        let requests = batch(at: late + .milliseconds(10))
        #expect(phase == .joined(Membership(generation: 1, resyncs: 1, renewal: .authorizing(request: requests[0]), rejoin: .awaitingToken)))
        let sent = grant(requests[0], at: late + .milliseconds(20))
        #expect(Self.joins(sent).map(\.since) == [RoomPosition(epoch: "e1", id: 5)])
        #expect(phase == .joined(Membership(generation: 1, resyncs: 1, rejoin: .sent(Join(generation: 1, from: RoomPosition(epoch: "e1", id: 5))))))
    }

    @Test("a token near its expiry: the member asks for a new one and sends it as room_refresh, still joined throughout")
    mutating func refresh() throws {
        joinedRoom(id: 5)
        let keepUntil = try #require(machine[Self.room]?.token?.keepUntil)
        _ = machine.tokenDue(Self.room, now: keepUntil)
        #expect(phase == .joined(Membership(generation: 1, renewal: .needsToken)))
        let requests = batch(at: keepUntil + .milliseconds(10))
        #expect(phase == .joined(Membership(generation: 1, renewal: .authorizing(request: requests[0]))))
        let sent = grant(requests[0], at: keepUntil + .milliseconds(20))
        #expect(RoomStateMachineTests.frames(sent, "bird:room_refresh", as: RoomRefreshRequest.self).map(\.room) == [Self.room])
        #expect(phase == .joined(Membership(generation: 1)))
    }

    @Test("a drop during a renewal: the room waits for the same answer, and joins with it on the next socket")
    mutating func dropDuringRenewal() throws {
        joinedRoom(id: 5)
        let keepUntil = try #require(machine[Self.room]?.token?.keepUntil)
        _ = machine.tokenDue(Self.room, now: keepUntil)
        let requests = batch(at: keepUntil + .milliseconds(10))
        _ = machine.disconnected()
        #expect(phase == .joining(Attempt(step: .authorizing(request: requests[0]))))
        _ = grant(requests[0], at: keepUntil + .milliseconds(20))
        #expect(phase == .joining(Attempt(step: .waiting)))
        let sent = machine.connected(generation: 2, now: keepUntil + .seconds(1))
        #expect(Self.joins(sent).map(\.since) == [RoomPosition(epoch: "e1", id: 5)])
    }

    @Test("a renewal put off by the 5 s between auth requests, then a drop: the room waits, and the next handshake joins it (it was left in no batch and no step that anything restarts)")
    mutating func renewalPutOffThenDrop() throws {
        joinedRoom(id: 5)
        // A token used up within 5 s of the last auth request: the renewal waits for its timer.
        let soon = Self.start + .seconds(2)
        machine.table.update(Self.room) { $0.token?.keepUntil = soon }
        let putOff = machine.tokenDue(Self.room, now: soon)
        #expect(RoomStateMachineTests.scheduled(putOff, .roomRetry(room: Self.room)) != nil)
        #expect(phase == .joined(Membership(generation: 1, renewal: .needsToken)))
        _ = machine.disconnected()
        #expect(phase == .joining(Attempt(step: .waiting)))
        _ = machine.connected(generation: 2, now: Self.start + .seconds(6))
        let requests = batch(at: Self.start + .seconds(6) + .milliseconds(10))
        #expect(requests.count == 1, "the handshake asked for a token")
        let sent = grant(requests[0], at: Self.start + .seconds(6) + .milliseconds(20))
        #expect(Self.joins(sent).map(\.since) == [RoomPosition(epoch: "e1", id: 5)])
    }

    @Test("the server's resync, then its rejoin refused with rate_limited again and again: each retry rejoins (not counted as a hole), and after the last the room fails; never a member the server sends nothing")
    mutating func resyncRefusedAgain() {
        joinedRoom(id: 5)
        var now = Self.start + .seconds(1)
        #expect(Self.joins(feed(Self.error("resync"), at: now)).count == 1)
        for retry in 0..<RoomsMachine.maxJoinRetries {
            _ = feed(Self.error("rate_limited"), at: now)
            now += RoomsMachine.retryDelay(afterRetries: retry)
            #expect(Self.joins(machine.retryDue(Self.room, now: now)).count == 1, "retry \(retry + 1) rejoins")
        }
        _ = feed(Self.error("rate_limited"), at: now)
        #expect(phase == .failed && machine[Self.room]?.error?.code == .rateLimited)
    }

    @Test("a member's expired token: a new attempt that has had its one refusal; resync and not_joined rejoin; other refusals leave the membership")
    mutating func memberErrors() {
        joinedRoom(id: 5)
        _ = feed(Self.error("forbidden"))
        #expect(phase == .joined(Membership(generation: 1)), "a refused send: still a member")
        let resync = feed(Self.error("resync"))
        #expect(Self.joins(resync).count == 1 && machine[Self.room]?.join != nil)
        #expect(Self.joins(feed(Self.error("resync"))).isEmpty, "one rejoin at a time")
        _ = feed(RoomStateMachineTests.joined(Self.room, id: 5))
        #expect(Self.joins(feed(Self.error("not_joined"))).count == 1)
        _ = feed(RoomStateMachineTests.joined(Self.room, id: 5))
        _ = feed(Self.error("expired"))
        #expect(phase == .joining(Attempt(step: .waiting, tokenRefused: true)) && machine[Self.room]?.state == .joining)
    }

    @Test("kicked: failed, nothing rejoins it; leave: forgotten, room_leave sent on its socket")
    mutating func kickedAndLeft() {
        joinedRoom(id: 5)
        _ = feed(RoomStateMachineTests.system(Self.room, "kicked", #"{"reason":"banned"}"#))
        #expect(phase == .failed && machine[Self.room]?.error?.code == .kicked)
        #expect(machine.connected(generation: 2, now: Self.start + .seconds(5)).isEmpty)
        var other = RoomsMachineTests()
        other.joinedRoom(id: 5)
        let left = other.machine.leave(Self.room)
        #expect(RoomStateMachineTests.frames(left, "bird:room_leave", as: RoomLeaveRequest.self).map(\.room) == [Self.room])
        #expect(other.machine[Self.room] == nil)
    }

    @Test("a gap before the replay: told once with its ids, and the joined after it tells nothing more")
    mutating func gapToldOnce() {
        _ = machine.join(Self.room, from: RoomPosition(epoch: "e1", id: 2), now: Self.start)
        _ = grant(batch()[0])
        let told = feed(RoomStateMachineTests.system(Self.room, "gap", #"{"reason":"history_span","epoch":"e1","first":3,"last":7,"before":1000}"#))
        #expect(RoomStateMachineTests.deliveries(told).map { $0.data["code"]?.string } == ["not_recovered"])
        #expect(machine[Self.room]?.join?.gapTold == true && machine[Self.room]?.position == RoomPosition(epoch: "e1", id: 7))
        let answer = feed(RoomStateMachineTests.joined(Self.room, id: 7, extra: #","recovered":false,"reason":"history_span""#))
        #expect(RoomStateMachineTests.deliveries(answer).map { $0.data["code"]?.string ?? $0.event } == ["joined"])
    }

    @Test("the connection will not come back (failed, disconnect()): joining rooms' waiters are answered, members' are not")
    mutating func settle() {
        joinedRoom(id: 5)
        _ = machine.join("order:2", now: Self.start)
        let settled = machine.settleJoining(RoomError(.disconnected, "failed"))
        #expect(settled.compactMap { if case .settleRoom(let name, _) = $0 { name } else { nil } } == ["order:2"])
    }
}
