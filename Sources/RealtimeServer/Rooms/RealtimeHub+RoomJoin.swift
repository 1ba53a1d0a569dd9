import Foundation
import RealtimeProtocol

/// A member's join (docs/rooms-protocol.md "Joining") as a machine: the join's steps are states
/// of its `PendingJoin` (`JoinStep`), each step asks the store or the cluster one thing
/// (`JoinRequest`, a value), and the answer comes back as a value (`JoinAnswer`) to the decision
/// that takes the next step, with DESIGN.md's recipe for order (follow live first, buffer,
/// read, merge by id):
/// 1. `roomJoin`, on arrival, under the lock: the token and the connection's limits are
///    checked, the room followed, and the join registered pending (`.queued`): from then on
///    what the room delivers waits in it. The lane is asked for a turn (`Outcome.join`).
/// 2. `joinTurn` and `joinAnswered`, under the lock, on the join's turns of the lane: the read
///    budget, then the room's rule settled by the store (`.settlingRule`), the position read
///    (`.readingPosition`) or the replay a page at a time (`.streaming`: the pages before the
///    last sent as they are read, each in its own turn when the socket has room for it), and a
///    presence room's members listed by the cluster (`.listingMembers`).
/// 3. `finishJoin`, under the lock: capacity and membership, then the last page of the replay,
///    `joined`, and what waited past the replay's end, in id order.
///
/// `runJoin` performs: it asks the store what the decisions ask, with no lock held, and hands
/// each answer back; it decides nothing.
extension RealtimeHub {
    /// Bytes of events (`RoomEventRecord.size`) one pending join keeps, what the bus brings
    /// while one page of its replay is read (2 MiB): past it the member is told to resync
    /// right after its `joined`.
    static let maxPendingJoinBytes = 2 * 1024 * 1024
    /// The answer to a room request the lane cannot take (`Configuration.roomLaneBacklog` wait).
    static let laneRefusal = RoomError(.storeFull, "the node's room requests wait for its history store at their bound: try again")

    /// A join: who joins which room from where. Its `generation` is the id its store requests
    /// and their answers carry: an answer for a join that ended (a leave, a newer join of the
    /// same connection and room) finds no pending join of that generation and is dropped.
    struct JoinJob: Sendable, Hashable {
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

    /// Where a join is, kept in its `PendingJoin`.
    enum JoinStep {
        /// Waits for its first turn on the lane.
        case queued
        /// The store settles the room's rule (`JoinRequest.settleRule`); a presence room whose
        /// members this node has no view of yet lists them before it finishes (`listMembers`).
        case settlingRule(listMembers: Bool)
        /// The store reads the room's position: a join from no position.
        case readingPosition(rule: RoomRuleRecord, listMembers: Bool)
        /// A join from a position, replayed a page at a time: waits for its turn (or for its
        /// socket, its pace, the node's replay memory: `waits` times in a row), or reads a page.
        case streaming(ReplayStream, rule: RoomRuleRecord, listMembers: Bool, waits: Int)
        /// The cluster lists a presence room's members; the join then finishes with `read`.
        case listingMembers(JoinRead)
    }

    /// What a join's step asks, performed by `runJoin` on the room's lane with no lock held.
    enum JoinRequest: Hashable, Sendable {
        /// `RoomHistoryStore.settleRule` with the rule offered (the store keeps the one issued
        /// last, whichever node saw it).
        case settleRule(offered: RoomRuleRecord)
        /// `RoomHistoryStore.position`.
        case position
        /// `RoomHistoryStore.replayPage` after `after`, at most `limit` events and
        /// `RealtimeHub.replayPageBytes`.
        case replayPage(after: RoomPosition, limit: Int)
        /// The room's presence members on every node (`RealtimeFanout.presenceMembers`, at most
        /// `RealtimeHub.maxPresenceMembers`).
        case members
    }

    /// The answer to a `JoinRequest`, handed back to `joinAnswered`.
    enum JoinAnswer: Sendable {
        case rule(RoomRuleRecord)
        case position(RoomPosition)
        case page(RoomReplayPage)
        /// The members, or `nil` when the cluster could not say (this node's are used).
        case members([(user: String, info: JSONValue?)]?)
        /// The store failed (`RoomStoreError`'s description): the join ends with `store_full`.
        case failed(String)
    }

    /// What the lane does next for a join, decided under the lock.
    enum JoinNext: Hashable, Sendable {
        /// Performs the request now, in the same turn, and hands its answer back.
        case perform(JoinRequest)
        /// Asks for another turn on the lane, at once or after `wait` (off the lane: other
        /// rooms' work goes on).
        case queue(after: Duration?)
        /// Nothing more in this turn: the join finished, ended, or waits parked.
        /// `catchUp`: the room opened on this node with this join on a cluster (its cursor is
        /// new): it is compared with the store once more, for what the bus brought before it
        /// followed the room.
        case done(catchUp: Bool)
    }

    /// What the lane read for a join.
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
        return .join(job)
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

    /// Ends a join that cannot go on, under the lock: forgotten, and the member told why.
    func failJoin(_ job: JoinJob, _ error: RoomError, in state: inout State) {
        guard state.rooms[job.app.id]?[job.room]?.pending[job.socketID]?.generation == job.generation else { return }
        dropPendingJoin(job, in: &state)
        job.refuse(error, in: &state)
    }

    // MARK: - Decisions, under the lock

    /// A join's turn on its room's lane came: what it asks the store now, under the lock.
    ///
    /// - Parameters:
    ///   - nodeOverReplayBudget: whether the node's queued bytes are over
    ///     `Configuration.replayMemoryBudget` (read by the caller with no lock held).
    func joinTurn(_ job: JoinJob, nodeOverReplayBudget: Bool, in state: inout State) -> JoinNext {
        let app = job.app.id
        guard let connection = state.connections[job.socketID] else { return .done(catchUp: false) }
        guard let room = state.rooms[app]?[job.room], let pending = room.pending[job.socketID], pending.generation == job.generation else {
            // A stream that looked for its connection's socket ended: the parked ones go on.
            resumeParkedReplays(job, in: &state)
            return .done(catchUp: false)
        }
        switch pending.step {
        case .queued:
            // What this join may cost, bounded before the store is asked anything: a presence
            // room's `joined` lists its members (as large as the last one built; a rejoin costs
            // as much as a join). A replay is paced instead (`.streaming`).
            if let budgetLeft = readBudgetLeft(connection, in: state), budgetLeft < room.joinedBytes {
                failJoin(job, Self.readBudgetRefusal, in: &state)
                return .done(catchUp: false)
            }
            // Only a token issued after the room's rule replaces it: a member holding an older
            // token (an hour's, or a public grant's day) cannot unseal the room, turn its
            // presence off or lift its cap (docs/rooms-protocol.md "Where the rules travel").
            let offered = Self.offeredRule(pending.claims, now: wallSeconds())
            let offer = offered.issuedAt > room.ruleIssuedAt ? offered : RoomRuleRecord(rule: room.rule, issuedAt: room.ruleIssuedAt)
            let listMembers = configurationStorage.fanout != nil && room.clusterView == nil
            state.setJoinStep(job, .settlingRule(listMembers: listMembers))
            return .perform(.settleRule(offered: offer))
        case .streaming(let stream, let rule, let listMembers, let waits):
            // Every page, the first too: a client resuming many rooms at once gets them one
            // socket's worth at a time, never a burst past the slow-consumer limit; and all of
            // them together no more than the node's replay memory, nor than their share of its
            // replay rate.
            let socketFull = connection.output.queuedBytes > Self.replayQueuedBytes
            if socketFull || nodeOverReplayBudget || connection.budget.replayBudgetLeft(at: now(), limits: limits) == 0
                || !state.replayPace.admits(job.socketID, at: now()) {
                // One stream per connection looks again on a timer; the others wait parked
                // (no timer), resumed when the one that looks goes on or ends: a member that stops
                // reading while it resumes 100 rooms costs one look every 160 ms, not 100.
                guard connection.replayLooker == nil || connection.replayLooker == job.generation else {
                    state.connections[job.socketID]?.replayParked[job.room] = job
                    return .done(catchUp: false)
                }
                state.connections[job.socketID]?.replayLooker = job.generation
                state.setJoinStep(job, .streaming(stream, rule: rule, listMembers: listMembers, waits: waits + 1))
                metrics.replayWaits.add(1, ordering: .relaxed)
                // Each wait twice the last, `replayFlowWaitMilliseconds` at first, at most 32 times it.
                return .queue(after: .milliseconds(Self.replayFlowWaitMilliseconds << min(waits, 5)))
            }
            resumeParkedReplays(job, in: &state)
            // Everything delivered until now is at or before what the read returns.
            state.resetPendingJoin(job)
            return .perform(.replayPage(after: stream.reached, limit: stream.pageLimit))
        case .settlingRule, .readingPosition, .listingMembers:
            // A turn while a request is answered cannot come (one turn per join at a time); if
            // one did, the join ends rather than stay pending with nobody to finish it.
            failJoin(job, RoomError(.storeFull, "the join's turn came while its request was answered"), in: &state)
            return .done(catchUp: false)
        }
    }

    /// The answer to a join's request, under the lock: the join's next step.
    func joinAnswered(_ job: JoinJob, _ answer: JoinAnswer, nodeOverReplayBudget: Bool, in state: inout State) -> JoinNext {
        let app = job.app.id
        guard state.connections[job.socketID] != nil, let pending = state.rooms[app]?[job.room]?.pending[job.socketID],
              pending.generation == job.generation else { return .done(catchUp: false) }
        if case .failed(let reason) = answer {
            failJoin(job, RoomError(.storeFull, reason), in: &state)
            return .done(catchUp: false)
        }
        switch (pending.step, answer) {
        case (.settlingRule(let listMembers), .rule(let rule)):
            guard let since = job.since else {
                state.resetPendingJoin(job)
                state.setJoinStep(job, .readingPosition(rule: rule, listMembers: listMembers))
                return .perform(.position)
            }
            let stream = ReplayStream(since: since, pageBytes: Self.replayPageBytes, maxPageEvents: Self.replayPageEvents)
            state.setJoinStep(job, .streaming(stream, rule: rule, listMembers: listMembers, waits: 0))
            // The stream's first page in this turn, when its socket has room.
            return joinTurn(job, nodeOverReplayBudget: nodeOverReplayBudget, in: &state)
        case (.readingPosition(let rule, let listMembers), .position(let position)):
            return finishJoin(job, JoinRead(rule: rule, position: position), listMembers: listMembers, in: &state)
        case (.streaming(var stream, let rule, let listMembers, _), .page(let page)):
            return streamPage(job, stream.take(page), stream: stream, rule: rule, listMembers: listMembers, in: &state)
        case (.listingMembers(var read), .members(let members)):
            read.members = members
            return finishJoin(job, read, listMembers: false, in: &state)
        default:
            failJoin(job, RoomError(.storeFull, "the store's answer did not match the join's step"), in: &state)
            return .done(catchUp: false)
        }
    }

    /// The lane did not take a join's turn, or took it out again for a client that used it
    /// less: the join ends with `laneRefusal`, and a stream that looked for its connection
    /// hands the look over to the parked ones.
    func joinRefused(_ job: JoinJob, in state: inout State) {
        failJoin(job, Self.laneRefusal, in: &state)
        resumeParkedReplays(job, in: &state)
    }

    /// What a page of a join's replay means (`ReplayStream.take`): sent, read again, or the end
    /// of the join (its last page goes with `joined`).
    private func streamPage(_ job: JoinJob, _ step: ReplayStream.Step, stream: ReplayStream, rule: RoomRuleRecord, listMembers: Bool,
                            in state: inout State) -> JoinNext {
        let app = job.app.id
        switch step {
        case .readAgain:
            state.setJoinStep(job, .streaming(stream, rule: rule, listMembers: listMembers, waits: 0))
            return .perform(.replayPage(after: stream.reached, limit: stream.pageLimit))
        case .resync(let why):
            failJoin(job, RoomError(.resync, why + ": rejoin from your position"), in: &state)
            return .done(catchUp: false)
        case .unknownPosition(let current):
            return finishJoin(job, JoinRead(rule: rule, position: current, recovered: false, reason: .unknownPosition), listMembers: listMembers, in: &state)
        case .send(let gap, let events, let done, let current):
            var frames: [String] = []
            frames.reserveCapacity(events.count + 1)
            if let gap { frames.append(RoomFrame.system(RoomSystemEvent.gap, data: gap.told.json, room: job.room, namespace: job.namespace)) }
            for record in events { frames.append(RoomFrame.event(record, room: job.room, namespace: job.namespace, replayed: true)) }
            metrics.eventsReplayed.bump(events.count)
            guard !done else {
                let read = JoinRead(rule: rule, position: current, replayFrames: frames, recovered: stream.gap == nil, reason: stream.gap?.reason)
                return finishJoin(job, read, listMembers: listMembers, in: &state)
            }
            guard let connection = state.connections[job.socketID], var room = state.rooms[app]?[job.room],
                  let pending = room.pending[job.socketID] else { return .done(catchUp: false) }
            // A full room refuses a new member before its replay, not after it (the finish
            // checks again).
            var probe = room
            if rule.issuedAt > room.ruleIssuedAt { probe.rule = rule.rule }
            if stream.pages == 1, let full = probe.refusesJoinAsFull(user: pending.user, socketID: job.socketID) {
                failJoin(job, full, in: &state)
                return .done(catchUp: false)
            }
            // A member rejoining on the same socket gets nothing live until its `joined`: what
            // comes meanwhile reaches it through the replay.
            if room.members[job.socketID] != nil {
                room.members[job.socketID]?.stale = true
                state.rooms[app]?[job.room] = room
            }
            var bytes = 0
            for frame in frames {
                bytes += frame.utf8.count
                state.send(frame, to: connection)
            }
            state.connections[job.socketID]?.budget.chargeReplay(bytes: bytes, at: now())
            state.replayPace.charge(job.socketID, bytes: bytes, at: now())
            lane.meter(bytes)
            state.setJoinStep(job, .streaming(stream, rule: rule, listMembers: listMembers, waits: 0))
            return .queue(after: nil)
        }
    }

    /// The stream of `job` looked for its connection's socket and now goes on or ends: the
    /// connection's parked streams are handed to the outbox to ask for their turns.
    private func resumeParkedReplays(_ job: JoinJob, in state: inout State) {
        guard state.connections[job.socketID]?.replayLooker == job.generation,
              let parked = state.connections[job.socketID]?.takeParkedReplays() else { return }
        for other in parked { state.queue(.resumeJoin(other)) }
    }

    /// The last step, or the one before it when a presence room's members are to be listed
    /// first (`listMembers`): the join finishes with what was read.
    private func finishJoin(_ job: JoinJob, _ read: JoinRead, listMembers: Bool, in state: inout State) -> JoinNext {
        if listMembers, read.rule.rule.presence {
            state.setJoinStep(job, .listingMembers(read))
            return .perform(.members)
        }
        return .done(catchUp: finishJoin(job, read, in: &state))
    }

    /// Step 3, under the lock: the member is admitted (or refused), then sent its replay,
    /// `joined`, and the events that waited past the replay's end.
    ///
    /// - Returns: whether the room opened on this node with this join on a cluster (its
    ///   cursor is new: the caller compares it with the store once more, for what the bus
    ///   brought before it followed the room).
    func finishJoin(_ job: JoinJob, _ read: JoinRead, in state: inout State) -> Bool {
        let app = job.app.id
        let name = job.room
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
            // The cluster's members (this node's when Redis could not say: read again at the
            // next sweeps until a read succeeds).
            if let members = read.members {
                room.clusterView = Dictionary(members.map { ($0.user, $0.info) }, uniquingKeysWith: { first, _ in first })
            } else {
                var local: [String: JSONValue?] = [:]
                for membership in room.members.values { if let user = membership.user { local.updateValue(membership.info, forKey: user) } }
                room.clusterView = local
                presenceViewsToRead.withLock { _ = $0.insert(.room(app: job.app.id, room: job.room)) }
            }
        }
        // On one node every event after the join comes live once; with a fan-out, events up
        // to the join's position (or what waited) may still be on their way from the bus.
        let after = configurationStorage.fanout == nil ? 0 : max(read.position.id, waiting.last?.id ?? 0)
        room.members[job.socketID] = RoomMembership(user: user, info: claims.info, expiresAt: claims.expiresAt, after: after, stale: pending.overflowed)
        note(.join, app: app, socketID: job.socketID, room: name, userID: user,
                          detail: "from \(read.position)\(read.recovered == false ? ", not recovered" : "")", in: &state)
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

    // MARK: - Performing, on the lane

    /// A join's turn on its room's lane: asks the store (and the cluster's registry) what the
    /// decisions ask, with no lock held, hands each answer back, and does what the last
    /// decision says; decides nothing itself.
    func runJoin(_ job: JoinJob) {
        // Read from the transport before the lock is taken, never under it.
        var overBudget = nodeOverReplayBudget()
        var next = withState { joinTurn(job, nodeOverReplayBudget: overBudget, in: &$0) }
        while case .perform(let request) = next {
            let answer = answer(request, for: job)
            overBudget = nodeOverReplayBudget()
            next = withState { joinAnswered(job, answer, nodeOverReplayBudget: overBudget, in: &$0) }
        }
        switch next {
        case .perform: break
        case .queue(let wait): queueJoin(job, after: wait)
        case .done(let catchUp): if catchUp { catchUpRooms([(job.app.id, job.room)]) }
        }
    }

    /// Whether the node's queued bytes are over `Configuration.replayMemoryBudget` (read from
    /// the transport, with no lock held).
    private func nodeOverReplayBudget() -> Bool {
        configurationStorage.queuedBytes.map { $0() > configurationStorage.replayMemoryBudget } ?? false
    }

    /// Performs a join's request.
    private func answer(_ request: JoinRequest, for job: JoinJob) -> JoinAnswer {
        let app = job.app.id
        do throws(RoomStoreError) {
            switch request {
            case .settleRule(let offered):
                return .rule(try roomStore.settleRule(app: app, room: job.room, offered: offered, force: false, now: wallMilliseconds()))
            case .position:
                return .position(try roomStore.position(app: app, room: job.room, now: wallMilliseconds()))
            case .replayPage(let after, let limit):
                return .page(try roomStore.replayPage(app: app, room: job.room, after: after, limit: limit, maxBytes: Self.replayPageBytes,
                                                      now: wallMilliseconds()))
            case .members:
                return .members(clusterMembers(.room(app: app, room: job.room), limit: Self.maxPresenceMembers))
            }
        } catch {
            return .failed("\(error)")
        }
    }

    /// Asks the lane for a join's turn, at once or `after` a wait (off the lane, so other
    /// rooms' work goes on); a lane that does not take it ends the join (`joinRefused`).
    func queueJoin(_ job: JoinJob, after wait: Duration? = nil) {
        let next: @Sendable () -> Void = { [self] in
            let refused: @Sendable () -> Void = { [self] in withState { joinRefused(job, in: &$0) } }
            if !lane.submit(LaneJob(client: job.socketID, room: (job.app.id, job.room), run: { [self] in runJoin(job) }, refused: refused)) {
                metrics.roomLaneRefused.bump()
                refused()
            }
        }
        guard let wait else { return next() }
        if let executor = configurationStorage.executor { return executor.after(wait, next) }
        let milliseconds = Int(wait / .milliseconds(1))
        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(milliseconds), execute: next)
    }
}

extension RealtimeHub.State {
    /// Moves a pending join of `job`'s generation to `step`.
    mutating func setJoinStep(_ job: RealtimeHub.JoinJob, _ step: RealtimeHub.JoinStep) {
        guard rooms[job.app.id]?[job.room]?.pending[job.socketID]?.generation == job.generation else { return }
        rooms[job.app.id]?[job.room]?.pending[job.socketID]?.step = step
    }

    /// Empties what a pending join holds, right before the store is read for it: everything
    /// delivered until now is at or before what the read returns, so only what comes after it
    /// is kept for after the replay.
    mutating func resetPendingJoin(_ job: RealtimeHub.JoinJob) {
        guard rooms[job.app.id]?[job.room]?.pending[job.socketID]?.generation == job.generation else { return }
        rooms[job.app.id]?[job.room]?.pending[job.socketID]?.delivered = []
        rooms[job.app.id]?[job.room]?.pending[job.socketID]?.bytes = 0
        rooms[job.app.id]?[job.room]?.pending[job.socketID]?.overflowed = false
    }
}
