import Foundation
import RealtimeProtocol

/// Room tokens: the auth route's batches, their answers and retries, the token cache and its
/// refresh, public grants (docs/rooms-protocol.md "What a client does").
extension RoomsMachine {
    // MARK: - Tokens

    /// Puts a room in the next batch of the auth route (rooms seed: "every room it joins in the
    /// same moment in one request").
    mutating func addToBatch(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        // A room asks the auth route at most once per `minimumAuthInterval`: a server that
        // refuses every token it is given cannot make the client hammer the app's route.
        if let last = table[name]?.lastAuthAt, now < last + Self.minimumAuthInterval {
            table.update(name) { record in
                record.updateAttempt { attempt in
                    if attempt.step == .needsToken { attempt.step = .waiting }
                }
            }
            return [.schedule(.roomRetry(room: name), at: last + Self.minimumAuthInterval)]
        }
        if !requests.batch.contains(name) { requests.batch.append(name) }
        guard !requests.batchArmed else { return [] }
        requests.batchArmed = true
        return [.schedule(.roomAuthBatch, at: now + configuration.roomAuthBatchWindow)]
    }

    /// The shortest time between two auth requests for one room (5 s).
    static let minimumAuthInterval: Duration = .seconds(5)

    /// The batching window closed: one request per 100 rooms, its id from `ids`.
    mutating func authBatchDue(now: ContinuousClock.Instant, ids: inout RequestIDs) -> [Action] {
        requests.batchArmed = false
        let names = requests.batch.filter { name in
            switch table[name]?.phase {
            case .joining(let attempt)?: return attempt.step == .needsToken
            case .joined(let membership)?: return membership.renewal != nil
            case .failed?, nil: return false
            }
        }
        requests.batch = []
        var actions: [Action] = []
        var start = 0
        while start < names.count {
            let chunk = Array(names[start..<min(names.count, start + RoomAuthorizationRequest.maxRooms)])
            start += chunk.count
            for name in chunk { table.update(name) { $0.lastAuthAt = now } }
            let request = ids.next()
            requests.authorizations[request] = RoomRequests.Authorization(names: chunk)
            markAuthorizing(chunk, request: request)
            actions.append(.authorizeRooms(chunk, request: request))
        }
        return actions
    }

    /// The rooms wait for `request`'s answer: joining ones in their step, joined ones in their
    /// renewal.
    mutating func markAuthorizing(_ names: [String], request: UInt64) {
        for name in names {
            table.update(name) { record in
                record.updateAttempt { $0.step = .authorizing(request: request) }
                record.updateMembership { $0.renewal = .authorizing(request: request) }
            }
        }
    }

    /// Whether `name` still waits for the answer to `request`.
    func awaits(_ name: String, request: UInt64) -> Bool {
        switch table[name]?.phase {
        case .joining(let attempt)?: return attempt.step == .authorizing(request: request)
        case .joined(let membership)?: return membership.renewal == .authorizing(request: request)
        case .failed?, nil: return false
        }
    }

    /// The auth route answered (or failed) for `request`; a retry's request id comes from `ids`.
    mutating func authorized(request: UInt64, _ result: Result<RoomAuthorizationResponse, AuthorizationError>,
                             now: ContinuousClock.Instant, ids: inout RequestIDs) -> [Action] {
        guard var entry = requests.authorizations.removeValue(forKey: request) else { return [] }
        let names = entry.names.filter { awaits($0, request: request) }
        var actions: [Action] = [.cancelRequest(request)]
        switch result {
        case .success(let answer):
            for name in names {
                table.update(name) { $0.updateMembership { $0.renewal = nil } }
                guard let granted = answer.rooms[name] else {
                    actions += fail(name, RoomError(.authFailed, "the auth route's answer has no entry for the room"))
                    continue
                }
                if let code = granted.error {
                    actions += fail(name, RoomError(code, "the auth route refused the room"))
                    continue
                }
                guard let value = granted.token, !value.isEmpty, value.utf8.count <= JSONWebToken.maxLength, let expires = granted.expires else {
                    actions += fail(name, RoomError(.authFailed, "the auth route's entry has neither a token (at most \(JSONWebToken.maxLength) bytes) with its expiry nor an error"))
                    continue
                }
                var key: [UInt8]?
                if let text = granted.key {
                    guard let bytes = Data(base64Encoded: text), bytes.count == SecretBox.keySize else {
                        actions += fail(name, RoomError(.authFailed, "a sealed room's key that is not 32 bytes of base64"))
                        continue
                    }
                    key = Array(bytes)
                }
                let token = RoomToken(value: value, key: key, expires: expires, time: answer.time, now: now)
                guard token.isUsable(at: now) else {
                    actions += fail(name, RoomError(.expired, "the auth route gave a token that expires at once"))
                    continue
                }
                actions += tokenReceived(name, token, now: now)
            }
        case .failure(.httpStatus(401, _)) where !entry.retriedUnauthorized:
            // Seed and DESIGN.md: a 401 may be retried once (the session may not be ready yet).
            entry.retriedUnauthorized = true
            entry.names = names
            actions += reissue(entry, now: now, delay: nil, ids: &ids)
        case .failure(.httpStatus(401, let body)):
            for name in names { actions += fail(name, RoomError(.unauthorized, "the auth route answered 401 twice: \(body.prefix(200))")) }
        case .failure(.httpStatus(403, let body)):
            for name in names { actions += fail(name, RoomError(.forbidden, "the auth route answered 403: \(body.prefix(200))")) }
        case .failure(.httpStatus(let status, let body)) where (400...499).contains(status) && status != 408 && status != 429:
            // Another client error (404: a wrong route, 400: a request it does not take) will
            // not change by asking again.
            for name in names { actions += fail(name, RoomError(.authFailed, "the auth route answered \(status): \(body.prefix(200))")) }
        case .failure(.notConfigured(let what)):
            for name in names { actions += fail(name, RoomError(.authFailed, "no \(what) is configured")) }
        case .failure(let error):
            guard entry.attempt < RoomRequests.maxAttempts else {
                for name in names { actions += fail(name, RoomError(.authFailed, "\(error) (after \(entry.attempt) tries)")) }
                break
            }
            let delay = Duration.seconds(1) * (1 << (entry.attempt - 1))
            entry.attempt += 1
            entry.names = names
            actions += reissue(entry, now: now, delay: min(delay, .seconds(30)), ids: &ids)
        }
        return actions
    }

    /// Asks again for `entry`'s rooms now, or after `delay` (a retry timer).
    mutating func reissue(_ entry: RoomRequests.Authorization, now: ContinuousClock.Instant, delay: Duration?, ids: inout RequestIDs) -> [Action] {
        guard !entry.names.isEmpty else { return [] }
        let request = ids.next()
        requests.authorizations[request] = entry
        markAuthorizing(entry.names, request: request)
        guard let delay else { return [.authorizeRooms(entry.names, request: request)] }
        return [.schedule(.roomAuthRetry(request: request), at: now + delay)]
    }

    /// A retry timer of the auth route fired.
    mutating func authRetryDue(request: UInt64) -> [Action] {
        guard let entry = requests.authorizations[request] else { return [] }
        let names = entry.names.filter { awaits($0, request: request) }
        guard !names.isEmpty else {
            requests.authorizations[request] = nil
            return []
        }
        requests.authorizations[request]?.names = names
        return [.authorizeRooms(names, request: request)]
    }

    /// A token for `name`: a member's renewal is sent as `room_refresh`, a member waiting to
    /// rejoin after a hole rejoins with it (the rejoin also renews the membership's token), a
    /// joining room joins.
    mutating func tokenReceived(_ name: String, _ token: RoomToken, now: ContinuousClock.Instant) -> [Action] {
        guard let record = table[name] else { return [] }
        table.update(name) { $0.token = token }
        let arm = Action.schedule(.roomToken(room: name), at: token.keepUntil)
        if case .joined(let membership) = record.phase, membership.generation == socket {
            if membership.rejoin != nil { return [arm] + sendJoin(name, token: token, generation: membership.generation, now: now) }
            guard let text = try? RealtimeMessage(event: configuration.namespace.event(.roomRefresh), payload: RoomRefreshRequest(room: name, token: token.value)).text else { return [arm] }
            return [.send(text, generation: membership.generation), arm]
        }
        guard let socket else {
            table.update(name) { $0.updateAttempt { $0.step = .waiting } }
            return [arm]
        }
        return [arm] + sendJoin(name, token: token, generation: socket, now: now)
    }

    /// A room's token reached its `keepUntil`: a member asks for a new one (sent as a refresh);
    /// otherwise the next join asks.
    mutating func tokenDue(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = table[name], let token = record.token, !token.isUsable(at: now) else { return [] }
        guard case .joined(let membership) = record.phase, membership.renewal == nil else { return [] }
        if let grant = requests.grants.first(where: { RoomName.match(name, pattern: $0.pattern) != nil && $0.token.isUsable(at: now) }) {
            return tokenReceived(name, grant.token, now: now)
        }
        table.update(name) { $0.updateMembership { $0.renewal = .needsToken } }
        return addToBatch(name, now: now)
    }

    /// The public grants of the backend's `config()` (`Options.grants`), received at `now`.
    mutating func setGrants(_ configuration: RoomConfiguration, now: ContinuousClock.Instant) {
        requests.grants = configuration.grants.map { grant in
            (grant.pattern, RoomToken(value: grant.token, key: nil, expires: grant.expires, time: configuration.time, now: now))
        }
    }
}
