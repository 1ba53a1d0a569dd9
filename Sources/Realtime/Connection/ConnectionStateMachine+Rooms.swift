import Foundation
import RealtimeProtocol

/// Where the auth route's requests and the history requests stand (the rooms' own state is
/// in `RoomTable`).
struct RoomRequests {
    /// One batched request to the auth route.
    struct Authorization {
        var names: [String]
        /// 1 for the first try; transient failures are retried with backoff up to `maxAttempts`.
        var attempt = 1
        /// A 401 was retried once already.
        var retriedUnauthorized = false
    }

    /// Rooms waiting for the next batch, in the order they asked.
    var batch: [String] = []
    var batchArmed = false
    /// Requests in flight or waiting for their retry timer, by request id.
    var authorizations: [UInt64: Authorization] = [:]
    /// History requests in flight: their room and socket.
    var history: [UInt64: (room: String, generation: UInt64)] = [:]
    /// Public grants by pattern (`grants` in the options, from the backend's `config()`).
    var grants: [(pattern: String, token: RoomToken)] = []

    /// Tries of one batch before its rooms fail with `auth_failed` (DESIGN.md: "an auth route
    /// failing forever retried every few seconds without end" is a defect to avoid).
    static let maxAttempts = 5
    /// History requests in flight on one connection.
    static let maxHistoryInFlight = 16
}

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
    mutating func joinRoom(_ name: String, now: ContinuousClock.Instant) -> (added: Bool, actions: [Action]) {
        let full = rooms[name] == nil && rooms.count >= RoomTable.maxRooms
        let added = rooms.add(name)
        guard added || rooms[name]?.state == .failed else { return (false, []) }
        rooms.update(name) { record in
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
    private mutating func sendJoin(_ name: String, token: RoomToken, generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        let since = rooms[name]?.position
        guard let text = try? RealtimeMessage(event: configuration.namespace.event(.roomJoin), payload: RoomJoinRequest(room: name, token: token.value, since: since)).text else { return [] }
        rooms.update(name) { record in
            if case .joined = record.phase { record.resyncing = true } else { record.phase = .joining(generation: generation) }
        }
        return [.send(text, generation: generation), .schedule(.roomJoin(room: name), at: now + configuration.authTimeout)]
    }

    /// A join's deadline passed with no `joined`: retried with backoff like a `rate_limited`
    /// join (then the room fails with `timed_out`); a rejoin for a hole is given up and the
    /// room told (`not_recovered`), so later events flow again.
    mutating func roomJoinTimedOut(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = rooms[name], generation != nil else { return [] }
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
    private mutating func failRoom(_ name: String, _ error: RoomError, deliver: Bool = true) -> [Action] {
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

    // MARK: - Tokens

    /// Puts a room in the next batch of the auth route (rooms seed: "every room it joins in the
    /// same moment in one request").
    private mutating func addToBatch(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        // A room asks the auth route at most once per `minimumAuthInterval`: a server that
        // refuses every token it is given cannot make the client hammer the app's route.
        if let last = rooms[name]?.lastAuthAt, now < last + Self.minimumAuthInterval {
            rooms.update(name) { record in
                if record.phase == .needsToken { record.phase = .waiting }
            }
            return [.schedule(.roomRetry(room: name), at: last + Self.minimumAuthInterval)]
        }
        if !roomRequests.batch.contains(name) { roomRequests.batch.append(name) }
        guard !roomRequests.batchArmed else { return [] }
        roomRequests.batchArmed = true
        return [.schedule(.roomAuthBatch, at: now + configuration.roomAuthBatchWindow)]
    }

    /// The shortest time between two auth requests for one room (5 s).
    static let minimumAuthInterval: Duration = .seconds(5)

    /// The batching window closed: one request per 100 rooms.
    mutating func roomAuthBatchDue(now: ContinuousClock.Instant) -> [Action] {
        roomRequests.batchArmed = false
        let names = roomRequests.batch.filter { name in
            guard let record = rooms[name] else { return false }
            return record.phase == .needsToken || record.refreshing
        }
        roomRequests.batch = []
        var actions: [Action] = []
        var start = 0
        while start < names.count {
            let chunk = Array(names[start..<min(names.count, start + RoomAuthorizationRequest.maxRooms)])
            start += chunk.count
            for name in chunk { rooms.update(name) { $0.lastAuthAt = now } }
            let request = nextRequest()
            roomRequests.authorizations[request] = RoomRequests.Authorization(names: chunk)
            markAuthorizing(chunk, request: request)
            actions.append(.authorizeRooms(chunk, request: request))
        }
        return actions
    }

    private mutating func markAuthorizing(_ names: [String], request: UInt64) {
        for name in names {
            rooms.update(name) { record in
                if !record.refreshing { record.phase = .authorizing(request) }
            }
        }
    }

    /// Whether `name` still waits for the answer to `request`.
    private func awaits(_ name: String, request: UInt64) -> Bool {
        guard let record = rooms[name] else { return false }
        return record.phase == .authorizing(request) || record.refreshing
    }

    /// The auth route answered (or failed) for `request`.
    mutating func roomsAuthorized(request: UInt64, _ result: Result<RoomAuthorizationResponse, AuthorizationError>, now: ContinuousClock.Instant) -> [Action] {
        guard var entry = roomRequests.authorizations.removeValue(forKey: request) else { return [] }
        let names = entry.names.filter { awaits($0, request: request) }
        var actions: [Action] = [.cancelRequest(request)]
        switch result {
        case .success(let answer):
            for name in names {
                rooms.update(name) { $0.refreshing = false }
                guard let granted = answer.rooms[name] else {
                    actions += failRoom(name, RoomError(.authFailed, "the auth route's answer has no entry for the room"))
                    continue
                }
                if let code = granted.error {
                    actions += failRoom(name, RoomError(code, "the auth route refused the room"))
                    continue
                }
                guard let value = granted.token, !value.isEmpty, value.utf8.count <= JSONWebToken.maxLength, let expires = granted.expires else {
                    actions += failRoom(name, RoomError(.authFailed, "the auth route's entry has neither a token (at most \(JSONWebToken.maxLength) bytes) with its expiry nor an error"))
                    continue
                }
                var key: [UInt8]?
                if let text = granted.key {
                    guard let bytes = Data(base64Encoded: text), bytes.count == SecretBox.keySize else {
                        actions += failRoom(name, RoomError(.authFailed, "a sealed room's key that is not 32 bytes of base64"))
                        continue
                    }
                    key = Array(bytes)
                }
                let token = RoomToken(value: value, key: key, expires: expires, time: answer.time, now: now)
                guard token.isUsable(at: now) else {
                    actions += failRoom(name, RoomError(.expired, "the auth route gave a token that expires at once"))
                    continue
                }
                actions += tokenReceived(name, token, now: now)
            }
        case .failure(.httpStatus(401, _)) where !entry.retriedUnauthorized:
            // Seed and DESIGN.md: a 401 may be retried once (the session may not be ready yet).
            entry.retriedUnauthorized = true
            entry.names = names
            actions += reissue(entry, now: now, delay: nil)
        case .failure(.httpStatus(401, let body)):
            for name in names { actions += failRoom(name, RoomError(.unauthorized, "the auth route answered 401 twice: \(body.prefix(200))")) }
        case .failure(.httpStatus(403, let body)):
            for name in names { actions += failRoom(name, RoomError(.forbidden, "the auth route answered 403: \(body.prefix(200))")) }
        case .failure(.httpStatus(let status, let body)) where (400...499).contains(status) && status != 408 && status != 429:
            // Another client error (404: a wrong route, 400: a request it does not take) will
            // not change by asking again.
            for name in names { actions += failRoom(name, RoomError(.authFailed, "the auth route answered \(status): \(body.prefix(200))")) }
        case .failure(.notConfigured(let what)):
            for name in names { actions += failRoom(name, RoomError(.authFailed, "no \(what) is configured")) }
        case .failure(let error):
            guard entry.attempt < RoomRequests.maxAttempts else {
                for name in names { actions += failRoom(name, RoomError(.authFailed, "\(error) (after \(entry.attempt) tries)")) }
                break
            }
            let delay = Duration.seconds(1) * (1 << (entry.attempt - 1))
            entry.attempt += 1
            entry.names = names
            actions += reissue(entry, now: now, delay: min(delay, .seconds(30)))
        }
        return actions
    }

    /// Asks again for `entry`'s rooms now, or after `delay` (a retry timer).
    private mutating func reissue(_ entry: RoomRequests.Authorization, now: ContinuousClock.Instant, delay: Duration?) -> [Action] {
        guard !entry.names.isEmpty else { return [] }
        let request = nextRequest()
        roomRequests.authorizations[request] = entry
        markAuthorizing(entry.names, request: request)
        guard let delay else { return [.authorizeRooms(entry.names, request: request)] }
        return [.schedule(.roomAuthRetry(request: request), at: now + delay)]
    }

    /// A retry timer of the auth route fired.
    mutating func roomAuthRetryDue(request: UInt64) -> [Action] {
        guard let entry = roomRequests.authorizations[request] else { return [] }
        let names = entry.names.filter { awaits($0, request: request) }
        guard !names.isEmpty else {
            roomRequests.authorizations[request] = nil
            return []
        }
        roomRequests.authorizations[request]?.names = names
        return [.authorizeRooms(names, request: request)]
    }

    /// A token for `name`: a joined room's refresh is sent as `room_refresh`, a joined room
    /// waiting to re-synchronise after a hole rejoins with it (the rejoin also renews the
    /// membership's token), anything else joins.
    private mutating func tokenReceived(_ name: String, _ token: RoomToken, now: ContinuousClock.Instant) -> [Action] {
        guard let record = rooms[name] else { return [] }
        rooms.update(name) { $0.token = token }
        let arm = Action.schedule(.roomToken(room: name), at: token.keepUntil)
        if case .joined(let generation) = record.phase, generation == self.generation {
            if record.resyncing { return [arm] + sendJoin(name, token: token, generation: generation, now: now) }
            guard let text = try? RealtimeMessage(event: configuration.namespace.event(.roomRefresh), payload: RoomRefreshRequest(room: name, token: token.value)).text else { return [arm] }
            return [.send(text, generation: generation), arm]
        }
        guard let generation = connected?.generation else {
            rooms.update(name) { $0.phase = .waiting }
            return [arm]
        }
        return [arm] + sendJoin(name, token: token, generation: generation, now: now)
    }

    /// A room's token reached its `keepUntil`: while joined, a new one is asked for (and sent
    /// as a refresh); otherwise the next join asks.
    mutating func roomTokenDue(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = rooms[name], let token = record.token, !token.isUsable(at: now) else { return [] }
        guard case .joined = record.phase, !record.refreshing else { return [] }
        if let grant = roomRequests.grants.first(where: { RoomName.match(name, pattern: $0.pattern) != nil && $0.token.isUsable(at: now) }) {
            return tokenReceived(name, grant.token, now: now)
        }
        rooms.update(name) { $0.refreshing = true }
        return addToBatch(name, now: now)
    }

    /// The public grants of the backend's `config()` (`Options.roomGrants`), received at `now`.
    mutating func setRoomGrants(_ configuration: RoomConfiguration, now: ContinuousClock.Instant) {
        roomRequests.grants = configuration.grants.map { grant in
            (grant.pattern, RoomToken(value: grant.token, key: nil, expires: grant.expires, time: configuration.time, now: now))
        }
    }

    // MARK: - Frames from the server

    /// `room_event` and `room_history` frames.
    mutating func roomFrame(_ message: RealtimeMessage, name: ProtocolEventName, generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        roomFrame(message, name: name, generation: generation, now: now, into: &actions)
        return actions
    }

    /// `room_event` and `room_history` frames, their actions appended to `output` (the hot
    /// path: a room's next event costs no action array of its own).
    mutating func roomFrame(_ message: RealtimeMessage, name: ProtocolEventName, generation: UInt64, now: ContinuousClock.Instant,
                            into output: inout [Action]) {
        guard let room = message.channel, let record = rooms[room] else {
            // A frame for a room the app left: events in flight when it left are not wanted.
            return
        }
        guard let text = message.data else {
            output.append(.report(RealtimeError(kind: .protocolViolation, message: "\(message.event) for \(room) without data, ignored")))
            return
        }
        if name == .roomHistory { return output.append(contentsOf: historyAnswered(room, text: text, record: record)) }
        guard let frame = StrictJSON.roomEvent(text).map(RoomEventFrame.init) else {
            output.append(.report(RealtimeError(kind: .protocolViolation, message: "a room_event for \(room) that is not {event, data, meta?}, ignored")))
            return
        }
        switch record.phase {
        case .joining(let joining) where joining == generation: break
        case .joined(let joined) where joined == generation: break
        default: return // an answer to a join made on an older socket, or a room that failed
        }
        guard let meta = frame.meta else {
            return output.append(contentsOf: systemEvent(room, frame, record: record, generation: generation, now: now))
        }
        keptEvent(room, frame, meta: meta, record: record, generation: generation, now: now, into: &output)
    }

    private mutating func keptEvent(_ room: String, _ frame: RoomEventFrame, meta: RoomEventFrame.Meta, record: RoomTable.Record,
                                    generation: UInt64, now: ContinuousClock.Instant, into output: inout [Action]) {
        guard let position = record.position else {
            output.append(.report(RealtimeError(kind: .protocolViolation, message: "a kept event for \(room) before joined, ignored")))
            return
        }
        // DESIGN.md: drop an event whose id is not after the position; a hole is a reason to
        // recover again; the position advances before any handler runs.
        guard meta.id > position.id else { return }
        if meta.id != position.id + 1 {
            guard case .joined = record.phase, !record.resyncing else { return }
            guard record.resyncs >= Self.maxResyncs else { return output.append(contentsOf: resync(room, now: now)) }
            // Rejoins have not closed the gaps: the room is told, and the events flow again from
            // this one (never dropped silently without end).
            output.append(notRecovered(room, reason: "the server kept skipping event ids (\(position.id + 1)…\(meta.id - 1) missing)"))
        }
        rooms.advance(room, to: meta.id)
        let eventMeta = RoomEventMeta(id: meta.id, at: meta.at, from: meta.from, replayed: meta.replayed ?? false)
        guard let key = record.token?.key else {
            // The common case: the data is built on the delivery queue, not here.
            return output.append(.deliverRoom(RoomDelivery(room: room, event: frame.event, payload: frame.data, meta: eventMeta)))
        }
        switch open(frame.data.value, key: key) {
        case .success(let data):
            output.append(.deliverRoom(RoomDelivery(room: room, event: frame.event, data: data, meta: eventMeta)))
        case .failure(let error):
            output.append(.deliverRoom(RoomDelivery(room: room, event: RoomSystemEvent.error,
                                                    data: RoomError(.badData, "event \(meta.id) (\(frame.event.prefix(64))) not delivered: \(error.message)").json(),
                                                    meta: .system)))
        }
    }

    /// Rejoins from the position on the same socket (the server answers a rejoin with the
    /// replay and `joined`, without a second membership). Bounded: after
    /// `maxResyncs` in a row the room is told it was not recovered.
    private mutating func resync(_ room: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = rooms[room], let generation else { return [] }
        guard record.resyncs < Self.maxResyncs else { return [] }
        rooms.update(room) { $0.resyncs += 1 }
        if let token = record.token, token.isUsable(at: now) { return sendJoin(room, token: token, generation: generation, now: now) }
        rooms.update(room) { $0.resyncing = true; $0.refreshing = true }
        return addToBatch(room, now: now)
    }

    /// Rejoins for holes before a clean `joined` resets the count.
    static let maxResyncs = 3

    /// A sealed room's value opened with its key (XSalsa20-Poly1305, docs/rooms-protocol.md
    /// "Sealed rooms"); other rooms' values as they are.
    private func open(_ value: JSONValue, key: [UInt8]?) -> Result<JSONValue, RoomError> {
        guard let key else { return .success(value) }
        guard let nonce = value["nonce"]?.string, let ciphertext = value["ciphertext"]?.string else {
            return .failure(RoomError(.badData, "a sealed room's event without nonce and ciphertext"))
        }
        do {
            let plaintext = try SecretBox.open(EncryptedPayload(nonce: nonce, ciphertext: ciphertext), key: key)
            guard let text = String(validating: plaintext, as: UTF8.self), let value = StrictJSON.parse(text) else {
                return .failure(RoomError(.badData, "the sealed value opens to something that is not JSON text"))
            }
            return .success(value)
        } catch {
            return .failure(RoomError(.badData, "the sealed value does not open: \(error)"))
        }
    }

    private mutating func systemEvent(_ room: String, _ frame: RoomEventFrame, record: RoomTable.Record,
                                      generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        let data = frame.data.value
        let delivery = Action.deliverRoom(RoomDelivery(room: room, event: frame.event, data: data, meta: .system))
        switch frame.event {
        case RoomSystemEvent.joined:
            return joined(room, data: data, record: record, generation: generation, now: now)
        case RoomSystemEvent.join:
            guard let id = data["id"]?.string else { return [delivery] }
            let listed = rooms.addMember(room, RoomMember(id: id, info: data["info"]), limit: Self.maxRoomMembers)
            guard listed else {
                // Reported once per join, not once per member over the cap.
                guard record.membersCapReported == false else { return [delivery] }
                rooms.update(room) { $0.membersCapReported = true }
                return [delivery, .report(RealtimeError(kind: .protocolViolation, message: "\(room) lists \(Self.maxRoomMembers) members already: later ones (\(id.prefix(64)) …) are not listed"))]
            }
            return [delivery]
        case RoomSystemEvent.leave:
            if let id = data["id"]?.string { rooms.removeMember(room, id: id) }
            return [delivery]
        case RoomSystemEvent.count:
            if let n = data["n"]?.number, n >= 0, n < 1e15 { rooms.update(room) { $0.count = Int(n) } }
            return [delivery]
        case RoomSystemEvent.kicked:
            let reason = data["reason"]?.string
            return [delivery] + failRoom(room, RoomError(.kicked, reason ?? "removed by the app's server"), deliver: false)
        case RoomSystemEvent.error:
            return roomError(room, data: data, record: record, now: now)
        default:
            return [.report(RealtimeError(kind: .protocolViolation, message: "a room_event \(frame.event.prefix(64)) for \(room) without meta, ignored"))]
        }
    }

    private mutating func joined(_ room: String, data: JSONValue, record: RoomTable.Record, generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        guard let epoch = data["epoch"]?.string, let number = data["id"]?.number, number >= 0, number < 9.0e15 else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "joined for \(room) without epoch and id, ignored"))]
        }
        let current = RoomPosition(epoch: epoch, id: UInt64(number))
        let awaited: Bool
        switch record.phase {
        case .joining: awaited = true
        case .joined: awaited = record.resyncing
        default: awaited = false
        }
        guard awaited else {
            // No join was asked: a position from it could move the room backwards.
            return [.report(RealtimeError(kind: .protocolViolation, message: "joined for \(room) with no join asked, ignored"))]
        }
        var actions: [Action] = [.cancel(.roomJoin(room: room))]
        var notRecovered: String?
        if let position = record.position {
            if data["recovered"]?.bool == false {
                notRecovered = data["reason"]?.string ?? "unknown"
            } else if position.epoch == current.epoch, position.id < current.id {
                // The replay stopped short of the room's position: a hole.
                if record.resyncs < Self.maxResyncs {
                    rooms.update(room) { $0.resyncs += 1; $0.resyncing = false; $0.phase = .joined(generation: generation) }
                    return resync(room, now: now)
                }
                notRecovered = "the replay kept skipping events"
            } else if position != current {
                notRecovered = position.epoch == current.epoch ? "unknown_position" : "epoch_changed"
            }
        }
        let wasJoined = record.state == .joined
        rooms.update(room) { record in
            record.position = current
            record.phase = .joined(generation: generation)
            record.state = .joined
            record.resyncing = false
            record.resyncs = 0
            record.retries = 0
            record.tokenRefused = false
            if let n = data["count"]?.number, n >= 0, n < 1e15 { record.count = Int(n) }
            record.membersCapReported = false
        }
        if let list = data["members"]?.array {
            var members: [String: RoomMember] = [:]
            for item in list.prefix(Self.maxRoomMembers) {
                if let id = item["id"]?.string { members[id] = RoomMember(id: id, info: item["info"]) }
            }
            rooms.setMembers(room, members)
        }
        actions.append(.deliverRoom(RoomDelivery(room: room, event: RoomSystemEvent.joined, data: data, meta: .system)))
        if let reason = notRecovered { actions.append(self.notRecovered(room, reason: reason)) }
        if !wasJoined { actions.append(.settleRoom(room, nil)) }
        return actions
    }

    /// Tells the room that events it missed will not come (`not_recovered`): the app fetches state.
    private mutating func notRecovered(_ room: String, reason: String) -> Action {
        let error = RoomError(.notRecovered, "events missed while away cannot be replayed (\(reason)): fetch the room's state")
        rooms.update(room) { $0.error = error }
        return .deliverRoom(RoomDelivery(room: room, event: RoomSystemEvent.error, data: error.json(reason: reason), meta: .system))
    }

    /// Most presence members a `joined` may list (the server's cap is 1,000).
    static let maxRoomMembers = 10_000

    private mutating func roomError(_ room: String, data: JSONValue, record: RoomTable.Record, now: ContinuousClock.Instant) -> [Action] {
        let code = RoomErrorCode(rawValue: data["code"]?.string ?? "unknown")
        let error = RoomError(code, data["message"]?.string ?? "")
        let delivery = Action.deliverRoom(RoomDelivery(room: room, event: RoomSystemEvent.error, data: data, meta: .system))
        let joining: Bool
        if case .joining = record.phase { joining = true } else { joining = record.resyncing }
        let tokenRefused = code == .expired || (joining && (code == .badSignature || code == .invalidToken))
        if tokenRefused {
            // The token is no good (`expired` also ends a membership): one new token is asked
            // for and the room rejoins from its position; a second refusal is final.
            guard !record.tokenRefused else { return [delivery] + failRoom(room, error, deliver: false) }
            rooms.update(room) { record in
                record.tokenRefused = true
                record.token = nil
                record.resyncing = false
                record.refreshing = false
                if record.state == .joined { record.state = .joining }
                record.phase = .waiting
            }
            return [delivery] + startJoin(room, now: now)
        }
        if joining, code == .rateLimited || code == .storeFull {
            guard record.retries < Self.maxJoinRetries else { return [delivery] + failRoom(room, error, deliver: false) }
            rooms.update(room) { record in
                record.retries += 1
                record.resyncing = false
                if case .joining = record.phase { record.phase = .waiting }
            }
            let delay = min(Duration.seconds(1) * (1 << min(record.retries, 5)), .seconds(30))
            return [delivery, .schedule(.roomRetry(room: room), at: now + delay)]
        }
        if code == .notJoined, record.state == .joined {
            // The server lost our membership (its state was reset): rejoin from the position.
            return [delivery] + resync(room, now: now)
        }
        guard joining, record.state != .joined else {
            // A refused send or refresh, or a refused rejoin of a member: the membership stands.
            return [delivery]
        }
        return [delivery] + failRoom(room, error, deliver: false)
    }

    /// Join refusals retried with backoff (`rate_limited`, `store_full`) before the room fails.
    static let maxJoinRetries = 6

    /// A join retry timer fired (after `rate_limited` or `store_full`).
    mutating func roomRetryDue(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = rooms[name] else { return [] }
        switch record.phase {
        case .waiting where connected != nil: return startJoin(name, now: now)
        case .joined where record.refreshing: return addToBatch(name, now: now)
        case .joined: return resync(name, now: now)
        default: return []
        }
    }

    private mutating func historyAnswered(_ room: String, text: String, record: RoomTable.Record) -> [Action] {
        guard let page = StrictJSON.parse(text).flatMap(RoomHistoryFrame.init) else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "a room_history for \(room) that is not a page, ignored"))]
        }
        guard page.request.hasPrefix("h"), let request = UInt64(page.request.dropFirst()),
              let entry = roomRequests.history[request], entry.room == room else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "a room_history answer to no request of this client, ignored"))]
        }
        roomRequests.history[request] = nil
        let actions: [Action] = [.cancel(.roomHistory(request: request))]
        if let error = page.error {
            return actions + [.finishHistory(request, .failure(error))]
        }
        var events: [RoomHistoryEvent] = []
        for item in page.events {
            guard let meta = item.meta else {
                return actions + [.finishHistory(request, .failure(RoomError(.badData, "a history event without meta")))]
            }
            switch open(item.data.value, key: record.token?.key) {
            case .success(let data):
                events.append(RoomHistoryEvent(event: item.event, data: data, meta: RoomEventMeta(id: meta.id, at: meta.at, from: meta.from, replayed: false)))
            case .failure(let error):
                return actions + [.finishHistory(request, .failure(error))]
            }
        }
        return actions + [.finishHistory(request, .success(RoomHistoryPage(events: events, more: page.more)))]
    }

    /// A history request's deadline.
    mutating func roomHistoryTimedOut(request: UInt64) -> [Action] {
        guard roomRequests.history.removeValue(forKey: request) != nil else { return [] }
        return [.finishHistory(request, .failure(RoomError(.timedOut, "no history page within \(configuration.authTimeout)")))]
    }
}

/// A `room_event` frame's data: `{event, data, meta?}` (docs/rooms-protocol.md).
struct RoomEventFrame {
    struct Meta {
        var id: UInt64
        var at: Int64
        var from: String?
        var replayed: Bool?
    }

    var event: String
    var data: RoomData
    var meta: Meta?

    /// Reads the fields of a parsed frame (a history page's event).
    init?(_ value: JSONValue) {
        guard case .object(let members) = value else { return nil }
        self.init(members, data: .value(members["data"] ?? .null))
    }

    /// A frame read by `StrictJSON.roomEvent` (its data kept as text).
    init(_ fields: StrictJSON.RoomEventFields) {
        event = fields.event
        data = .text(fields.data)
        meta = fields.meta.map { Meta(id: $0.id, at: $0.at, from: $0.from, replayed: $0.replayed) }
    }

    /// `nil` when `event` is missing or `meta` is malformed (an id that is not a positive whole
    /// number, a time that is not a number, a sender that is not a string or null).
    private init?(_ value: [String: JSONValue], data: RoomData) {
        guard let event = value["event"]?.string else { return nil }
        self.event = event
        self.data = data
        guard let meta = value["meta"], meta != .null else { return }
        guard let id = meta["id"]?.number, id >= 1, id < 9.0e15, id == id.rounded(),
              let at = meta["at"]?.number, abs(at) < 9.0e15 else { return nil }
        let from = meta["from"]
        guard from == nil || from == .null || from?.string != nil else { return nil }
        self.meta = Meta(id: UInt64(id), at: Int64(at), from: from?.string, replayed: meta["replayed"]?.bool)
    }
}

/// A `room_history` frame's data: a page or an error, with the request id.
struct RoomHistoryFrame {
    var request: String
    var events: [RoomEventFrame] = []
    var more = false
    var error: RoomError?

    init?(_ value: JSONValue) {
        guard let request = value["request"]?.string else { return nil }
        self.request = request
        if let failure = value["error"] {
            guard let code = failure["code"]?.string else { return nil }
            error = RoomError(RoomErrorCode(rawValue: code), failure["message"]?.string ?? "")
            return
        }
        guard let list = value["events"]?.array else { return nil }
        var events: [RoomEventFrame] = []
        for item in list {
            guard let event = RoomEventFrame(item) else { return nil }
            events.append(event)
        }
        self.events = events
        more = value["more"]?.bool ?? false
    }
}
