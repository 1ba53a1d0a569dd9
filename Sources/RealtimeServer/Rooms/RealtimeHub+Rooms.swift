import Foundation
import RealtimeProtocol

/// Rooms on the hub (docs/rooms-protocol.md): join with a token and an optional position,
/// replay then live with no gap (both happen under the hub's lock, in id order), presence by
/// user, capacity, member sends, history pages.
extension RealtimeHub {
    /// One connection's membership of a room.
    struct RoomMembership {
        /// The user the token vouched for (or the connection's signed-in user), `nil` if anonymous.
        var user: String?
        var info: JSONValue?
        /// The token's `exp`, seconds since 1970.
        var expiresAt: Int
        /// The id the member's join brought it to (its replay's end): kept events up to it are
        /// not delivered to it again.
        var after: UInt64 = 0
        /// The room's stream changed under the member (another epoch, or a gap the store could
        /// no longer fill): nothing is delivered to it until it rejoins (told with `resync`).
        var stale = false
    }

    /// A room with members on this node.
    struct Room {
        var rule: RoomRule
        /// When the backend issued `rule` (`RoomRuleRecord.issuedAt`): only a token issued later
        /// replaces it.
        var ruleIssuedAt: Int
        /// Socket ids in join order (the order of delivery).
        var order: [String] = []
        var members: [String: RoomMembership] = [:]
        /// Sockets per user key (anonymous sockets count as one user each).
        var users: [String: Set<String>] = [:]
        var countDirty = false
        /// The last `count` sent, so that one is sent only when the number changed.
        var lastCount: Int?
        /// With a fan-out: the position this node delivered the room's members up to (ids
        /// arrive from the bus in order; a skip is caught up from the store).
        var cursor: RoomPosition?
        /// With a fan-out: when the bus last brought an event of the room, or the room was last
        /// compared with the store (`RealtimeHub.fanoutCheckInterval`).
        var checkedAt: ContinuousClock.Instant?
        /// With a fan-out, a presence room's members as this node's members were told (as
        /// `Channel.clusterView`).
        var clusterView: [String: JSONValue?]?
        /// Bytes of the last `joined` frame built for the room (a presence room's lists its
        /// members): what the next join is charged before it builds another.
        var joinedBytes = 0

        static func userKey(_ user: String?, socketID: String) -> String { user ?? "\u{0}\(socketID)" }

        /// A room with no members yet, under `record`'s rule.
        init(record: RoomRuleRecord) {
            rule = record.rule
            ruleIssuedAt = record.issuedAt
        }
    }

    /// Largest presence `info` in a token, in bytes of JSON (Pusher's `user_info` limit).
    static let maxMemberInfoSize = 1024
    /// Most users in a presence room (its `joined` lists them all).
    static let maxPresenceMembers = 1000

    /// Most rooms one connection may join.
    static let maxRoomsPerConnection = 100
    /// Largest replay one join may carry, in bytes of frames: a larger one is reported as
    /// `recovered: false, reason: too_large` and nothing is replayed (never cut).
    static let maxReplayBytes = 2 * 1024 * 1024
    /// Bytes of replay, history and `joined` frames one connection may ask for per second:
    /// what one peer can make the server build and queue under the hub's lock. Below the 4 MiB
    /// a connection may have queued (`WebSocketOutput.maxBufferedBytes`), so a client resuming
    /// several rooms at once is answered `rate_limited` (and retries), never dropped (3 MiB).
    static let readBytesPerSecond = 3 * 1024 * 1024

    /// Whether `bytes` more fit the connection's read budget this second (any one request fits
    /// a fresh second: a join's replay and members list come to at most about 3.1 MiB, below
    /// the 4 MiB a connection may have queued). Every request is checked for the most it may
    /// cost before any of it is read or built, then charged what it did cost.
    func hasReadBudget(_ bytes: Int, connection: Connection, in state: State) -> Bool {
        readBudgetLeft(connection, in: state).map { bytes <= $0 } ?? true
    }

    /// Bytes left in the connection's read budget this second, or `nil` for a fresh second
    /// (where any one request fits).
    func readBudgetLeft(_ connection: Connection, in state: State) -> Int? {
        let spent = (state.connections[connection.socketID]?.roomReadWindow ?? connection.roomReadWindow).spent(at: now())
        return spent == 0 ? nil : max(0, Self.readBytesPerSecond - spent)
    }

    /// Charges frame bytes actually queued to the connection's read budget.
    func chargeReadBudget(_ bytes: Int, connection: Connection, in state: inout State) {
        state.connections[connection.socketID]?.roomReadWindow.spend(bytes, at: now())
    }

    /// Largest room event `data`, in bytes of JSON text (Pusher's event limit).
    static let maxRoomDataSize = 10 * 1024
    /// Largest record a room keeps, in bytes as `RoomEventRecord.size` counts them: the most
    /// data, an event name of 200 bytes, a sender of 200 and 64 more.
    static let maxRecordSize = maxRoomDataSize + 200 + 200 + 64
    /// The answer to a client whose request does not fit its read budget.
    static let readBudgetRefusal = RoomError(.rateLimited, "more than \(readBytesPerSecond) bytes of replay, history and members a second")

    // MARK: - Client requests

    func handleRoom(_ name: ProtocolEventName, _ message: RealtimeMessage, from connection: Connection, at instant: ContinuousClock.Instant, in state: inout State) -> Outcome {
        if name == .roomJoin || name == .roomLeave || name == .roomRefresh || name == .roomHistory {
            let spent = state.connections[connection.socketID]?.roomRequestWindow.spend(1, at: instant) ?? 1
            if spent > configurationStorage.roomRequestsPerSecond {
                let text = "more than \(configurationStorage.roomRequestsPerSecond) room requests a second"
                if name == .roomHistory, let request = try? message.decodeData(RoomHistoryRequest.self) {
                    connection.output.send(text: RoomFrame.historyError(.rateLimited, text, request: String(request.request.prefix(64)), room: request.room, namespace: connection.namespace))
                } else {
                    let room = (try? message.decodeData(RoomLeaveRequest.self))?.room ?? ""
                    connection.output.send(text: RoomFrame.error(.rateLimited, text, room: room, namespace: connection.namespace))
                }
                return .handled
            }
        }
        do {
            switch name {
            case .roomJoin: return roomJoin(try message.decodeData(RoomJoinRequest.self), connection: connection, in: &state)
            case .roomLeave:
                let request = try message.decodeData(RoomLeaveRequest.self)
                leaveRoom(request.room, socketID: connection.socketID, app: connection.app.id, in: &state)
                return .handled
            case .roomRefresh: return roomRefresh(try message.decodeData(RoomRefreshRequest.self), connection: connection, in: &state)
            case .roomSend: return roomSend(try message.decodeData(RoomSendRequest.self), connection: connection, at: instant, in: &state)
            case .roomHistory: return roomHistory(try message.decodeData(RoomHistoryRequest.self), connection: connection, in: &state)
            default: return rejection(connection, "unknown event \(message.event.prefix(60))", code: nil, in: &state)
            }
        } catch {
            return rejection(connection, error.description, code: nil, in: &state)
        }
    }

    /// The claims of a token valid for `room` now, or the error code to answer.
    func verifyRoomToken(_ token: String, room: String, app: RealtimeApp) -> Result<RoomClaims, RoomError> {
        guard RoomName.isValid(room) else { return .failure(RoomError(.invalidRoom, "invalid room name")) }
        let claims: RoomClaims
        do {
            claims = try JSONWebToken.verify(token, secret: app.secret, as: RoomClaims.self)
        } catch .badSignature {
            return .failure(RoomError(.badSignature, "the token is not signed with this app's secret"))
        } catch {
            return .failure(RoomError(.invalidToken, error.description))
        }
        let rule = claims.rule ?? RoomRule()
        guard rule.isValid else { return .failure(RoomError(.invalidToken, "the token's rule is out of range")) }
        if let info = claims.info {
            guard ((try? RealtimeMessage.jsonText(info))?.utf8.count ?? .max) <= Self.maxMemberInfoSize else {
                return .failure(RoomError(.invalidToken, "the token's info is larger than \(Self.maxMemberInfoSize) bytes"))
            }
        }
        // Only a public grant may name a pattern; any other token names exactly one room.
        let matches = claims.room == room || (rule.isPublic && RoomName.match(room, pattern: claims.room) != nil)
        guard matches else { return .failure(RoomError(.forbidden, "the token is for another room")) }
        guard claims.expiresAt > wallSeconds() else { return .failure(RoomError(.expired, "the token has expired")) }
        return .success(claims)
    }

    private func roomJoin(_ request: RoomJoinRequest, connection: Connection, in state: inout State) -> Outcome {
        let namespace = connection.namespace
        let roomName = request.room
        func refuse(_ refusal: RoomError) -> Outcome {
            connection.output.send(text: RoomFrame.error(refusal.code, refusal.message, room: roomName, namespace: namespace))
            return .handled
        }
        let claims: RoomClaims
        switch verifyRoomToken(request.token, room: roomName, app: connection.app) {
        case .success(let verified): claims = verified
        case .failure(let refusal): return refuse(refusal)
        }
        let alreadyJoined = connection.rooms.contains(roomName)
        guard alreadyJoined || connection.rooms.count < Self.maxRoomsPerConnection else {
            return refuse(RoomError(.tooManyRooms, "at most \(Self.maxRoomsPerConnection) rooms per connection"))
        }
        let user = claims.subject ?? connection.userID
        let userKey = Room.userKey(user, socketID: connection.socketID)
        // An `iat` ahead of this server's clock counts as now: a token from a backend whose
        // clock runs ahead cannot pin a rule against the tokens issued after it.
        let offered = RoomRuleRecord(rule: claims.rule ?? RoomRule(), issuedAt: min(claims.issuedAt ?? 0, wallSeconds()))
        var room = state.rooms[connection.app.id]?[roomName]
            ?? Room(record: state.knownRules[connection.app.id]?[roomName] ?? offered)
        // A rejoin is the same membership: it cannot change who the member is (that would
        // leave the first user counted, present and unkickable).
        if alreadyJoined, let existing = room.members[connection.socketID], existing.user != user {
            return refuse(RoomError(.forbidden, "already joined as another user: leave first"))
        }
        // Only a token issued after the room's rule replaces it: a member holding an older
        // token (an hour's, or a public grant's day) cannot unseal the room, turn its presence
        // off or lift its cap (docs/rooms-protocol.md "Where the rules travel").
        if offered.issuedAt > room.ruleIssuedAt {
            room.rule = offered.rule
            room.ruleIssuedAt = offered.issuedAt
        }
        // What this join may cost, bounded before the store is asked anything or a frame is
        // built: a presence room's `joined` lists its members (as large as the last one built; a
        // rejoin costs as much as a join), and the store reads a replay only up to what is left
        // of the budget.
        let budgetLeft = readBudgetLeft(connection, in: state)
        if let budgetLeft, budgetLeft < room.joinedBytes + (request.since == nil ? 0 : 1) { return refuse(Self.readBudgetRefusal) }
        let replayLimit = min(Self.maxReplayBytes, budgetLeft.map { $0 - room.joinedBytes } ?? .max)
        // A store the cluster's nodes share has the last word: it keeps the rule issued last
        // whichever node saw it.
        do {
            let settled = try roomStore.settleRule(app: connection.app.id, room: roomName, offered: RoomRuleRecord(rule: room.rule, issuedAt: room.ruleIssuedAt), force: false, now: wallMilliseconds())
            room.rule = settled.rule
            room.ruleIssuedAt = settled.issuedAt
        } catch {
            return refuse(RoomError(.storeFull, error.description))
        }
        let rule = room.rule
        let capacity = min(rule.maxMembers ?? .max, rule.presence ? Self.maxPresenceMembers : .max)
        // A presence room on a cluster counts every node's members as this node was told of
        // them; another room counts this node's (no registry holds the others').
        let present = max(room.users.count, room.clusterView?.count ?? 0)
        let member = room.users[userKey] != nil || user.map { room.clusterView?[$0] != nil } == true
        if !member, present >= capacity {
            return refuse(RoomError(.full, "the room has its \(capacity) members"))
        }

        // Replay, then `joined`, then live: all under the hub's lock, so no event falls between.
        let now = wallMilliseconds()
        var replayFrames: [String] = []
        var recovered: Bool?
        var reason: RoomUnrecoverableReason?
        let position: RoomPosition
        do {
            if let since = request.since {
                switch try roomStore.replay(app: connection.app.id, room: roomName, after: since, now: now, maxBytes: replayLimit) {
                case .events(let records, let current):
                    position = current
                    replayFrames.reserveCapacity(records.count)
                    var built = 0
                    for record in records {
                        let frame = RoomFrame.event(record, room: roomName, namespace: namespace, replayed: true)
                        built += frame.utf8.count
                        // Escaping can make frames larger than the records: stop building at the limit.
                        guard built <= Self.maxReplayBytes else { break }
                        replayFrames.append(frame)
                    }
                    if built > Self.maxReplayBytes {
                        replayFrames = []
                        recovered = false
                        reason = .tooLarge
                    } else {
                        recovered = true
                    }
                    chargeReadBudget(min(built, Self.maxReplayBytes), connection: connection, in: &state)
                case .unrecoverable(let why, let current):
                    // The store read up to the limit before it could say so.
                    if why == .tooLarge { chargeReadBudget(replayLimit, connection: connection, in: &state) }
                    // Past what was left of the budget, not past a replay's limit: asked again
                    // in a later second, the answer may be the replay.
                    if why == .tooLarge, replayLimit < Self.maxReplayBytes { return refuse(Self.readBudgetRefusal) }
                    position = current
                    recovered = false
                    reason = why
                }
            } else {
                position = try roomStore.position(app: connection.app.id, room: roomName, now: now)
            }
        } catch {
            return refuse(RoomError(.storeFull, error.description))
        }

        if configurationStorage.fanout != nil {
            if let cursor = room.cursor {
                // The store's epoch moved and the bus has not said so yet: the members
                // already here are on the old stream.
                if cursor.epoch != position.epoch {
                    resyncMembers(&room, name: roomName, why: "the room's history was lost (a new epoch)", excluding: connection.socketID, in: state)
                    room.cursor = position
                }
            } else {
                room.cursor = position
                room.checkedAt = self.now()
                configurationStorage.fanout?.follow(.room(app: connection.app.id, room: roomName))
            }
        }
        var announce = false
        var announceHere = true
        if !alreadyJoined {
            state.connections[connection.socketID]?.rooms.insert(roomName)
            room.order.append(connection.socketID)
            if rule.presence, let user, room.users[userKey] == nil {
                let verdict = clusterPresence(joined: true, topic: .room(app: connection.app.id, room: roomName), user: user, info: claims.info, excluding: connection.socketID)
                announce = verdict.isChange
                announceHere = verdict == .announceHere
            }
            room.users[userKey, default: []].insert(connection.socketID)
            room.countDirty = true
        }
        if rule.presence, configurationStorage.fanout != nil, room.clusterView == nil {
            // The cluster's members (this node's when Redis cannot say: the next refresh fixes it).
            if let members = clusterMembers(.room(app: connection.app.id, room: roomName), limit: Self.maxPresenceMembers) {
                room.clusterView = Dictionary(members.map { ($0.user, $0.info) }, uniquingKeysWith: { first, _ in first })
            } else {
                var local: [String: JSONValue?] = [:]
                for membership in room.members.values { if let user = membership.user { local.updateValue(membership.info, forKey: user) } }
                room.clusterView = local
            }
        }
        // On one node every event after the join comes live once; with a fan-out, events up to
        // the join's position may still be on their way from the bus.
        let after = configurationStorage.fanout == nil ? 0 : position.id
        room.members[connection.socketID] = RoomMembership(user: user, info: claims.info, expiresAt: claims.expiresAt, after: after)
        state.rooms[connection.app.id, default: [:]][roomName] = room

        for frame in replayFrames { connection.output.send(text: frame) }
        let joinedFrame = RoomFrame.system(
            RoomSystemEvent.joined, data: joinedJSON(room, own: user.map { ($0, claims.info) }, position: position, recovered: recovered, reason: reason),
            room: roomName, namespace: namespace)
        // A presence room's members list can be large: it counts like replayed events.
        chargeReadBudget(joinedFrame.utf8.count, connection: connection, in: &state)
        state.rooms[connection.app.id]?[roomName]?.joinedBytes = joinedFrame.utf8.count
        connection.output.send(text: joinedFrame)
        if announce, let user {
            let data = Self.memberJSON(user, info: claims.info)
            if announceHere { broadcastRoom(RoomSystemEvent.join, data: data, room: roomName, app: connection.app.id, excluding: connection.socketID, in: state) }
            webhook(connection.app, .init(name: "room_member_added", room: roomName, userID: user))
        }
        return .handled
    }

    private func joinedJSON(_ room: Room, own: (user: String, info: JSONValue?)?, position: RoomPosition, recovered: Bool?, reason: RoomUnrecoverableReason?) -> String {
        var output = #"{"count":\#(room.users.count),"epoch":"#
        RealtimeMessage.appendJSONString(position.epoch, to: &output)
        output += #","id":\#(position.id)"#
        if room.rule.presence, var view = room.clusterView {
            // The view, and the joining user (whose arrival the bus may not have brought yet).
            if let own, view[own.user] == nil { view.updateValue(own.info, forKey: own.user) }
            output += #","members":["#
            output += view.sorted { $0.key < $1.key }.prefix(Self.maxPresenceMembers).map { Self.memberJSON($0.key, info: $0.value) }.joined(separator: ",")
            output += "]"
        } else if room.rule.presence {
            output += #","members":["#
            var first = true
            for (key, sockets) in room.users.sorted(by: { $0.key < $1.key }) {
                guard let socketID = sockets.first, let member = room.members[socketID], let user = member.user, key == user else { continue }
                if !first { output += "," }
                first = false
                output += Self.memberJSON(user, info: member.info)
            }
            output += "]"
        }
        if let reason {
            output += #","reason":"#
            RealtimeMessage.appendJSONString(reason.rawValue, to: &output)
        }
        if let recovered { output += #","recovered":\#(recovered)"# }
        output += "}"
        return output
    }

    static func memberJSON(_ user: String, info: JSONValue?) -> String {
        var output = #"{"id":"#
        RealtimeMessage.appendJSONString(user, to: &output)
        if let info, let text = try? RealtimeMessage.jsonText(info) { output += #","info":\#(text)"# }
        output += "}"
        return output
    }
}
