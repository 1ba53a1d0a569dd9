import Foundation
import RealtimeProtocol

/// Rooms' steps shared by clients' requests and the HTTP API (docs/rooms-protocol.md): data
/// checks, publishing (kept on the lane, then delivered here or through the cluster's bus),
/// history pages, leaving, delivery to members, and the once-a-second sweep of counts and
/// expired tokens.
extension RealtimeHub {
    /// Validates event data: JSON text of at most 10 KiB; in a sealed room, `{nonce, ciphertext}`.
    static func checkRoomData(_ data: String, rule: RoomRule) throws(RoomError) {
        guard data.utf8.count <= maxRoomDataSize else { throw RoomError(.badRequest, "data larger than \(maxRoomDataSize) bytes") }
        // Kept and relayed as the text it is: it must be JSON by RFC 8259's grammar, not by
        // Foundation's more lenient parser (trailing commas, a byte-order mark).
        guard StrictJSON.isValid(data) else { throw RoomError(.badRequest, "data is not JSON text (RFC 8259)") }
        if rule.sealed {
            let value = StrictJSON.parse(data)
            guard value?["nonce"]?.string != nil, value?["ciphertext"]?.string != nil else {
                throw RoomError(.badRequest, "a sealed room's data is {\"nonce\", \"ciphertext\"}")
            }
        }
    }

    /// Keeps an event and delivers it to every member, sender included (its id is part of
    /// everyone's position). Runs on the lane (`RoomLane`): the store is called with no lock
    /// held; on one node the delivery follows in the same step of the lane, so members get
    /// events in id order. Performs what `RoomPublish` decides, and decides nothing itself.
    ///
    /// - Parameters:
    ///   - declared: the room's rule as the app's server declares it (it replaces the rule the
    ///     hub knows), or `nil` for the one the hub knows (`Configuration.defaultRoomRule`
    ///     for a room it knows nothing of).
    ///   - member: the sending member's socket id (its send was checked when it arrived), or
    ///     `nil` for the app's server (whose data is checked against the rule here).
    /// - Throws: `RoomError` `bad_request` (data), `not_joined` (the member left, or was kicked,
    ///   while its send waited), `store_full` (the store refused or failed).
    @discardableResult
    func keepRoomEvent(app: RealtimeApp, room name: String, event: String, data: String, from: String?, declared: RoomRule?, member: String?) throws(RoomError) -> (epoch: String, record: RoomEventRecord) {
        lane.meter(data.utf8.count + event.utf8.count)
        var publish = try withState { state throws(RoomError) in
            try publishStarts(app: app, room: name, event: event, data: data, from: from, declared: declared, member: member, in: state)
        }
        var request = try publish.start(now: wallSeconds())
        while true {
            switch request {
            case .settleRule(let offered, let force):
                var settled: RoomRuleRecord?
                do throws(RoomStoreError) {
                    settled = try roomStore.settleRule(app: app.id, room: name, offered: offered, force: force, now: wallMilliseconds())
                } catch {
                    // The store's own rule is asked for only if it has one: without an answer
                    // the known rule stands. A declared rule must be settled.
                    guard !force else { throw RoomError(.storeFull, error.description) }
                }
                if force, let settled {
                    withState { state in rememberRule(settled, room: name, app: app.id, in: &state) }
                    request = publish.declaredRule(settled)
                } else {
                    if let record = publish.storeRule(settled) { withState { state in rememberRule(record, room: name, app: app.id, in: &state) } }
                    request = try publish.next(now: wallSeconds())
                }
            case .append(let rule, let seen):
                let kept: (epoch: String, record: RoomEventRecord)
                do throws(RoomStoreError) {
                    kept = try roomStore.append(app: app.id, room: name, event: event, data: data, from: from, rule: rule, at: wallMilliseconds(), seen: seen)
                } catch {
                    throw RoomError(.storeFull, error.description)
                }
                withState { publishKept(publish, rule: rule, kept, in: &$0) }
                return kept
            }
        }
    }

    /// A publish starts, under the lock: a member's send must still come from a member; the
    /// rule the hub knows for the room (its members', else the one remembered, else
    /// `Configuration.defaultRoomRule` with `issuedAt` 0), and the room's cursor.
    ///
    /// - Throws: `RoomError` `not_joined` for a member that left, or was kicked, while its send
    ///   waited.
    func publishStarts(app: RealtimeApp, room name: String, event: String, data: String, from: String?, declared: RoomRule?, member: String?,
                       in state: State) throws(RoomError) -> RoomPublish {
        if let member, state.rooms[app.id]?[name]?.members[member] == nil { throw RoomError(.notJoined, "not joined") }
        let known: RoomRuleRecord
        if let room = state.rooms[app.id]?[name] {
            known = RoomRuleRecord(rule: room.rule, issuedAt: room.ruleIssuedAt)
        } else {
            known = state.knownRules[app.id]?[name] ?? RoomRuleRecord(rule: configurationStorage.defaultRoomRule, issuedAt: 0)
        }
        return RoomPublish(app: app, room: name, event: event, data: data, from: from, declared: declared, member: member, known: known,
                           seen: state.rooms[app.id]?[name]?.cursor)
    }

    /// The store kept a publish's event, under the lock: on one node it is delivered to the
    /// members (with a fan-out the store handed it to the bus, which brings it back to every
    /// node following the room, this one too); a rule with webhooks queues `room_event`.
    func publishKept(_ publish: RoomPublish, rule: RoomRule, _ kept: (epoch: String, record: RoomEventRecord), in state: inout State) {
        if configurationStorage.fanout == nil { deliverKept(kept.record, epoch: kept.epoch, room: publish.room, app: publish.app.id, in: &state) }
        if rule.webhook {
            state.webhook(publish.app, .init(name: "room_event", room: publish.room, userID: publish.from, event: publish.event, data: publish.data,
                                             id: kept.record.id, at: kept.record.at))
        }
    }

    func historyPage(app: String, room: String, rule: RoomRule, before: UInt64?, limit: Int) throws(RoomError) -> RoomStorePage {
        guard rule.history > 0 else { throw RoomError(.noHistory, "this room keeps no history") }
        do {
            return try roomStore.page(app: app, room: room, before: before, limit: limit, now: wallMilliseconds())
        } catch {
            throw RoomError(.storeFull, error.description)
        }
    }

    func rememberRule(_ record: RoomRuleRecord, room: String, app: String, in state: inout State) {
        state.rooms[app]?[room]?.rule = record.rule
        state.rooms[app]?[room]?.ruleIssuedAt = record.issuedAt
        state.knownRules[app, default: KnownRoomRules(limit: Self.maxKnownRules)].remember(record, for: room)
    }

    /// Most rooms per app whose rule the hub remembers after their last member left.
    static let maxKnownRules = 100_000

    /// Removes a connection from a room (its membership, and its join on the way if any); a
    /// presence user's last socket leaving is announced.
    func leaveRoom(_ name: String, socketID: String, app: String, in state: inout State) {
        guard state.rooms[app]?[name]?.members[socketID] != nil || state.rooms[app]?[name]?.pending[socketID] != nil,
              // Taken out while it changes (put back below): a copy left in the dictionary would
              // make every change copy the room's lists.
              var room = state.rooms[app]?.removeValue(forKey: name) else { return }
        room.pending[socketID] = nil
        guard let membership = room.members.removeValue(forKey: socketID) else {
            state.rooms[app]?[name] = room
            state.connections[socketID]?.rooms.remove(name)
            return closeRoomIfEmpty(name, app: app, in: &state)
        }
        state.connections[socketID]?.rooms.remove(name)
        note(.leave, app: app, socketID: socketID, room: name, userID: membership.user, in: &state)
        room.order.remove(socketID)
        let key = Room.userKey(membership.user, socketID: socketID)
        room.users[key]?.remove(socketID)
        var departed = false
        if room.users[key]?.isEmpty == true {
            room.users[key] = nil
            if room.rule.presence, let user = membership.user, let record = self.app(id: app) {
                let event = WebhookEvent(name: "room_member_removed", room: name, userID: user)
                departed = clusterPresence(joined: false, topic: .room(app: app, room: name), user: user, info: nil, excluding: socketID, app: record, webhook: event, in: &state)
            }
        }
        room.countDirty = true
        state.rooms[app]?[name] = room
        closeRoomIfEmpty(name, app: app, in: &state)
        if departed, let user = membership.user {
            broadcastRoom(RoomSystemEvent.leave, data: Self.memberJSON(user, info: nil), room: name, app: app, excluding: socketID, in: &state)
            if let app = self.app(id: app) { state.webhook(app, .init(name: "room_member_removed", room: name, userID: user)) }
        }
    }

    /// Closes a room with no member and no join on its way: no longer followed, its rule
    /// remembered.
    func closeRoomIfEmpty(_ name: String, app: String, in state: inout State) {
        guard let room = state.rooms[app]?[name], room.order.isEmpty, room.pending.isEmpty else { return }
        state.rooms[app]?[name] = nil
        if configurationStorage.fanout != nil {
            state.presenceReads[.room(app: app, room: name)]?.invalidate()
            state.queue(.unfollow(.room(app: app, room: name)))
        }
        rememberRule(RoomRuleRecord(rule: room.rule, issuedAt: room.ruleIssuedAt), room: name, app: app, in: &state)
    }

    /// Queues a kept event of `epoch` to the room's members on this node, in join order, but
    /// those whose join already brought them past it and those waiting to resync; a join on
    /// its way keeps it for after its replay (`PendingJoin`).
    func deliverKept(_ record: RoomEventRecord, epoch: String, room name: String, app: String, in state: inout State) {
        metrics.eventsPublished.bump()
        guard var room = state.rooms[app]?[name] else {
            note(.roomEvent, app: app, room: name, userID: record.from, event: record.event,
                              detail: "id \(record.id), epoch \(epoch), no member on this node", in: &state)
            return
        }
        if configurationStorage.fanout == nil {
            if let known = room.epoch, known != epoch {
                resyncMembers(&room, name: name, why: "the room's history was lost (a new epoch)", in: &state)
            }
            room.epoch = epoch
            state.rooms[app]?[name] = room
        }
        var frames: [ProtocolNamespace: String] = [:]
        var delivered = 0
        for socketID in room.recipients(of: record.id) {
            guard let connection = state.connections[socketID] else { continue }
            let frame = frames[connection.namespace] ?? RoomFrame.event(record, room: name, namespace: connection.namespace)
            frames[connection.namespace] = frame
            state.send(frame, to: connection)
            delivered += 1
        }
        state.rooms[app]?[name]?.lastID = record.id
        note(.roomEvent, app: app, room: name, userID: record.from, event: record.event,
                          detail: "id \(record.id), epoch \(epoch), \(delivered == 1 ? "1 delivery" : "\(delivered) deliveries")", in: &state)
        // On one node a join's read and finish are one step of the lane, as every delivery is:
        // nothing to keep.
        guard configurationStorage.fanout != nil else { return }
        for socketID in room.pending.keys {
            state.rooms[app]?[name]?.pending[socketID]?.keep(record, epoch: epoch, limit: Self.maxPendingJoinBytes)
        }
    }

    func broadcastRoom(_ event: String, data: String, room name: String, app: String, excluding: String?, in state: inout State) {
        guard let room = state.rooms[app]?[name] else { return }
        for socketID in room.order where socketID != excluding {
            guard let connection = state.connections[socketID] else { continue }
            state.send(RoomFrame.system(event, data: data, room: name, namespace: connection.namespace), to: connection)
        }
    }

    /// Once a second: `count` to rooms whose membership changed, `expired` to members whose
    /// token ran out without a refresh (they leave the room).
    func sweepRooms(in state: inout State) {
        let seconds = wallSeconds()
        for (app, rooms) in state.rooms {
            for (name, room) in rooms {
                for socketID in room.expiredMembers(at: seconds) {
                    if let connection = state.connections[socketID] {
                        state.send(RoomFrame.error(.expired, "the token expired without a refresh", room: name, namespace: connection.namespace), to: connection)
                    }
                    leaveRoom(name, socketID: socketID, app: app, in: &state)
                }
                guard let count = state.rooms[app]?[name]?.countToTell() else { continue }
                broadcastRoom(RoomSystemEvent.count, data: #"{"n":\#(count)}"#, room: name, app: app, excluding: nil, in: &state)
            }
        }
    }

    func wallMilliseconds() -> Int64 { configurationStorage.wallClock() }
    func wallSeconds() -> Int { Int(configurationStorage.wallClock() / 1000) }
}

