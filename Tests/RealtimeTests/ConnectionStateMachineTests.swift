@testable import Realtime
import RealtimeProtocol
import Reconnect
import Testing

/// `ConnectionStateMachine` on plain values: events in, actions out, no sockets, no clocks.
@Suite("Connection state machine")
struct ConnectionStateMachineTests {
    typealias Machine = ConnectionStateMachine
    typealias Action = ConnectionStateMachine.Action

    static let start = ContinuousClock.now
    static let configuration = Machine.Configuration(
        namespace: .bird, activityTimeout: .seconds(120), pongTimeout: .seconds(30),
        pathChangePongTimeout: .seconds(1), authTimeout: .seconds(10))

    static func handshake(_ socketID: String = "1.2", activityTimeout: Int? = nil) -> String {
        let data = activityTimeout.map { #"{\"socket_id\":\"\#(socketID)\",\"activity_timeout\":\#($0)}"# } ?? #"{\"socket_id\":\"\#(socketID)\"}"#
        return #"{"event":"bird:connection_established","data":"\#(data)"}"#
    }

    /// A machine connected on generation 1.
    static func connected(channels: [String] = [], activityTimeout: Int? = nil) -> Machine {
        var machine = Machine(configuration: configuration)
        for name in channels { _ = machine.subscribe(name, now: start) }
        _ = machine.prepareConnect()
        _ = machine.startAttempt()
        _ = machine.textReceived(generation: 1, text: handshake(activityTimeout: activityTimeout), now: start)
        return machine
    }

    static func sent(_ actions: [Action]) -> [String] {
        actions.compactMap { if case .send(let text, _) = $0 { text } else { nil } }
    }

    static func streamEvents(_ actions: [Action]) -> [String] {
        actions.compactMap { action -> String? in
            guard case .stream(let event) = action else { return nil }
            switch event {
            case .willConnect: return "willConnect"
            case .opened: return "opened"
            case .ready: return "ready"
            case .toldToDisconnect: return "toldToDisconnect"
            case .refused: return "refused"
            case .disconnected(_, let retry): return retry == .immediately ? "disconnected(now)" : "disconnected(policy)"
            }
        }
    }

    @Test("an attempt opens a socket for a new generation; the handshake connects with the socket id set first", arguments: [nil, 30])
    func handshake(activityTimeout: Int?) {
        var machine = Machine(configuration: Self.configuration)
        #expect(machine.prepareConnect().start)
        let attempt = machine.startAttempt()
        #expect(Self.streamEvents(attempt) == ["willConnect"])
        #expect(attempt.contains { if case .open(generation: 1) = $0 { true } else { false } })
        #expect(machine.state == .connecting && machine.connectionId == nil)
        let actions = machine.textReceived(generation: 1, text: Self.handshake(activityTimeout: activityTimeout), now: Self.start)
        #expect(machine.state == .connected && machine.connectionId == "1.2")
        #expect(machine.activityTimeout == .seconds(activityTimeout ?? 120))
        #expect(Self.streamEvents(actions) == ["opened", "ready"])
        #expect(actions.contains { if case .schedule(.activityCheck(generation: 1), let at) = $0 { at == Self.start + .seconds(activityTimeout ?? 120) } else { false } })
    }

    @Test("close code → next state and what the reconnector is told", arguments: [
        (1000, ConnectionState.unavailable, ["disconnected(policy)"]),
        (1006, .unavailable, ["disconnected(policy)"]),
        (3999, .unavailable, ["disconnected(policy)"]),
        (4000, .failed, ["refused", "disconnected(policy)"]),
        (4009, .failed, ["refused", "disconnected(policy)"]),
        (4099, .failed, ["refused", "disconnected(policy)"]),
        (4100, .unavailable, ["disconnected(policy)"]),
        (4199, .unavailable, ["disconnected(policy)"]),
        (4200, .connecting, ["disconnected(now)"]),
        (4201, .connecting, ["disconnected(now)"]),
        (4299, .connecting, ["disconnected(now)"]),
        (4300, .unavailable, ["disconnected(policy)"]),
    ] as [(UInt16, ConnectionState, [String])])
    func closeCodes(code: UInt16, next: ConnectionState, told: [String]) {
        var machine = Self.connected()
        let actions = machine.socketClosed(generation: 1, code: code, reason: "")
        #expect(machine.state == next)
        #expect(Self.streamEvents(actions) == told)
        #expect(machine.connectionId == nil)
        #expect(actions.contains { if case .forget(generation: 1) = $0 { true } else { false } })
        #expect(actions.contains { if case .cancel(.activityCheck(generation: 1)) = $0 { true } else { false } })
        guard case .report(let error)? = actions.first else { Issue.record("no report first"); return }
        #expect(error.code == Int(code))
    }

    @Test("events of an older socket are ignored once a newer one exists")
    func staleGenerations() {
        var machine = Self.connected()
        _ = machine.startAttempt()   // generation 2
        #expect(machine.textReceived(generation: 1, text: Self.handshake(), now: Self.start).isEmpty)
        #expect(machine.socketClosed(generation: 1, code: 4009, reason: "").isEmpty)
        #expect(machine.socketFailed(generation: 1, message: "x").isEmpty)
        #expect(machine.timerFired(.activityCheck(generation: 1), now: Self.start + .seconds(500)).isEmpty)
        #expect(machine.timerFired(.pongDeadline(generation: 1, sequence: 1), now: Self.start + .seconds(500)).isEmpty)
        #expect(machine.state == .connecting)
        _ = machine.textReceived(generation: 2, text: Self.handshake("3.4"), now: Self.start)
        #expect(machine.connectionId == "3.4")
    }

    @Test("every handshake resubscribes every channel in order; private ones are authorised for the new id")
    func resubscription() {
        var machine = Self.connected(channels: ["news", "private-a", "prices"])
        _ = machine.socketClosed(generation: 1, code: 1006, reason: "")
        _ = machine.startAttempt()
        let actions = machine.textReceived(generation: 2, text: Self.handshake("9.9"), now: Self.start)
        let subscribed = Self.sent(actions).compactMap { try? RealtimeMessage(parsing: $0).decodeData(SubscribeRequest.self).channel }
        #expect(subscribed == ["news", "prices"])
        let authorized = actions.compactMap { if case .authorize(let request, _) = $0 { request } else { nil } }
        #expect(authorized.map(\.socketID) == ["9.9"] && authorized.map(\.channelName) == ["private-a"])
    }

    @Test("an authorisation answered for an older connection id is discarded; the current one subscribes")
    func authorizationForOldConnection() {
        var machine = Self.connected(channels: ["private-a"])
        let first = machine.channels.subscribeOrAuthorize("private-a", now: Self.start, ids: &machine.requestIDs)
        guard case .authorize(_, let old)? = first.last else { Issue.record("no authorize"); return }
        _ = machine.socketClosed(generation: 1, code: 4201, reason: "")
        _ = machine.startAttempt()
        let actions = machine.textReceived(generation: 2, text: Self.handshake("5.6"), now: Self.start)
        guard let current = actions.compactMap({ if case .authorize(_, let id) = $0 { id } else { nil } }).first else { Issue.record("no new authorize"); return }
        let answer = ChannelAuthorizationResponse(auth: "key:sig")
        #expect(machine.authorizationAnswered(channel: "private-a", request: old, .success(answer)).isEmpty)
        let accepted = machine.authorizationAnswered(channel: "private-a", request: current, .success(answer))
        #expect(Self.sent(accepted).count == 1)
        #expect(machine.authorizationAnswered(channel: "private-a", request: current, .success(answer)).isEmpty, "answered once")
    }

    @Test("the stale check: silence for the timeout pings; no pong within 30 s closes with 4201 and retries at once; a frame ends the probe")
    func staleCheck() {
        var machine = Self.connected(activityTimeout: 30)
        // A frame 10 s in: the check at 30 s re-arms for 40 s instead of pinging.
        _ = machine.textReceived(generation: 1, text: #"{"event":"x","channel":"none"}"#, now: Self.start + .seconds(10))
        let early = machine.timerFired(.activityCheck(generation: 1), now: Self.start + .seconds(30))
        #expect(Self.sent(early).isEmpty)
        #expect(early.contains { if case .schedule(.activityCheck(generation: 1), let at) = $0 { at == Self.start + .seconds(40) } else { false } })
        let due = machine.timerFired(.activityCheck(generation: 1), now: Self.start + .seconds(40))
        #expect(Self.sent(due) == [RealtimeMessage(event: "bird:ping", data: "{}").text])
        guard case .schedule(.pongDeadline(1, let sequence), let deadline)? = due.last else { Issue.record("no pong deadline"); return }
        #expect(deadline == Self.start + .seconds(70))
        let dead = machine.timerFired(.pongDeadline(generation: 1, sequence: sequence), now: deadline)
        #expect(dead.contains { if case .close(.pongNotReceived, _, generation: 1) = $0 { true } else { false } })
        #expect(Self.streamEvents(dead) == ["disconnected(now)"])
        #expect(machine.state == .connecting)
    }

    @Test("a path change pings with the 1 s deadline; its failure backs off; an answered probe's deadline does nothing")
    func pathChange() {
        var machine = Self.connected()
        let probe = machine.verify(now: Self.start)
        guard case .schedule(.pongDeadline(1, let sequence), let deadline)? = probe.last else { Issue.record("no deadline"); return }
        #expect(deadline == Self.start + .seconds(1))
        _ = machine.textReceived(generation: 1, text: #"{"event":"bird:pong","data":"{}"}"#, now: Self.start + .milliseconds(100))
        #expect(machine.timerFired(.pongDeadline(generation: 1, sequence: sequence), now: deadline).isEmpty)
        let second = machine.verify(now: Self.start + .seconds(2))
        guard case .schedule(.pongDeadline(1, let next), _)? = second.last else { Issue.record("no deadline"); return }
        let dead = machine.timerFired(.pongDeadline(generation: 1, sequence: next), now: Self.start + .seconds(3))
        #expect(Self.streamEvents(dead) == ["disconnected(policy)"])
        #expect(machine.state == .unavailable)
    }

    @Test("disconnect closes with 1000, goes disconnected and tells the reconnector it was intentional; a later attempt opens nothing")
    func disconnect() {
        var machine = Self.connected()
        let actions = machine.disconnect()
        #expect(actions.contains { if case .close(.normalClosure, _, generation: 1) = $0 { true } else { false } })
        #expect(Self.streamEvents(actions) == ["toldToDisconnect", "disconnected(policy)"])
        #expect(machine.state == .disconnected)
        #expect(machine.startAttempt().isEmpty, "disconnect() wins over a reconnect already decided")
        #expect(machine.disconnect().isEmpty)
    }

    @Test("presence members: replaced at each subscription, each once, a repeated add not delivered; a confirmation of nothing asked is ignored")
    func presence() throws {
        var machine = Self.connected(channels: ["presence-room"])
        let ok = #"{"event":"bird_internal:subscription_succeeded","channel":"presence-room","data":"{\"presence\":{\"ids\":[\"a\",\"b\",\"a\"],\"hash\":{},\"count\":2}}"}"#
        // The authorisation is still in flight: nothing was asked on this connection yet.
        let unsolicited = machine.textReceived(generation: 1, text: ok, now: Self.start)
        #expect(machine.channels["presence-room"]?.subscribed == false)
        #expect(unsolicited.contains { if case .report(let error) = $0 { error.kind == .protocolViolation } else { false } })
        let request = try #require(machine.channels.session?.authorizations["presence-room"])
        let answer = ChannelAuthorizationResponse(auth: "k:sig", channelData: #"{"user_id":"a"}"#)
        #expect(!Self.sent(machine.authorizationAnswered(channel: "presence-room", request: request, .success(answer))).isEmpty)
        _ = machine.textReceived(generation: 1, text: ok, now: Self.start)
        #expect(machine.channels["presence-room"]?.members.list.map(\.userID) == ["a", "b"])
        #expect(machine.channels["presence-room"]?.subscribed == true)
        let added = #"{"event":"bird_internal:member_added","channel":"presence-room","data":"{\"user_id\":\"c\"}"}"#
        #expect(machine.textReceived(generation: 1, text: added, now: Self.start).contains { if case .deliver = $0 { true } else { false } })
        #expect(!machine.textReceived(generation: 1, text: added, now: Self.start).contains { if case .deliver = $0 { true } else { false } })
        _ = machine.socketClosed(generation: 1, code: 1006, reason: "")
        #expect(machine.channels["presence-room"]?.members.count == 0 && machine.channels["presence-room"]?.subscribed == false)
    }

    @Test("a handshake's activity_timeout is clamped to at least 1 s", arguments: [(1e-300, 1.0), (0.2, 1.0), (1.0, 1.0), (30.5, 30.5), (1e30, 86_400.0)])
    func activityTimeoutClamp(given: Double, used: Double) {
        var machine = Machine(configuration: Self.configuration)
        _ = machine.prepareConnect()
        _ = machine.startAttempt()
        let handshake = #"{"event":"bird:connection_established","data":"{\"socket_id\":\"1.2\",\"activity_timeout\":\#(given)}"}"#
        _ = machine.textReceived(generation: 1, text: handshake, now: Self.start)
        #expect(machine.activityTimeout == .seconds(used))
    }
}
