import Foundation
import RealtimeProtocol

/// Room tokens on the machine: the auth route's batches, their answers and retries, the token
/// cache and its refresh, public grants (docs/rooms-protocol.md "What a client does").
extension ConnectionStateMachine {
    // MARK: - Tokens

    /// Puts a room in the next batch of the auth route (rooms seed: "every room it joins in the
    /// same moment in one request").
    mutating func addToBatch(_ name: String, now: ContinuousClock.Instant) -> [Action] {
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

    mutating func markAuthorizing(_ names: [String], request: UInt64) {
        for name in names {
            rooms.update(name) { record in
                if !record.refreshing { record.phase = .authorizing(request) }
            }
        }
    }

    /// Whether `name` still waits for the answer to `request`.
    func awaits(_ name: String, request: UInt64) -> Bool {
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
    mutating func reissue(_ entry: RoomRequests.Authorization, now: ContinuousClock.Instant, delay: Duration?) -> [Action] {
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
    mutating func tokenReceived(_ name: String, _ token: RoomToken, now: ContinuousClock.Instant) -> [Action] {
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

    /// The public grants of the backend's `config()` (`Options.grants`), received at `now`.
    mutating func setRoomGrants(_ configuration: RoomConfiguration, now: ContinuousClock.Instant) {
        roomRequests.grants = configuration.grants.map { grant in
            (grant.pattern, RoomToken(value: grant.token, key: nil, expires: grant.expires, time: configuration.time, now: now))
        }
    }
}
