import Foundation
import RealtimeProtocol

/// A member's join (docs/rooms-protocol.md "Joining"), in three steps so that no store call
/// runs on the WebSocket service thread or under the hub's lock (issue 31), with DESIGN.md's
/// recipe for order (follow live first, buffer, read, merge by id):
/// 1. `roomJoin`, on arrival, under the lock: the token and the connection's limits are
///    checked, the room followed, and the join registered pending (`PendingJoin`): from then
///    on what the room delivers waits in it.
/// 2. `performJoin`, on the lane: the read budget is checked, then with no lock held the store
///    settles the room's rule and reads the replay (or the position), the cluster lists a
///    presence room's members, and the replay's frames are built.
/// 3. `finishJoin`, under the lock: capacity and membership, then the replay, `joined`, and
///    what waited past the replay's end, in id order.
extension RealtimeHub {
    /// Bytes of events (`RoomEventRecord.size`) one pending join keeps: past it the member is
    /// told to resync right after its `joined` (a replay's limit).
    static let maxPendingJoinBytes = maxReplayBytes
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
    private struct JoinRead {
        var rule: RoomRuleRecord
        var position: RoomPosition
        var replayFrames: [String] = []
        var recovered: Bool?
        var reason: RoomUnrecoverableReason?
        /// Bytes the read cost the connection's read budget.
        var cost = 0
        /// A presence room's members on every node, when the room had no view yet (`nil`
        /// otherwise, or when the cluster could not say).
        var members: [(user: String, info: JSONValue?)]?

        /// The replay's frames: the `gap` event first when there is one, then each record,
        /// at most `limit` bytes of frames. Escaping can make frames larger than the records:
        /// past the limit the oldest are left out and the gap grows to say so (`too_large`).
        mutating func replay(_ records: [RoomEventRecord], room: String, namespace: ProtocolNamespace, gap: RoomResumeGap?, limit: Int) {
            var frames = records.map { RoomFrame.event($0, room: room, namespace: namespace, replayed: true) }
            var built = frames.reduce(0) { $0 + $1.utf8.count }
            var gap = gap
            var dropped = 0
            while built > limit, dropped < frames.count {
                built -= frames[dropped].utf8.count
                dropped += 1
            }
            if dropped > 0 {
                let previous = gap?.previous ?? RoomPosition(epoch: position.epoch, id: records[0].id - 1)
                let next = records.dropFirst(dropped).first
                gap = RoomResumeGap(reason: .tooLarge, previous: previous,
                              resume: RoomPosition(epoch: position.epoch, id: next.map { $0.id - 1 } ?? position.id), before: next?.at)
                frames.removeFirst(dropped)
                recovered = false
                reason = gap?.reason
            }
            if let gap {
                let frame = RoomFrame.system(RoomSystemEvent.gap, data: gap.told.json, room: room, namespace: namespace)
                built += frame.utf8.count
                frames.insert(frame, at: 0)
            }
            replayFrames = frames
            cost = built
        }
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
        return .lane(LaneJob(run: { [self] in performJoin(job) }, refused: { [self] in
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
        // much as a join), and the store reads a replay only up to what is left of the
        // budget. Exact: the lane runs one request at a time.
        enum Prepared {
            case gone
            case refused(RoomError)
            case ready(offer: RoomRuleRecord, replayLimit: Int, listMembers: Bool)
        }
        let prepared = withState { state -> Prepared in
            guard let connection = state.connections[job.socketID], let room = state.rooms[app]?[job.room],
                  let pending = room.pending[job.socketID], pending.generation == job.generation else { return .gone }
            // Everything delivered until now is at or before the position the store is about to
            // read: only what comes after the read is kept for after the replay.
            state.rooms[app]?[job.room]?.pending[job.socketID]?.delivered = []
            state.rooms[app]?[job.room]?.pending[job.socketID]?.bytes = 0
            state.rooms[app]?[job.room]?.pending[job.socketID]?.overflowed = false
            let budgetLeft = readBudgetLeft(connection, in: state)
            if let budgetLeft, budgetLeft < room.joinedBytes + (job.since == nil ? 0 : 1) {
                dropPendingJoin(job, in: &state)
                return .refused(Self.readBudgetRefusal)
            }
            // Only a token issued after the room's rule replaces it: a member holding an older
            // token (an hour's, or a public grant's day) cannot unseal the room, turn its
            // presence off or lift its cap (docs/rooms-protocol.md "Where the rules travel").
            let offered = Self.offeredRule(pending.claims, now: wallSeconds())
            let offer = offered.issuedAt > room.ruleIssuedAt ? offered : RoomRuleRecord(rule: room.rule, issuedAt: room.ruleIssuedAt)
            return .ready(
                offer: offer, replayLimit: min(Self.maxReplayBytes, budgetLeft.map { $0 - room.joinedBytes } ?? .max),
                listMembers: configurationStorage.fanout != nil && room.clusterView == nil)
        }
        guard case .ready(let offer, let replayLimit, let listMembers) = prepared else {
            if case .refused(let refusal) = prepared { withState { job.refuse(refusal, in: &$0) } }
            return
        }
        let read: JoinRead
        do {
            read = try readJoin(job, offer: offer, replayLimit: replayLimit, listMembers: listMembers)
        } catch {
            withState { state in
                // The store read up to the limit before it could say the replay passed it.
                if error.code == Self.readBudgetRefusal.code, let connection = state.connections[job.socketID] {
                    chargeReadBudget(replayLimit, connection: connection, in: &state)
                }
                dropPendingJoin(job, in: &state)
                job.refuse(error, in: &state)
            }
            return
        }
        if finishJoin(job, read) { catchUpRooms([(app, job.room)]) }
    }

    /// The store's part of a join, with no lock held: the room's rule settled (a store the
    /// cluster's nodes share has the last word: it keeps the rule issued last whichever node
    /// saw it), the replay or the position, and a presence room's members.
    ///
    /// - Throws: `RoomError` `store_full` (the store failed), `rate_limited` (the replay is
    ///   past what is left of the read budget: asked in a later second it may be answered).
    private func readJoin(_ job: JoinJob, offer: RoomRuleRecord, replayLimit: Int, listMembers: Bool) throws(RoomError) -> JoinRead {
        let app = job.app.id
        let now = wallMilliseconds()
        var read: JoinRead
        do {
            let rule = try roomStore.settleRule(app: app, room: job.room, offered: offer, force: false, now: now)
            guard let since = job.since else {
                read = JoinRead(rule: rule, position: try roomStore.position(app: app, room: job.room, now: now))
                if listMembers, rule.rule.presence { read.members = clusterMembers(.room(app: app, room: job.room), limit: Self.maxPresenceMembers) }
                return read
            }
            switch try roomStore.resume(app: app, room: job.room, after: since, now: now, maxBytes: replayLimit,
                                        budgetLimited: replayLimit < Self.maxReplayBytes) {
            case .events(let records, let current):
                read = JoinRead(rule: rule, position: current, recovered: true)
                read.replay(records, room: job.room, namespace: job.namespace, gap: nil, limit: Self.maxReplayBytes)
            case .gap(let gap, let records, let current):
                read = JoinRead(rule: rule, position: current, recovered: false, reason: gap.reason)
                read.replay(records, room: job.room, namespace: job.namespace, gap: gap, limit: Self.maxReplayBytes)
                // The store read up to the limit before it could say the whole would not fit.
                if gap.reason == .tooLarge { read.cost = max(read.cost, replayLimit) }
            case .overBudget:
                // Past what was left of the budget, not past a replay's limit: asked again in a
                // later second, the answer may be the whole replay. Charged what the store read.
                throw RoomError(Self.readBudgetRefusal.code, Self.readBudgetRefusal.message)
            case .unknownPosition(let current):
                read = JoinRead(rule: rule, position: current, recovered: false, reason: .unknownPosition)
            }
        } catch let error as RoomError {
            throw error
        } catch {
            throw RoomError(.storeFull, "\(error)")
        }
        if listMembers, read.rule.rule.presence { read.members = clusterMembers(.room(app: app, room: job.room), limit: Self.maxPresenceMembers) }
        return read
    }

    /// Step 3, under the lock: the member is admitted (or refused), then sent its replay,
    /// `joined`, and the events that waited past the replay's end.
    ///
    /// - Returns: whether the room opened on this node with this join on a cluster (its
    ///   cursor is new: the caller compares it with the store once more, for what the bus
    ///   brought before it followed the room).
    private func finishJoin(_ job: JoinJob, _ read: JoinRead) -> Bool {
        let app = job.app.id
        let name = job.room
        return withState { state -> Bool in
            guard let connection = state.connections[job.socketID], state.rooms[app]?[name]?.pending[job.socketID]?.generation == job.generation,
                  // Taken out while it changes (put back on every path below), as in `leaveRoom`.
                  var room = state.rooms[app]?.removeValue(forKey: name), let pending = room.pending.removeValue(forKey: job.socketID) else { return false }
            chargeReadBudget(read.cost, connection: connection, in: &state)
            let claims = pending.claims
            let user = pending.user
            let userKey = Room.userKey(user, socketID: job.socketID)
            let alreadyJoined = room.members[job.socketID] != nil
            room.rule = read.rule.rule
            room.ruleIssuedAt = read.rule.issuedAt
            let rule = room.rule
            if let full = room.refusesJoinAsFull(user: user, socketID: job.socketID) {
                state.rooms[app]?[name] = room
                dropPendingJoin(job, in: &state)
                job.refuse(full, in: &state)
                return false
            }
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
                    announce = clusterPresence(joined: true, topic: .room(app: app, room: name), user: user, info: claims.info, excluding: job.socketID, app: job.app, webhook: event)
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
