import Foundation
import RealtimeProtocol

/// The rooms' decisions, without I/O, beside the connection's lifecycle machine (rooms seed;
/// docs/rooms-protocol.md): joins batched into one auth request, tokens kept across reconnects
/// until 10 minutes before they expire in the server's time, rejoins from each room's position,
/// duplicates dropped by id and holes recovered, history requests.
///
/// Each room's phase is a `RoomTable.Phase` whose cases carry their data (STYLE.md). The
/// connection's machine tells it when a socket is connected and when it ended, routes the room
/// frames and timers here, and performs the actions it returns, in order; request ids come from
/// the connection's counter, so one table of requests in flight serves channels and rooms.
/// Every decision is a pure function of the events and the clock, so the manual-clock tests
/// drive it exactly.
struct RoomsMachine {
    typealias Action = ConnectionStateMachine.Action

    let configuration: ConnectionStateMachine.Configuration
    /// The rooms the app joined; their positions and tokens outlive every socket.
    var table = RoomTable()
    /// The rooms' auth and history requests.
    var requests = RoomRequests()
    /// The connected socket's generation: set by the handshake, `nil` when there is none.
    private(set) var socket: UInt64?

    init(configuration: ConnectionStateMachine.Configuration) {
        self.configuration = configuration
    }

    // MARK: - Reads

    subscript(name: String) -> RoomTable.Record? { table[name] }

    /// The rooms in join order.
    var order: [String] { table.order }

    /// Presence rooms' members by id.
    var members: [String: [String: RoomMember]] { table.members }

    // MARK: - App commands

    /// `join(name)`: a new room (or a failed one again) starts joining; a room already joining
    /// or joined is left as it is. A `position` saved by an earlier process is where a new
    /// room's first join starts.
    ///
    /// - Returns: whether the room is new to the table, and the actions.
    mutating func join(_ name: String, from position: RoomPosition? = nil, now: ContinuousClock.Instant) -> (added: Bool, actions: [Action]) {
        let full = table[name] == nil && table.count >= RoomTable.maxRooms
        let added = table.add(name)
        guard added || table[name]?.state == .failed else { return (false, []) }
        table.update(name) { record in
            if let position, record.position == nil { record.position = position }
            record.phase = .joining(RoomTable.Attempt())
            record.error = nil
        }
        guard !full else {
            return (added, fail(name, RoomError(.tooManyRooms, "a client joins at most \(RoomTable.maxRooms) rooms (the server's limit per connection)")))
        }
        guard RoomName.isValid(name) else {
            return (added, fail(name, RoomError(.invalidRoom, "not a valid room name (1…\(RoomName.maxLength) of A–Z a–z 0–9 _ - = @ , . ; :)")))
        }
        return (added, startJoin(name, now: now))
    }

    /// The connection will not come back by itself (`failed`, or `disconnect()`): every room
    /// still joining answers its `ready()` waiters with `error` (with a wrong
    /// app key `ready()` waited forever after 4001). The rooms stay joining: `connect()` joins them.
    func settleJoining(_ error: RoomError) -> [Action] {
        table.order.filter { table[$0]?.state == .joining }.map { .settleRoom($0, error) }
    }

    /// `leave(name)`: `room_leave` when joined or joining, and the room is forgotten with its
    /// position and token; waiting `ready()` and history calls end with `left`.
    mutating func leave(_ name: String) -> [Action] {
        guard let record = table[name] else { return [] }
        var actions: [Action] = [.cancel(.roomToken(room: name)), .cancel(.roomRetry(room: name)), .cancel(.roomJoin(room: name))]
        let generation: UInt64?
        switch record.phase {
        case .joined(let membership): generation = membership.generation
        case .joining, .failed: generation = record.join?.generation
        }
        if let generation, let text = try? RealtimeMessage(event: configuration.namespace.event(.roomLeave), payload: RoomLeaveRequest(room: name)).text {
            actions.append(.send(text, generation: generation))
        }
        requests.batch.removeAll { $0 == name }
        for (request, entry) in requests.history where entry.room == name {
            requests.history[request] = nil
            actions += [.cancel(.roomHistory(request: request)), .finishHistory(request, .failure(RoomError(.left, "the room was left")))]
        }
        _ = table.remove(name)
        return actions
    }

    /// `room.send(event, data)`: only while joined.
    ///
    /// - Returns: `nil` and the frame's action, or why nothing was sent.
    func send(_ name: String, event: String, data: String) -> (RoomError?, [Action]) {
        guard let record = table[name], case .joined(let membership) = record.phase, membership.generation == socket else {
            return (RoomError(.notJoined, "the room is not joined now"), [])
        }
        guard RoomSystemEvent.isValidEventName(event) else {
            return (RoomError(.notAllowed, "a reserved or invalid event name: \(event.prefix(64))"), [])
        }
        var text = data
        if let key = record.token?.key {
            do {
                let sealed = try SecretBox.seal(Array(data.utf8), key: key)
                text = try RealtimeMessage.jsonText(sealed)
            } catch {
                return (RoomError(.badData, "cannot seal the data: \(error)"), [])
            }
        }
        guard text.utf8.count <= Self.maxDataSize else {
            return (RoomError(.badRequest, "data larger than \(Self.maxDataSize) bytes"), [])
        }
        guard let frame = try? RealtimeMessage(event: configuration.namespace.event(.roomSend), payload: RoomSendRequest(room: name, event: event, data: text)).text else {
            return (RoomError(.badData, "cannot encode the request"), [])
        }
        return (nil, [.send(frame, generation: membership.generation)])
    }

    /// Largest room event data the server accepts (docs/rooms-protocol.md `bad_request`).
    static let maxDataSize = 10 * 1024

    /// `room.history(before:limit:)`: a request on the current socket, answered with
    /// `finishHistory`.
    mutating func requestHistory(_ name: String, before: UInt64?, limit: Int, request: UInt64, now: ContinuousClock.Instant) -> [Action] {
        guard (1...RoomHistoryRequest.maxLimit).contains(limit) else {
            return [.finishHistory(request, .failure(RoomError(.badRequest, "a limit of 1…\(RoomHistoryRequest.maxLimit), not \(limit)")))]
        }
        guard let record = table[name], case .joined(let membership) = record.phase, membership.generation == socket else {
            return [.finishHistory(request, .failure(RoomError(.notJoined, "the room is not joined now")))]
        }
        guard requests.history.count < RoomRequests.maxHistoryInFlight else {
            return [.finishHistory(request, .failure(RoomError(.rateLimited, "\(RoomRequests.maxHistoryInFlight) history requests are in flight")))]
        }
        let payload = RoomHistoryRequest(room: name, request: "h\(request)", limit: limit, before: before)
        guard let text = try? RealtimeMessage(event: configuration.namespace.event(.roomHistory), payload: payload).text else {
            return [.finishHistory(request, .failure(RoomError(.badData, "cannot encode the request")))]
        }
        requests.history[request] = (name, membership.generation)
        return [.send(text, generation: membership.generation), .schedule(.roomHistory(request: request), at: now + configuration.authTimeout)]
    }

    // MARK: - The socket

    /// The handshake of the socket `generation`: every room waiting joins from its position.
    mutating func connected(generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        socket = generation
        var actions: [Action] = []
        for name in table.order {
            guard case .joining(let attempt)? = table[name]?.phase, attempt.step == .waiting else { continue }
            actions += startJoin(name, now: now)
        }
        return actions
    }

    /// The socket ended: joined and joining rooms wait for the next one (their position and
    /// token kept, a token on its way still awaited), history requests in flight end with
    /// `disconnected`.
    mutating func disconnected() -> [Action] {
        socket = nil
        var actions: [Action] = []
        for name in table.order {
            table.update(name) { record in
                switch record.phase {
                case .joining(var attempt):
                    if case .sent = attempt.step { attempt.step = .waiting }
                    record.phase = .joining(attempt)
                case .joined(let membership):
                    var attempt = RoomTable.Attempt(resyncs: membership.resyncs)
                    switch membership.renewal {
                    case .needsToken? where requests.batch.contains(name):
                        attempt.step = .needsToken
                    case .authorizing(let request)?:
                        attempt.step = .authorizing(request: request)
                    case .needsToken?, nil:
                        // A renewal that waits for its retry timer (the 5 s between two auth
                        // requests), not in the batch: waiting, which that timer and the next
                        // handshake both restart.
                        break
                    }
                    record.phase = .joining(attempt)
                case .failed:
                    break
                }
            }
        }
        for request in requests.history.keys.sorted() {
            requests.history[request] = nil
            actions += [.cancel(.roomHistory(request: request)),
                        .finishHistory(request, .failure(RoomError(.disconnected, "the connection dropped before the answer")))]
        }
        return actions
    }

    // MARK: - Joining

    /// Sends the join if connected with a usable token, else asks for one. Only for a room
    /// that is joining.
    mutating func startJoin(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = table[name], case .joining = record.phase else { return [] }
        if let token = record.token, token.isUsable(at: now) {
            guard let socket else {
                table.update(name) { $0.updateAttempt { $0.step = .waiting } }
                return []
            }
            return sendJoin(name, token: token, generation: socket, now: now)
        }
        if let grant = requests.grants.first(where: { RoomName.match(name, pattern: $0.pattern) != nil && $0.token.isUsable(at: now) }) {
            table.update(name) { $0.token = grant.token }
            return [.schedule(.roomToken(room: name), at: grant.token.keepUntil)] + startJoin(name, now: now)
        }
        table.update(name) { record in
            record.token = nil
            record.updateAttempt { $0.step = .needsToken }
        }
        return addToBatch(name, now: now)
    }

    /// Sends `room_join` from the position (a member's rejoin re-synchronises), with a deadline
    /// for its `joined`: a server that never answers cannot leave the room joining, or its events
    /// dropped, without end.
    mutating func sendJoin(_ name: String, token: RoomToken, generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        let since = table[name]?.position
        guard let text = try? RealtimeMessage(event: configuration.namespace.event(.roomJoin), payload: RoomJoinRequest(room: name, token: token.value, since: since)).text else { return [] }
        let join = RoomTable.Join(generation: generation, from: since)
        table.update(name) { record in
            record.updateAttempt { $0.step = .sent(join) }
            record.updateMembership { $0.rejoin = .sent(join) }
        }
        return [.send(text, generation: generation), .schedule(.roomJoin(room: name), at: now + configuration.authTimeout)]
    }

    /// A join's deadline passed with no `joined`: retried with backoff like a `rate_limited`
    /// join (then the room fails with `timed_out`); a rejoin for a hole is given up and the
    /// room told (`not_recovered`), so later events flow again. A join whose replay moved the
    /// position since it was sent (or since the last deadline) is still coming: the deadline
    /// is armed again (docs/rooms-protocol.md "Replay": a long replay is streamed, paced).
    mutating func joinTimedOut(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard socket != nil, let record = table[name], let join = record.join else { return [] }
        if let position = record.position, position != join.from {
            table.update(name) { $0.updateJoin { $0.from = position } }
            return [.schedule(.roomJoin(room: name), at: now + configuration.authTimeout)]
        }
        switch record.phase {
        case .joining(let attempt):
            let error = RoomError(.timedOut, "no joined within \(configuration.authTimeout)")
            guard attempt.retries < Self.maxJoinRetries else { return fail(name, error) }
            table.update(name) { record in
                record.updateAttempt { attempt in
                    attempt.retries += 1
                    attempt.step = .waiting
                }
            }
            return [.schedule(.roomRetry(room: name), at: now + Self.retryDelay(afterRetries: attempt.retries))]
        case .joined:
            table.update(name) { record in
                record.updateMembership { membership in
                    membership.rejoin = nil
                    membership.resyncs = Self.maxResyncs
                }
            }
            return [notRecovered(name, reason: "the rejoin was not answered")]
        case .failed:
            return []
        }
    }

    /// The delay before a refused or unanswered join is tried again: 1 s doubled for each
    /// earlier retry, 30 s at most.
    static func retryDelay(afterRetries retries: Int) -> Duration {
        min(Duration.seconds(1) * (1 << min(retries, 5)), .seconds(30))
    }

    /// Join refusals retried with backoff (`rate_limited`, `store_full`, no answer) before the
    /// room fails.
    static let maxJoinRetries = 6

    /// A join retry timer fired (after `rate_limited`, `store_full` or no answer, or a token
    /// asked too soon after the last).
    mutating func retryDue(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = table[name] else { return [] }
        switch record.phase {
        case .joining(let attempt) where attempt.step == .waiting && socket != nil: return startJoin(name, now: now)
        // A renewal's retry shares the timer with a rejoin put off: both are made.
        case .joined(let membership) where membership.renewal != nil:
            return addToBatch(name, now: now) + (membership.rejoin == .putOff ? rejoin(name, now: now) : [])
        // The rejoin a refusal (`rate_limited`, `store_full`) put off: not another hole, so not
        // counted against `maxResyncs` (the refusals have their own bound, `maxJoinRetries`);
        // none when a token that came meanwhile already made it.
        case .joined(let membership) where membership.rejoin == .putOff || membership.rejoin == nil: return rejoin(name, now: now)
        case .joined, .joining, .failed: return []
        }
    }

    /// The room is over: `failed` with `error`, its token dropped, never rejoined until the app
    /// calls `join` again.
    mutating func fail(_ name: String, _ error: RoomError, deliver: Bool = true) -> [Action] {
        table.update(name) { record in
            record.phase = .failed
            record.error = error
            record.token = nil
        }
        requests.batch.removeAll { $0 == name }
        var actions: [Action] = [.cancel(.roomToken(room: name)), .cancel(.roomRetry(room: name)), .cancel(.roomJoin(room: name))]
        if deliver { actions.append(.deliverRoom(RoomDelivery(room: name, event: RoomSystemEvent.error, data: error.json(), meta: .system))) }
        actions.append(.settleRoom(name, error))
        return actions
    }
}
