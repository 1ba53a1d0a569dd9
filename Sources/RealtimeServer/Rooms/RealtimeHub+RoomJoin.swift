import Foundation
import RealtimeProtocol

/// A member's join (docs/rooms-protocol.md "Joining"), in three steps so that no store call
/// runs on the WebSocket service thread or under the hub's lock, with DESIGN.md's
/// recipe for order (follow live first, buffer, read, merge by id):
/// 1. `roomJoin`, on arrival, under the lock: the token and the connection's limits are
///    checked, the room followed, and the join registered pending (`PendingJoin`): from then
///    on what the room delivers waits in it.
/// 2. `performJoin`, on the lane: the read budget is checked, then with no lock held the store
///    settles the room's rule and reads the position, or the replay a page at a time
///    (`streamJoin`, one lane job a page: the pages before the last are sent as they are read,
///    each when the socket has room for it), and the cluster lists a presence room's members.
/// 3. `finishJoin`, under the lock: capacity and membership, then the last page of the replay,
///    `joined`, and what waited past the replay's end, in id order.
extension RealtimeHub {
    /// Bytes of events (`RoomEventRecord.size`) one pending join keeps, what the bus brings
    /// while one page of its replay is read (2 MiB): past it the member is told to resync
    /// right after its `joined`.
    static let maxPendingJoinBytes = 2 * 1024 * 1024
    /// The answer to a room request the lane cannot take (`Configuration.roomLaneBacklog` wait).
    static let laneRefusal = RoomError(.storeFull, "the node's room requests wait for its history store at their bound: try again")

    /// A join on its way through the lane.
    struct JoinJob: Sendable {
        /// Tells this join from a later one of the same connection and room (`PendingJoin`).
        var generation: UInt64
        var socketID: String
        var app: RealtimeApp
        var room: String
        var since: RoomPosition?
        var namespace: ProtocolNamespace

        /// Queues the refusal to the joining connection, if it is still open: through the
        /// outbox, behind the frames decided before it.
        func refuse(_ refusal: RoomError, in state: inout State) {
            guard let connection = state.connections[socketID] else { return }
            state.send(refusalFrame(refusal), to: connection)
        }

        private func refusalFrame(_ refusal: RoomError) -> String {
            RoomFrame.error(refusal.code, refusal.message, room: room, namespace: namespace)
        }
    }

    /// What the lane read for a join, with no lock held.
    struct JoinRead {
        var rule: RoomRuleRecord
        var position: RoomPosition
        /// The replay's last page: the `gap` event first when it is also the first page.
        var replayFrames: [String] = []
        var recovered: Bool?
        var reason: RoomUnrecoverableReason?
        /// A presence room's members on every node, when the room had no view yet (`nil`
        /// otherwise, or when the cluster could not say).
        var members: [(user: String, info: JSONValue?)]?
    }

    /// Step 1, under the lock.
    func roomJoin(_ request: RoomJoinRequest, connection: Connection, in state: inout State) -> Outcome {
        state.joinGeneration &+= 1
        let job = JoinJob(
            generation: state.joinGeneration, socketID: connection.socketID, app: connection.app, room: request.room, since: request.since,
            namespace: connection.namespace)
        func refuse(_ refusal: RoomError) -> Outcome {
            job.refuse(refusal, in: &state)
            return .handled
        }
        let claims: RoomClaims
        switch verifyRoomToken(request.token, room: job.room, app: connection.app) {
        case .success(let verified): claims = verified
        case .failure(let refusal): return refuse(refusal)
        }
        let app = connection.app.id
        var room = state.rooms[app]?[job.room]
        let user = claims.subject ?? connection.userID
        if let refusal = Room.admitJoin(room, socketID: job.socketID, user: user, roomsHeld: connection.rooms.count) { return refuse(refusal) }
        if room == nil {
            room = Room(record: state.knownRules[app]?[job.room] ?? Self.offeredRule(claims, now: wallSeconds()))
            // Followed before the store is read: what the bus brings from now on waits in the
            // pending join.
            if configurationStorage.fanout != nil { state.queue(.follow(.room(app: app, room: job.room))) }
        }
        room?.pending[job.socketID] = PendingJoin(generation: job.generation, claims: claims, user: user)
        state.rooms[app, default: [:]][job.room] = room
        state.connections[job.socketID]?.rooms.insert(job.room)
        return .lane(LaneJob(client: job.socketID, room: (job.app.id, job.room), run: { [self] in performJoin(job) }, refused: { [self] in
            self.withState { state in
                dropPendingJoin(job, in: &state)
                job.refuse(Self.laneRefusal, in: &state)
            }
        }))
    }

    /// A token's rule as the backend issued it: an `iat` ahead of this server's clock counts as
    /// now, so a token from a backend whose clock runs ahead cannot pin a rule against the
    /// tokens issued after it.
    static func offeredRule(_ claims: RoomClaims, now: Int) -> RoomRuleRecord {
        RoomRuleRecord(rule: claims.rule ?? RoomRule(), issuedAt: min(claims.issuedAt ?? 0, now))
    }

    /// Forgets a pending join that will not finish; a connection with no membership left in
    /// the room no longer counts it, and a room with nobody left closes.
    func dropPendingJoin(_ job: JoinJob, in state: inout State) {
        let app = job.app.id
        guard let room = state.rooms[app]?[job.room] else { return }
        if room.pending[job.socketID]?.generation == job.generation { state.rooms[app]?[job.room]?.pending[job.socketID] = nil }
        guard state.rooms[app]?[job.room]?.pending[job.socketID] == nil else { return }
        if state.rooms[app]?[job.room]?.members[job.socketID] == nil { state.connections[job.socketID]?.rooms.remove(job.room) }
        closeRoomIfEmpty(job.room, app: app, in: &state)
    }

    /// Step 2, on the lane.
    private func performJoin(_ job: JoinJob) {
        let app = job.app.id
        // What this join may cost, bounded before the store is asked anything: a presence
        // room's `joined` lists its members (as large as the last one built; a rejoin costs as
        // much as a join). A replay is paced instead (`streamJoin`).
        enum Prepared {
            case gone
            case refused(RoomError)
            case ready(offer: RoomRuleRecord, listMembers: Bool)
        }
        let prepared = withState { state -> Prepared in
            guard let connection = state.connections[job.socketID], let room = state.rooms[app]?[job.room],
                  let pending = room.pending[job.socketID], pending.generation == job.generation else { return .gone }
            if let budgetLeft = readBudgetLeft(connection, in: state), budgetLeft < room.joinedBytes {
                dropPendingJoin(job, in: &state)
                return .refused(Self.readBudgetRefusal)
            }
            // Only a token issued after the room's rule replaces it: a member holding an older
            // token (an hour's, or a public grant's day) cannot unseal the room, turn its
            // presence off or lift its cap (docs/rooms-protocol.md "Where the rules travel").
            let offered = Self.offeredRule(pending.claims, now: wallSeconds())
            let offer = offered.issuedAt > room.ruleIssuedAt ? offered : RoomRuleRecord(rule: room.rule, issuedAt: room.ruleIssuedAt)
            return .ready(offer: offer, listMembers: configurationStorage.fanout != nil && room.clusterView == nil)
        }
        guard case .ready(let offer, let listMembers) = prepared else {
            if case .refused(let refusal) = prepared { withState { job.refuse(refusal, in: &$0) } }
            return
        }
        // A store shared by the cluster's nodes has the last word on the rule: it keeps the one
        // issued last, whichever node saw it.
        let rule: RoomRuleRecord
        do {
            rule = try roomStore.settleRule(app: app, room: job.room, offered: offer, force: false, now: wallMilliseconds())
        } catch {
            return failJoin(job, RoomError(.storeFull, "\(error)"))
        }
        guard let since = job.since else {
            guard resetPendingJoin(job) else { return }
            let position: RoomPosition
            do {
                position = try roomStore.position(app: app, room: job.room, now: wallMilliseconds())
            } catch {
                return failJoin(job, RoomError(.storeFull, "\(error)"))
            }
            var read = JoinRead(rule: rule, position: position)
            if listMembers, rule.rule.presence { read.members = clusterMembers(.room(app: app, room: job.room), limit: Self.maxPresenceMembers) }
            if finishJoin(job, read) { catchUpRooms([(app, job.room)]) }
            return
        }
        streamJoin(job, ReplayStream(since: since, pageBytes: Self.replayPageBytes, maxPageEvents: Self.replayPageEvents), rule: rule,
                   listMembers: listMembers, waits: 0)
    }

    /// Empties what a pending join holds, right before the store is read for it: everything
    /// delivered until now is at or before what the read returns, so only what comes after it
    /// is kept for after the replay.
    ///
    /// - Returns: whether the join is still pending.
    func resetPendingJoin(_ job: JoinJob) -> Bool {
        withState { state -> Bool in
            guard state.rooms[job.app.id]?[job.room]?.pending[job.socketID]?.generation == job.generation else { return false }
            state.rooms[job.app.id]?[job.room]?.pending[job.socketID]?.delivered = []
            state.rooms[job.app.id]?[job.room]?.pending[job.socketID]?.bytes = 0
            state.rooms[job.app.id]?[job.room]?.pending[job.socketID]?.overflowed = false
            return true
        }
    }

    /// Ends a join that cannot go on: forgotten, and the member told why.
    func failJoin(_ job: JoinJob, _ error: RoomError) {
        withState { state in
            guard state.rooms[job.app.id]?[job.room]?.pending[job.socketID]?.generation == job.generation else { return }
            dropPendingJoin(job, in: &state)
            job.refuse(error, in: &state)
        }
    }

    /// Step 3, under the lock: the member is admitted (or refused), then sent its replay,
    /// `joined`, and the events that waited past the replay's end.
    ///
    /// - Returns: whether the room opened on this node with this join on a cluster (its
    ///   cursor is new: the caller compares it with the store once more, for what the bus
    ///   brought before it followed the room).
    func finishJoin(_ job: JoinJob, _ read: JoinRead) -> Bool {
        let app = job.app.id
        let name = job.room
        return withState { state -> Bool in
            guard let connection = state.connections[job.socketID], state.rooms[app]?[name]?.pending[job.socketID]?.generation == job.generation,
                  // Taken out while it changes (put back on every path below), as in `leaveRoom`.
                  var room = state.rooms[app]?.removeValue(forKey: name), let pending = room.pending.removeValue(forKey: job.socketID) else { return false }
            let claims = pending.claims
            let user = pending.user
            let userKey = Room.userKey(user, socketID: job.socketID)
            let alreadyJoined = room.members[job.socketID] != nil
            // The rule settled when the join began, unless the room's is later: one issued while
            // a long replay streamed (an app server's publish) is never rolled back.
            if read.rule.issuedAt > room.ruleIssuedAt {
                room.rule = read.rule.rule
                room.ruleIssuedAt = read.rule.issuedAt
            }
            let rule = room.rule
            if let full = room.refusesJoinAsFull(user: user, socketID: job.socketID) {
                state.rooms[app]?[name] = room
                dropPendingJoin(job, in: &state)
                job.refuse(full, in: &state)
                return false
            }
            // Charged once it is sure to be sent (a full room sends none of it).
            let replayBytes = read.replayFrames.reduce(0) { $0 + $1.utf8.count }
            state.connections[job.socketID]?.budget.chargeReplay(bytes: replayBytes, at: now())
            if replayBytes > 0 { state.replayPace.charge(job.socketID, bytes: replayBytes, at: now()) }
            lane.meter(replayBytes)
            var opened = false
            if configurationStorage.fanout == nil {
                // The members already here are on another stream: told to resync (`Room.epoch`).
                if let known = room.epoch, known != read.position.epoch {
                    resyncMembers(&room, name: name, why: "the room's history was lost (a new epoch)", excluding: job.socketID, in: &state)
                }
                room.epoch = read.position.epoch
            } else {
                if let cursor = room.cursor {
                    // The store's epoch moved and the bus has not said so yet: the members
                    // already here are on the old stream.
                    if cursor.epoch != read.position.epoch {
                        resyncMembers(&room, name: name, why: "the room's history was lost (a new epoch)", excluding: job.socketID, in: &state)
                        room.cursor = read.position
                    }
                } else {
                    room.cursor = read.position
                    room.checkedAt = now()
                    opened = true
                }
            }
            // What waited past the replay's end, in id order. A room that opened with this join
            // had no cursor: what the bus brought meanwhile counts only where it follows the
            // position without a gap (the catch-up that follows brings the rest).
            let waiting = pending.waiting(after: read.position, cursor: &room.cursor, opened: opened)
            var announce = false
            if !alreadyJoined {
                room.order.append(job.socketID)
                if rule.presence, let user, room.users[userKey] == nil {
                    let event = WebhookEvent(name: "room_member_added", room: name, userID: user)
                    announce = clusterPresence(joined: true, topic: .room(app: app, room: name), user: user, info: claims.info, excluding: job.socketID, app: job.app, webhook: event, in: &state)
                }
                room.users[userKey, default: []].insert(job.socketID)
                room.countDirty = true
            }
            if rule.presence, configurationStorage.fanout != nil, room.clusterView == nil {
                // The cluster's members (this node's when Redis could not say: the next refresh
                // fixes it).
                if let members = read.members {
                    room.clusterView = Dictionary(members.map { ($0.user, $0.info) }, uniquingKeysWith: { first, _ in first })
                } else {
                    var local: [String: JSONValue?] = [:]
                    for membership in room.members.values { if let user = membership.user { local.updateValue(membership.info, forKey: user) } }
                    room.clusterView = local
                }
            }
            // On one node every event after the join comes live once; with a fan-out, events up
            // to the join's position (or what waited) may still be on their way from the bus.
            let after = configurationStorage.fanout == nil ? 0 : max(read.position.id, waiting.last?.id ?? 0)
            room.members[job.socketID] = RoomMembership(user: user, info: claims.info, expiresAt: claims.expiresAt, after: after, stale: pending.overflowed)
            let joinedFrame = RoomFrame.system(
                RoomSystemEvent.joined, data: joinedJSON(room, own: user.map { ($0, claims.info) }, position: read.position, recovered: read.recovered, reason: read.reason),
                room: name, namespace: job.namespace)
            room.joinedBytes = joinedFrame.utf8.count
            state.rooms[app]?[name] = room
            // A presence room's members list can be large: it counts like replayed events.
            chargeReadBudget(joinedFrame.utf8.count, connection: connection, in: &state)

            for frame in read.replayFrames { state.send(frame, to: connection) }
            state.send(joinedFrame, to: connection)
            if pending.overflowed {
                job.refuse(RoomError(.resync, "more events arrived while the join waited than it keeps: rejoin from your position"), in: &state)
            } else {
                for record in waiting { state.send(RoomFrame.event(record, room: name, namespace: job.namespace), to: connection) }
            }
            if announce, let user {
                broadcastRoom(RoomSystemEvent.join, data: Self.memberJSON(user, info: claims.info), room: name, app: app, excluding: job.socketID, in: &state)
                state.webhook(job.app, .init(name: "room_member_added", room: name, userID: user))
            }
            return opened
        }
    }
}
