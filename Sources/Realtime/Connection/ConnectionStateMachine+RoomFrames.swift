import Foundation
import RealtimeProtocol

/// Room frames on the machine: kept events (position, duplicates, holes), the room's own events
/// (`joined`, members, `count`, `kicked`, `error`) and history pages.
extension ConnectionStateMachine {
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
        // The record is read in place, not copied, on this per-event path.
        guard let room = message.channel, let phase = rooms.phase(of: room) else {
            // A frame for a room the app left: events in flight when it left are not wanted.
            return
        }
        guard let text = message.data else {
            output.append(.report(RealtimeError(kind: .protocolViolation, message: "\(message.event) for \(room) without data, ignored")))
            return
        }
        if name == .roomHistory {
            guard let record = rooms[room] else { return }
            return output.append(contentsOf: historyAnswered(room, text: text, record: record))
        }
        guard let frame = StrictJSON.roomEvent(text).map(RoomEventFrame.init) else {
            output.append(.report(RealtimeError(kind: .protocolViolation, message: "a room_event for \(room) that is not {event, data, meta?}, ignored")))
            return
        }
        switch phase {
        case .joining(let joining) where joining == generation: break
        case .joined(let joined) where joined == generation: break
        default: return // an answer to a join made on an older socket, or a room that failed
        }
        guard let meta = frame.meta else {
            guard let record = rooms[room] else { return }
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
        switch rooms.admit(room, id: meta.id, maxResyncs: Self.maxResyncs) {
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
    /// replay and `joined`, without a second membership). Bounded: after
    /// `maxResyncs` in a row the room is told it was not recovered.
    mutating func resync(_ room: String, now: ContinuousClock.Instant) -> [Action] {
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
        case RoomSystemEvent.gap:
            return gap(room, data: data, record: record)
        default:
            return [.report(RealtimeError(kind: .protocolViolation, message: "a room_event \(frame.event.prefix(64)) for \(room) without meta, ignored"))]
        }
    }

    /// `gap`, before the replay of a rejoin from the position (docs/rooms-protocol.md
    /// "Replay"): the room is told exactly which events will not come (`not_recovered` with the
    /// gap), and the position moves past them so the replay that follows is in order.
    mutating func gap(_ room: String, data: JSONValue, record: RoomTable.Record) -> [Action] {
        let awaited: Bool
        switch record.phase {
        case .joining: awaited = true
        case .joined: awaited = record.resyncing
        default: awaited = false
        }
        guard awaited, let position = record.position else {
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
        rooms.update(room) { record in
            record.position = resume
            record.gapTold = true
        }
        return [notRecovered(room, reason: gap.reason, gap: gap)]
    }

    mutating func joined(_ room: String, data: JSONValue, record: RoomTable.Record, generation: UInt64, now: ContinuousClock.Instant) -> [Action] {
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
            if data["recovered"]?.bool == false, !record.gapTold {
                notRecovered = data["reason"]?.string ?? "unknown"
            } else if record.gapTold, position == current {
                // Told already, with its ids, when the server sent the gap before the replay.
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
            record.gapTold = false
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
        rooms.update(room) { $0.error = error }
        return .deliverRoom(RoomDelivery(room: room, event: RoomSystemEvent.error, data: error.json(reason: reason), meta: .system))
    }

    /// Most presence members a `joined` may list (the server's cap is 1,000).
    static let maxRoomMembers = 10_000

    mutating func roomError(_ room: String, data: JSONValue, record: RoomTable.Record, now: ContinuousClock.Instant) -> [Action] {
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
        if code == .resync, record.state == .joined {
            // The room's stream changed under the membership and the server sends nothing more
            // until a rejoin: one is always made (not counted against the holes' budget), unless
            // one is on its way already.
            guard !record.resyncing else { return [delivery] }
            rooms.update(room) { $0.resyncs = 0 }
            return [delivery] + resync(room, now: now)
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

    mutating func historyAnswered(_ room: String, text: String, record: RoomTable.Record) -> [Action] {
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
