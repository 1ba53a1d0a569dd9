import Foundation
import RealtimeProtocol

/// Rooms on the machine (rooms seed; docs/rooms-protocol.md): joins batched into one auth
/// request, tokens kept across reconnects until 10 minutes before they expire in the server's
/// time, rejoins from each room's position, duplicates dropped by id and holes recovered,
/// history requests. Every decision here is a pure function of the events and the clock, so
/// the manual-clock tests drive it exactly.
extension ConnectionStateMachine {
    // MARK: - App commands

    /// `join(name)`: a new room (or a failed one again) starts joining; a room already joining
    /// or joined is left as it is.
    ///
    /// - Returns: whether the room is new to the table, and the actions.
    mutating func joinRoom(_ name: String, from position: RoomPosition? = nil, now: ContinuousClock.Instant) -> (added: Bool, actions: [Action]) {
        let full = rooms[name] == nil && rooms.count >= RoomTable.maxRooms
        let added = rooms.add(name)
        guard added || rooms[name]?.state == .failed else { return (false, []) }
        rooms.update(name) { record in
            // A position saved by an earlier process: the first join asks for what came after it.
            if let position, record.position == nil { record.position = position }
            record.state = .joining
            record.phase = .waiting
            record.error = nil
            record.tokenRefused = false
            record.retries = 0
            record.resyncs = 0
        }
        guard !full else {
            return (added, failRoom(name, RoomError(.tooManyRooms, "a client joins at most \(RoomTable.maxRooms) rooms (the server's limit per connection)")))
        }
        guard RoomName.isValid(name) else {
            return (added, failRoom(name, RoomError(.invalidRoom, "not a valid room name (1…\(RoomName.maxLength) of A–Z a–z 0–9 _ - = @ , . ; :)")))
        }
        return (added, startJoin(name, now: now))
    }

    /// The connection will not come back by itself (`failed`, or `disconnect()`): every room
    /// still joining answers its `ready()` waiters with `error` (issue 34, item 6: with a wrong
    /// app key `ready()` waited forever after 4001). The rooms stay joining: `connect()` joins them.
    func settleJoiningRooms(_ error: RoomError) -> [Action] {
        rooms.order.filter { rooms[$0]?.state == .joining }.map { .settleRoom($0, error) }
    }

    /// `leave(name)`: `room_leave` when joined or joining, and the room is forgotten with its
    /// position and token; waiting `ready()` and history calls end with `left`.
    mutating func leaveRoom(_ name: String) -> [Action] {
        guard let record = rooms[name] else { return [] }
        var actions: [Action] = [.cancel(.roomToken(room: name)), .cancel(.roomRetry(room: name)), .cancel(.roomJoin(room: name))]
        switch record.phase {
        case .joining(let generation), .joined(let generation):
            if let text = try? RealtimeMessage(event: configuration.namespace.event(.roomLeave), payload: RoomLeaveRequest(room: name)).text {
                actions.append(.send(text, generation: generation))
            }
        default:
            break
        }
        roomRequests.batch.removeAll { $0 == name }
        for (request, entry) in roomRequests.history where entry.room == name {
            roomRequests.history[request] = nil
            actions += [.cancel(.roomHistory(request: request)), .finishHistory(request, .failure(RoomError(.left, "the room was left")))]
        }
        _ = rooms.remove(name)
        return actions
    }

    /// `room.send(event, data)`: only while joined.
    ///
    /// - Returns: `nil` and the frame's action, or why nothing was sent.
    mutating func sendToRoom(_ name: String, event: String, data: String) -> (RoomError?, [Action]) {
        guard let record = rooms[name], case .joined(let generation) = record.phase, generation == self.generation else {
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
        guard text.utf8.count <= Self.maxRoomDataSize else {
            return (RoomError(.badRequest, "data larger than \(Self.maxRoomDataSize) bytes"), [])
        }
        guard let frame = try? RealtimeMessage(event: configuration.namespace.event(.roomSend), payload: RoomSendRequest(room: name, event: event, data: text)).text else {
            return (RoomError(.badData, "cannot encode the request"), [])
        }
        return (nil, [.send(frame, generation: generation)])
    }

    /// Largest room event data the server accepts (docs/rooms-protocol.md `bad_request`).
    static let maxRoomDataSize = 10 * 1024

    /// `room.history(before:limit:)`: a request on the current socket, answered with
    /// `finishHistory`.
    mutating func requestHistory(_ name: String, before: UInt64?, limit: Int, request: UInt64, now: ContinuousClock.Instant) -> [Action] {
        guard (1...RoomHistoryRequest.maxLimit).contains(limit) else {
            return [.finishHistory(request, .failure(RoomError(.badRequest, "a limit of 1…\(RoomHistoryRequest.maxLimit), not \(limit)")))]
        }
        guard let record = rooms[name], case .joined(let generation) = record.phase, generation == self.generation else {
            return [.finishHistory(request, .failure(RoomError(.notJoined, "the room is not joined now")))]
        }
        guard roomRequests.history.count < RoomRequests.maxHistoryInFlight else {
            return [.finishHistory(request, .failure(RoomError(.rateLimited, "\(RoomRequests.maxHistoryInFlight) history requests are in flight")))]
        }
        let payload = RoomHistoryRequest(room: name, request: "h\(request)", limit: limit, before: before)
        guard let text = try? RealtimeMessage(event: configuration.namespace.event(.roomHistory), payload: payload).text else {
            return [.finishHistory(request, .failure(RoomError(.badData, "cannot encode the request")))]
        }
        roomRequests.history[request] = (name, generation)
        return [.send(text, generation: generation), .schedule(.roomHistory(request: request), at: now + configuration.authTimeout)]
    }

    // MARK: - Joining

    /// Sends the join if connected with a usable token, else asks for one.
    mutating func startJoin(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = rooms[name], record.phase != .done else { return [] }
        if let token = record.token, token.isUsable(at: now) {
            guard let generation = connected?.generation else {
                rooms.update(name) { $0.phase = .waiting }
                return []
            }
            return sendJoin(name, token: token, generation: generation, now: now)
        }
        if let grant = roomRequests.grants.first(where: { RoomName.match(name, pattern: $0.pattern) != nil && $0.token.isUsable(at: now) }) {
            rooms.update(name) { $0.token = grant.token }
            return [.schedule(.roomToken(room: name), at: grant.token.keepUntil)] + startJoin(name, now: now)
        }
        rooms.update(name) { $0.token = nil; $0.phase = .needsToken }
        return addToBatch(name, now: now)
    }

    /// Sends `room_join` from the position (a rejoin while joined re-synchronises), with a
    /// deadline for its `joined`: a server that never answers cannot leave the room joining, or
    /// its events dropped, without end.
    mutating func sendJoin(_ name: String, token: RoomToken, generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        let since = rooms[name]?.position
        guard let text = try? RealtimeMessage(event: configuration.namespace.event(.roomJoin), payload: RoomJoinRequest(room: name, token: token.value, since: since)).text else { return [] }
        rooms.update(name) { record in
            if case .joined = record.phase { record.resyncing = true } else { record.phase = .joining(generation: generation) }
            record.gapTold = false
            record.joinFrom = record.position
        }
        return [.send(text, generation: generation), .schedule(.roomJoin(room: name), at: now + configuration.authTimeout)]
    }

    /// A join's deadline passed with no `joined`: retried with backoff like a `rate_limited`
    /// join (then the room fails with `timed_out`); a rejoin for a hole is given up and the
    /// room told (`not_recovered`), so later events flow again. A join whose replay moved the
    /// position since it was sent (or since the last deadline) is still coming: the deadline
    /// is armed again (docs/rooms-protocol.md "Replay": a long replay is streamed, paced).
    mutating func roomJoinTimedOut(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = rooms[name], generation != nil else { return [] }
        let awaited: Bool
        switch record.phase {
        case .joining: awaited = true
        case .joined: awaited = record.resyncing
        default: awaited = false
        }
        if awaited, let position = record.position, position != record.joinFrom {
            rooms.update(name) { $0.joinFrom = position }
            return [.schedule(.roomJoin(room: name), at: now + configuration.authTimeout)]
        }
        switch record.phase {
        case .joining:
            let error = RoomError(.timedOut, "no joined within \(configuration.authTimeout)")
            guard record.retries < Self.maxJoinRetries else { return failRoom(name, error) }
            rooms.update(name) { record in
                record.retries += 1
                record.phase = .waiting
            }
            let delay = min(Duration.seconds(1) * (1 << min(record.retries, 5)), .seconds(30))
            return [.schedule(.roomRetry(room: name), at: now + delay)]
        case .joined where record.resyncing:
            rooms.update(name) { record in
                record.resyncing = false
                record.resyncs = Self.maxResyncs
            }
            return [notRecovered(name, reason: "the rejoin was not answered")]
        default:
            return []
        }
    }

    /// The handshake: every room not over rejoins from its position.
    mutating func roomsConnected(now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        for name in rooms.order {
            guard let record = rooms[name] else { continue }
            switch record.phase {
            case .waiting: actions += startJoin(name, now: now)
            case .needsToken, .authorizing, .done, .joining, .joined: break
            }
        }
        return actions
    }

    /// The socket ended: joined rooms are joining again (their position and token kept),
    /// history requests in flight end with `disconnected`.
    mutating func roomsDisconnected() -> [Action] {
        var actions: [Action] = []
        for name in rooms.order {
            rooms.update(name) { record in
                switch record.phase {
                case .joining, .joined:
                    record.phase = .waiting
                    record.state = .joining
                    record.resyncing = false
                default:
                    break
                }
            }
        }
        for request in roomRequests.history.keys.sorted() {
            roomRequests.history[request] = nil
            actions += [.cancel(.roomHistory(request: request)),
                        .finishHistory(request, .failure(RoomError(.disconnected, "the connection dropped before the answer")))]
        }
        return actions
    }

    /// The room is over: `failed` with `error`, its token dropped, never rejoined until the app
    /// calls `join` again.
    mutating func failRoom(_ name: String, _ error: RoomError, deliver: Bool = true) -> [Action] {
        rooms.update(name) { record in
            record.state = .failed
            record.phase = .done
            record.error = error
            record.token = nil
            record.refreshing = false
            record.resyncing = false
        }
        roomRequests.batch.removeAll { $0 == name }
        var actions: [Action] = [.cancel(.roomToken(room: name)), .cancel(.roomRetry(room: name)), .cancel(.roomJoin(room: name))]
        if deliver { actions.append(.deliverRoom(RoomDelivery(room: name, event: RoomSystemEvent.error, data: error.json(), meta: .system))) }
        actions.append(.settleRoom(name, error))
        return actions
    }
}
