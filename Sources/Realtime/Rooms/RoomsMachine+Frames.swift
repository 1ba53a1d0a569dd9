import Foundation
import RealtimeProtocol

/// Room frames: kept events (position, duplicates, holes), the room's own events (`joined`,
/// members, `count`, `kicked`, `error`) and history pages.
extension RoomsMachine {
    // MARK: - Frames from the server

    /// `room_event` and `room_history` frames.
    mutating func frame(_ message: RealtimeMessage, name: ProtocolEventName, generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        var actions: [Action] = []
        frame(message, name: name, generation: generation, now: now, into: &actions)
        return actions
    }

    /// `room_event` and `room_history` frames, their actions appended to `output` (the hot
    /// path: a room's next event costs no action array of its own).
    mutating func frame(_ message: RealtimeMessage, name: ProtocolEventName, generation: UInt64, now: ContinuousClock.Instant,
                        into output: inout [Action]) {
        // The record is read in place, not copied, on this per-event path.
        guard let room = message.channel, let phase = table.phase(of: room) else {
            // A frame for a room the app left: events in flight when it left are not wanted.
            return
        }
        guard let text = message.data else {
            output.append(.report(RealtimeError(kind: .protocolViolation, message: "\(message.event) for \(room) without data, ignored")))
            return
        }
        if name == .roomHistory {
            guard let record = table[room] else { return }
            return output.append(contentsOf: historyAnswered(room, text: text, record: record))
        }
        guard let frame = StrictJSON.roomEvent(text).map(RoomEventFrame.init) else {
            output.append(.report(RealtimeError(kind: .protocolViolation, message: "a room_event for \(room) that is not {event, data, meta?}, ignored")))
            return
        }
        switch phase {
        case .joining(let attempt):
            // Only the answer to the join sent on this socket.
            guard case .sent(let join) = attempt.step, join.generation == generation else { return }
        case .joined(let membership):
            guard membership.generation == generation else { return }
        case .failed:
            return
        }
        guard let meta = frame.meta else {
            guard let record = table[room] else { return }
            return output.append(contentsOf: systemEvent(room, frame, record: record, generation: generation, now: now))
        }
        keptEvent(room, frame, meta: meta, now: now, into: &output)
    }

    mutating func keptEvent(_ room: String, _ frame: RoomEventFrame, meta: RoomEventFrame.Meta,
                            now: ContinuousClock.Instant, into output: inout [Action]) {
        // DESIGN.md: drop an event whose id is not after the position; a hole is a reason to
        // recover again; the position advances before any handler runs (`RoomTable.admit`).
        let key: [UInt8]?
        let epoch: String
        switch table.admit(room, id: meta.id, maxResyncs: Self.maxResyncs) {
        case nil, .duplicate?, .heldForResync?:
            return
        case .beforeJoined?:
            return output.append(.report(RealtimeError(kind: .protocolViolation, message: "a kept event for \(room) before joined, ignored")))
        case .resync?:
            return output.append(contentsOf: resync(room, now: now))
        case .deliver(let sealed, let skipped, let streamEpoch)?:
            epoch = streamEpoch
            if let skipped {
                // Rejoins have not closed the gaps: the room is told, and the events flow again
                // from this one (never dropped silently without end).
                output.append(notRecovered(room, reason: "the server kept skipping event ids (\(skipped.lowerBound)…\(skipped.upperBound) missing)"))
            }
            key = sealed
        }
        let eventMeta = RoomEventMeta(id: meta.id, at: meta.at, from: meta.from, replayed: meta.replayed ?? false, epoch: epoch)
        guard let key else {
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
    /// replay and `joined`, without a second membership); a member with no usable token waits
    /// for a new one first. Bounded: after `maxResyncs` in a row the room is told it was not
    /// recovered.
    mutating func resync(_ room: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = table[room], socket != nil, record.resyncs < Self.maxResyncs else { return [] }
        table.update(room) { record in
            record.updateAttempt { $0.resyncs += 1 }
            record.updateMembership { $0.resyncs += 1 }
        }
        return rejoin(room, now: now)
    }

    /// Joins again from the position on the same socket, with the token if it is usable, else
    /// after the renewal that brings one.
    mutating func rejoin(_ room: String, now: ContinuousClock.Instant) -> [Action] {
        guard let record = table[room], let socket else { return [] }
        if let token = record.token, token.isUsable(at: now) { return sendJoin(room, token: token, generation: socket, now: now) }
        var renewal: RoomTable.Renewal?
        table.update(room) { record in
            record.updateAttempt { $0.step = .needsToken }
            record.updateMembership { membership in
                membership.rejoin = .awaitingToken
                renewal = membership.renewal
                if renewal == nil { membership.renewal = .needsToken }
            }
        }
        // A token already on its way serves the rejoin.
        return renewal == nil ? addToBatch(room, now: now) : []
    }

    /// Rejoins for holes before a clean `joined` resets the count.
    static let maxResyncs = 3

    /// A sealed room's value opened with its key (XSalsa20-Poly1305, docs/rooms-protocol.md
    /// "Sealed rooms"); other rooms' values as they are.
    func open(_ value: JSONValue, key: [UInt8]?) -> Result<JSONValue, RoomError> {
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

    mutating func systemEvent(_ room: String, _ frame: RoomEventFrame, record: RoomTable.Record,
                              generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        let data = frame.data.value
        let delivery = Action.deliverRoom(RoomDelivery(room: room, event: frame.event, data: data, meta: .system))
        switch frame.event {
        case RoomSystemEvent.joined:
            return joined(room, data: data, record: record, generation: generation, now: now)
        case RoomSystemEvent.join:
            // Members are listed from `joined` on; `joined` lists those before it.
            guard case .joined(let membership) = record.phase, let id = data["id"]?.string else { return [delivery] }
            let listed = table.addMember(room, RoomMember(id: id, info: data["info"]), limit: Self.maxRoomMembers)
            guard listed else {
                // Reported once per membership, not once per member over the cap.
                guard !membership.membersCapReported else { return [delivery] }
                table.update(room) { $0.updateMembership { $0.membersCapReported = true } }
                return [delivery, .report(RealtimeError(kind: .protocolViolation, message: "\(room) lists \(Self.maxRoomMembers) members already: later ones (\(id.prefix(64)) …) are not listed"))]
            }
            return [delivery]
        case RoomSystemEvent.leave:
            if let id = data["id"]?.string { table.removeMember(room, id: id) }
            return [delivery]
        case RoomSystemEvent.count:
            if let n = data["n"]?.number, n >= 0, n < 1e15 { table.update(room) { $0.count = Int(n) } }
            return [delivery]
        case RoomSystemEvent.kicked:
            let reason = data["reason"]?.string
            return [delivery] + fail(room, RoomError(.kicked, reason ?? "removed by the app's server"), deliver: false)
        case RoomSystemEvent.error:
            return roomError(room, data: data, record: record, now: now)
        case RoomSystemEvent.gap:
            return gap(room, data: data, record: record)
        default:
            return [.report(RealtimeError(kind: .protocolViolation, message: "a room_event \(frame.event.prefix(64)) for \(room) without meta, ignored"))]
        }
    }

    /// `gap`, before the replay of a join from the position (docs/rooms-protocol.md "Replay"):
    /// the room is told exactly which events will not come (`not_recovered` with the gap), and
    /// the position moves past them so the replay that follows is in order.
    mutating func gap(_ room: String, data: JSONValue, record: RoomTable.Record) -> [Action] {
        guard record.join != nil, let position = record.position else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "a gap for \(room) with no rejoin from a position asked, ignored"))]
        }
        guard let gap = RoomGap(json: data) else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "a gap for \(room) that is not {reason, epoch, first?, last?, before?, previous?}, ignored"))]
        }
        // A gap starts right after the position: the next id in the same epoch; in a new one,
        // after the position it names as lost (an old or forged gap could skip or repeat events).
        let follows = gap.epoch == position.epoch
            ? gap.missing?.lowerBound == position.id + 1
            : gap.previous == position && (gap.missing?.lowerBound ?? 1) == 1
        guard follows else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "a gap for \(room) that does not start at its position \(position), ignored"))]
        }
        let resume = gap.resume(from: position)
        table.update(room) { record in
            record.position = resume
            record.updateJoin { $0.gapTold = true }
        }
        return [notRecovered(room, reason: gap.reason, gap: gap)]
    }

    /// `joined`, the end of a join's replay: the room becomes (or stays) a member from the
    /// position it gives, told first of what the replay could not bring; a replay that stopped
    /// short of the room's own position is a hole, and the room rejoins.
    mutating func joined(_ room: String, data: JSONValue, record: RoomTable.Record, generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
        guard let epoch = data["epoch"]?.string, let number = data["id"]?.number, number >= 0, number < 9.0e15 else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "joined for \(room) without epoch and id, ignored"))]
        }
        let current = RoomPosition(epoch: epoch, id: UInt64(number))
        guard let join = record.join else {
            // No join was asked: a position from it could move the room backwards.
            return [.report(RealtimeError(kind: .protocolViolation, message: "joined for \(room) with no join asked, ignored"))]
        }
        var actions: [Action] = [.cancel(.roomJoin(room: room))]
        var notRecovered: String?
        if let position = record.position {
            if data["recovered"]?.bool == false, !join.gapTold {
                notRecovered = data["reason"]?.string ?? "unknown"
            } else if join.gapTold, position == current {
                // Told already, with its ids, when the server sent the gap before the replay.
            } else if position.epoch == current.epoch, position.id < current.id {
                // The replay stopped short of the room's position: a hole.
                if record.resyncs < Self.maxResyncs { return actions + resync(room, now: now) }
                notRecovered = "the replay kept skipping events"
            } else if position != current {
                notRecovered = position.epoch == current.epoch ? "unknown_position" : "epoch_changed"
            }
        }
        var membership = RoomTable.Membership(generation: generation)
        if case .joined(let member) = record.phase {
            // A member's rejoin: a token on its way still comes.
            membership.renewal = member.renewal
        }
        table.update(room) { record in
            record.position = current
            record.phase = .joined(membership)
            if let n = data["count"]?.number, n >= 0, n < 1e15 { record.count = Int(n) }
        }
        if let list = data["members"]?.array {
            var members: [String: RoomMember] = [:]
            for item in list.prefix(Self.maxRoomMembers) {
                if let id = item["id"]?.string { members[id] = RoomMember(id: id, info: item["info"]) }
            }
            table.setMembers(room, members)
        }
        actions.append(.deliverRoom(RoomDelivery(room: room, event: RoomSystemEvent.joined, data: data, meta: .system)))
        if let reason = notRecovered { actions.append(self.notRecovered(room, reason: reason)) }
        if record.state != .joined { actions.append(.settleRoom(room, nil)) }
        return actions
    }

    /// Tells the room that events it missed will not come (`not_recovered`): with a `gap`,
    /// exactly which (the app fetches that range), else the app fetches state.
    mutating func notRecovered(_ room: String, reason: String, gap: RoomGap? = nil) -> Action {
        let error: RoomError
        if let gap {
            let ids = gap.missing.map { "ids \($0.lowerBound)…\($0.upperBound) of epoch \(gap.epoch)" }
            let lost = gap.previous.map { "everything after id \($0.id) of the lost epoch \($0.epoch)" }
            let what = [lost, ids].compactMap { $0 }.joined(separator: " and ")
            error = RoomError(.notRecovered, "events missed while away are gone (\(reason)): \(what.isEmpty ? "none of this epoch" : what); what is still kept follows", gap: gap)
        } else {
            error = RoomError(.notRecovered, "events missed while away cannot be replayed (\(reason)): fetch the room's state")
        }
        table.update(room) { $0.error = error }
        return .deliverRoom(RoomDelivery(room: room, event: RoomSystemEvent.error, data: error.json(reason: reason), meta: .system))
    }

    /// Most presence members a `joined` may list (the server's cap is 1,000).
    static let maxRoomMembers = 10_000

    /// A room `error` from the server: a refused token is asked for once more, refused joins
    /// that may pass later are retried with backoff, a lost membership rejoins, a refusal that
    /// will not change ends a join; a member's refused send or refresh leaves it a member.
    mutating func roomError(_ room: String, data: JSONValue, record: RoomTable.Record, now: ContinuousClock.Instant) -> [Action] {
        let code = RoomErrorCode(rawValue: data["code"]?.string ?? "unknown")
        let error = RoomError(code, data["message"]?.string ?? "")
        let delivery = Action.deliverRoom(RoomDelivery(room: room, event: RoomSystemEvent.error, data: data, meta: .system))
        let joining = record.join != nil
        let tokenRefused = code == .expired || (joining && (code == .badSignature || code == .invalidToken))
        if tokenRefused {
            // The token is no good (`expired` also ends a membership): one new token is asked
            // for and the room joins again from its position; a second refusal is final.
            var attempt = RoomTable.Attempt(tokenRefused: true, resyncs: record.resyncs)
            switch record.phase {
            case .joining(let current):
                guard !current.tokenRefused else { return [delivery] + fail(room, error, deliver: false) }
                attempt.retries = current.retries
            case .joined:
                break
            case .failed:
                return [delivery]
            }
            table.update(room) { record in
                record.token = nil
                record.phase = .joining(attempt)
            }
            return [delivery] + startJoin(room, now: now)
        }
        if joining, code == .rateLimited || code == .storeFull {
            let retries: Int
            switch record.phase {
            case .joining(let attempt): retries = attempt.retries
            case .joined(let membership): retries = membership.retries
            case .failed: return [delivery]
            }
            guard retries < Self.maxJoinRetries else { return [delivery] + fail(room, error, deliver: false) }
            table.update(room) { record in
                record.updateAttempt { attempt in
                    attempt.retries += 1
                    attempt.step = .waiting
                }
                record.updateMembership { membership in
                    membership.retries += 1
                    membership.rejoin = .putOff
                }
            }
            return [delivery, .schedule(.roomRetry(room: room), at: now + Self.retryDelay(afterRetries: retries))]
        }
        if case .joined(let membership) = record.phase {
            switch code {
            case .resync:
                // The room's stream changed under the membership and the server sends nothing
                // more until a rejoin: one is always made (not counted against the holes'
                // budget), unless one is on its way already.
                guard membership.rejoin == nil else { return [delivery] }
                table.update(room) { $0.updateMembership { $0.resyncs = 0 } }
                return [delivery] + resync(room, now: now)
            case .notJoined:
                // The server lost our membership (its state was reset): rejoin from the position.
                return [delivery] + resync(room, now: now)
            default:
                // A refused send or refresh, or a refused rejoin of a member: the membership stands.
                return [delivery]
            }
        }
        guard joining else { return [delivery] }
        return [delivery] + fail(room, error, deliver: false)
    }

    mutating func historyAnswered(_ room: String, text: String, record: RoomTable.Record) -> [Action] {
        guard let page = StrictJSON.parse(text).flatMap(RoomHistoryFrame.init) else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "a room_history for \(room) that is not a page, ignored"))]
        }
        guard page.request.hasPrefix("h"), let request = UInt64(page.request.dropFirst()),
              let entry = requests.history[request], entry.room == room else {
            return [.report(RealtimeError(kind: .protocolViolation, message: "a room_history answer to no request of this client, ignored"))]
        }
        requests.history[request] = nil
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
    mutating func historyTimedOut(request: UInt64) -> [Action] {
        guard requests.history.removeValue(forKey: request) != nil else { return [] }
        return [.finishHistory(request, .failure(RoomError(.timedOut, "no history page within \(configuration.authTimeout)")))]
    }
}
