import Foundation
import RealtimeProtocol

/// Rooms' steps shared by clients' requests and the HTTP API (docs/rooms-protocol.md): data
/// checks, publishing (kept, then delivered here or through the cluster's bus), history pages,
/// leaving, delivery to members, and the once-a-second sweep of counts and expired tokens.
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
    /// everyone's position). Called under the lock.
    @discardableResult
    func publishRoom(app: RealtimeApp, room name: String, event: String, data: String, from: String?, rule given: RoomRule?, in state: inout State) throws(RoomError) -> (epoch: String, record: RoomEventRecord) {
        let rule = given ?? state.rooms[app.id]?[name]?.rule ?? state.knownRules[app.id]?[name]?.rule ?? configurationStorage.defaultRoomRule
        if given != nil {
            // The app's server speaks for the backend now: its rule replaces any token's, and
            // no token issued before it replaces this one.
            let current = state.rooms[app.id]?[name]?.ruleIssuedAt ?? state.knownRules[app.id]?[name]?.issuedAt ?? 0
            var record = RoomRuleRecord(rule: rule, issuedAt: max(wallSeconds(), current))
            do {
                record = try roomStore.settleRule(app: app.id, room: name, offered: record, force: true, now: wallMilliseconds())
            } catch {
                throw RoomError(.storeFull, error.description)
            }
            rememberRule(record, room: name, app: app.id, in: &state)
        }
        let kept: (epoch: String, record: RoomEventRecord)
        do {
            kept = try roomStore.append(app: app.id, room: name, event: event, data: data, from: from, rule: rule, at: wallMilliseconds())
        } catch {
            throw RoomError(.storeFull, error.description)
        }
        // With a fan-out the store handed the event to the bus, which brings it back to every
        // node following the room, this one too.
        if configurationStorage.fanout == nil { deliverKept(kept.record, room: name, app: app.id, in: state) }
        if rule.webhook {
            webhook(app, .init(name: "room_event", room: name, userID: from, event: event, data: data, id: kept.record.id, at: kept.record.at))
        }
        return kept
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
        if state.knownRules[app]?[room] == nil, (state.knownRules[app]?.count ?? 0) >= Self.maxKnownRules,
           let evicted = state.knownRules[app]?.keys.first {
            state.knownRules[app]?[evicted] = nil
        }
        state.knownRules[app, default: [:]][room] = record
    }

    /// Most rooms per app whose rule the hub remembers after their last member left.
    static let maxKnownRules = 100_000

    /// Removes a connection from a room; a presence user's last socket leaving is announced.
    func leaveRoom(_ name: String, socketID: String, app: String, in state: inout State) {
        guard var room = state.rooms[app]?[name], let membership = room.members.removeValue(forKey: socketID) else { return }
        state.connections[socketID]?.rooms.remove(name)
        room.order.removeAll { $0 == socketID }
        let key = Room.userKey(membership.user, socketID: socketID)
        room.users[key]?.remove(socketID)
        var departed = false
        var announceHere = true
        if room.users[key]?.isEmpty == true {
            room.users[key] = nil
            if room.rule.presence, let user = membership.user {
                let verdict = clusterPresence(joined: false, topic: .room(app: app, room: name), user: user, info: nil, excluding: socketID)
                departed = verdict.isChange
                announceHere = verdict == .announceHere
            }
        }
        room.countDirty = true
        if room.order.isEmpty {
            state.rooms[app]?[name] = nil
            configurationStorage.fanout?.unfollow(.room(app: app, room: name))
            rememberRule(RoomRuleRecord(rule: room.rule, issuedAt: room.ruleIssuedAt), room: name, app: app, in: &state)
        } else {
            state.rooms[app]?[name] = room
        }
        if departed, let user = membership.user {
            if announceHere { broadcastRoom(RoomSystemEvent.leave, data: Self.memberJSON(user, info: nil), room: name, app: app, excluding: socketID, in: state) }
            if let app = self.app(id: app) { webhook(app, .init(name: "room_member_removed", room: name, userID: user)) }
        }
    }

    /// Queues a kept event to the room's members on this node, in join order, but those whose
    /// join already brought them past it and those waiting to resync.
    func deliverKept(_ record: RoomEventRecord, room name: String, app: String, in state: State) {
        guard let room = state.rooms[app]?[name] else { return }
        var frames: [ProtocolNamespace: String] = [:]
        for socketID in room.order {
            guard let membership = room.members[socketID], !membership.stale, membership.after < record.id,
                  let connection = state.connections[socketID] else { continue }
            let frame = frames[connection.namespace] ?? RoomFrame.event(record, room: name, namespace: connection.namespace)
            frames[connection.namespace] = frame
            connection.output.send(text: frame)
        }
    }

    func broadcastRoom(_ event: String, data: String, room name: String, app: String, excluding: String?, in state: State) {
        guard let room = state.rooms[app]?[name] else { return }
        for socketID in room.order where socketID != excluding {
            guard let connection = state.connections[socketID] else { continue }
            connection.output.send(text: RoomFrame.system(event, data: data, room: name, namespace: connection.namespace))
        }
    }

    /// Once a second: `count` to rooms whose membership changed, `expired` to members whose
    /// token ran out without a refresh (they leave the room).
    func sweepRooms(in state: inout State) {
        let seconds = wallSeconds()
        for (app, rooms) in state.rooms {
            for (name, room) in rooms {
                for (socketID, membership) in room.members where membership.expiresAt <= seconds {
                    if let connection = state.connections[socketID] {
                        connection.output.send(text: RoomFrame.error(.expired, "the token expired without a refresh", room: name, namespace: connection.namespace))
                    }
                    leaveRoom(name, socketID: socketID, app: app, in: &state)
                }
                guard var current = state.rooms[app]?[name], current.countDirty else { continue }
                current.countDirty = false
                let changed = current.lastCount != current.users.count
                current.lastCount = current.users.count
                state.rooms[app]?[name] = current
                guard changed else { continue }
                broadcastRoom(RoomSystemEvent.count, data: #"{"n":\#(current.users.count)}"#, room: name, app: app, excluding: nil, in: state)
            }
        }
    }

    func wallMilliseconds() -> Int64 { configurationStorage.wallClock() }
    func wallSeconds() -> Int { Int(configurationStorage.wallClock() / 1000) }
}

