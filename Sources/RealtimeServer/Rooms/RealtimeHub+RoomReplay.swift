import Foundation
import RealtimeProtocol
import SystemSupport

/// A join's streamed replay (docs/rooms-protocol.md "Replay"), step 2 of a join
/// (`RealtimeHub+RoomJoin.swift`) when it rejoins from a position: the pages read on the lane
/// one job at a time, each sent when its member's socket has room and its pace allows, a
/// stalled stream looking again on a timer or waiting parked.
extension RealtimeHub {
    /// One page of a join's replay, on the lane (docs/rooms-protocol.md "Replay"): read with no
    /// lock held and sent, the next page left for a later lane job, which waits while the
    /// connection has `replayQueuedBytes` queued or its `replayBytesPerSecond` are spent; the
    /// last page is sent by `finishJoin`, with `joined`. The member stays pending until then:
    /// what the room delivers meanwhile is read by the next page (or, for the last, waits in
    /// the pending join), so every event reaches it once and in order.
    ///
    /// One stream per connection looks again on a timer while the socket is full; the
    /// connection's other streams wait parked (`Connection.replayParked`, no timer) and are
    /// resumed when the one that looks finds room or ends: a member that stops reading while it
    /// resumes 100 rooms costs one look every 160 ms, not 100.
    ///
    /// - Parameter waits: how many times in a row the page waited for its socket or its pace
    ///   (each wait twice the last, `replayFlowWaitMilliseconds` at first, at most 32 times it: a member
    ///   that stops reading costs a look every 160 ms, not every 5); above 0, this stream is
    ///   the one that looks.
    func streamJoin(_ job: JoinJob, _ stream: ReplayStream, rule: RoomRuleRecord, listMembers: Bool, waits: Int) {
        let app = job.app.id
        let looks = waits > 0
        // The socket's flow control and the replay's pace, looked at before each page; the
        // parked streams to resume when this one, the one that looked, goes on or ends.
        enum Gate { case gone([@Sendable () -> Void]), wait, parked, read([@Sendable () -> Void]) }
        let nodeOverReplayBudget = configurationStorage.queuedBytes.map { $0() > configurationStorage.replayMemoryBudget } ?? false
        let gate = withState { state -> Gate in
            guard let connection = state.connections[job.socketID] else { return .gone([]) }
            guard state.rooms[app]?[job.room]?.pending[job.socketID]?.generation == job.generation else {
                return .gone(looks ? state.connections[job.socketID]?.takeParkedReplays() ?? [] : [])
            }
            // Every page, the first too: a client resuming many rooms at once gets them one
            // socket's worth at a time, never a burst past the slow-consumer limit; and all of
            // them together no more than the node's replay memory, nor than their share of its
            // replay rate.
            let socketFull = connection.output.queuedBytes > Self.replayQueuedBytes
            if socketFull || nodeOverReplayBudget || connection.budget.replayBudgetLeft(at: now(), limits: limits) == 0
                || !state.replayPace.admits(job.socketID, at: now()) {
                if looks { return .wait }
                guard connection.replayPolled else {
                    state.connections[job.socketID]?.replayPolled = true
                    return .wait
                }
                state.connections[job.socketID]?.replayParked[job.room] = { [self] in
                    continueStream(job, stream, rule: rule, listMembers: listMembers, waits: 0, after: nil)
                }
                return .parked
            }
            return .read(looks ? state.connections[job.socketID]?.takeParkedReplays() ?? [] : [])
        }
        switch gate {
        case .gone(let parked):
            for resume in parked { resume() }
            return
        case .parked:
            return
        case .wait:
            metrics.replayWaits.add(1, ordering: .relaxed)
            return continueStream(job, stream, rule: rule, listMembers: listMembers, waits: waits + 1,
                                  after: .milliseconds(Self.replayFlowWaitMilliseconds << min(waits, 5)))
        case .read(let parked):
            for resume in parked { resume() }
        }
        guard resetPendingJoin(job) else { return }
        var stream = stream
        var step: ReplayStream.Step
        do {
            repeat {
                let page = try roomStore.replayPage(app: app, room: job.room, after: stream.reached, limit: stream.pageLimit,
                                                    maxBytes: Self.replayPageBytes, now: wallMilliseconds())
                step = stream.take(page)
            } while step == .readAgain
        } catch {
            return failJoin(job, RoomError(.storeFull, "\(error)"))
        }
        switch step {
        case .readAgain:
            return
        case .resync(let why):
            return failJoin(job, RoomError(.resync, why + ": rejoin from your position"))
        case .unknownPosition(let current):
            var read = JoinRead(rule: rule, position: current, recovered: false, reason: .unknownPosition)
            if listMembers, rule.rule.presence { read.members = clusterMembers(.room(app: app, room: job.room), limit: Self.maxPresenceMembers) }
            if finishJoin(job, read) { catchUpRooms([(app, job.room)]) }
        case .send(let gap, let events, let done, let current):
            var frames: [String] = []
            frames.reserveCapacity(events.count + 1)
            if let gap { frames.append(RoomFrame.system(RoomSystemEvent.gap, data: gap.told.json, room: job.room, namespace: job.namespace)) }
            for record in events { frames.append(RoomFrame.event(record, room: job.room, namespace: job.namespace, replayed: true)) }
            guard done else {
                enum Sent { case gone, sent, refused(RoomError) }
                let sent = withState { state -> Sent in
                    guard let connection = state.connections[job.socketID], var room = state.rooms[app]?[job.room],
                          let pending = room.pending[job.socketID], pending.generation == job.generation else { return .gone }
                    // A full room refuses a new member before its replay, not after it (the
                    // finish checks again).
                    var probe = room
                    if rule.issuedAt > room.ruleIssuedAt { probe.rule = rule.rule }
                    if stream.pages == 1, let full = probe.refusesJoinAsFull(user: pending.user, socketID: job.socketID) { return .refused(full) }
                    // A member rejoining on the same socket gets nothing live until its
                    // `joined`: what comes meanwhile reaches it through the replay.
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
                    return .sent
                }
                switch sent {
                case .gone: return
                case .refused(let error): return failJoin(job, error)
                case .sent: return continueStream(job, stream, rule: rule, listMembers: listMembers, waits: 0, after: nil)
                }
            }
            var read = JoinRead(rule: rule, position: current, replayFrames: frames, recovered: stream.gap == nil, reason: stream.gap?.reason)
            if listMembers, rule.rule.presence { read.members = clusterMembers(.room(app: app, room: job.room), limit: Self.maxPresenceMembers) }
            if finishJoin(job, read) { catchUpRooms([(app, job.room)]) }
        }
    }

    /// Queues a stream's next page on the lane, at once or `after` a wait (off the lane, so
    /// other rooms' work goes on); a full lane ends the join with `laneRefusal`.
    private func continueStream(_ job: JoinJob, _ stream: ReplayStream, rule: RoomRuleRecord, listMembers: Bool, waits: Int,
                                after wait: DispatchTimeInterval?) {
        let next: @Sendable () -> Void = { [self] in
            // Refused when the lane does not take it, or takes it out again for a client that
            // used the lane less.
            let refused: @Sendable () -> Void = { [self] in
                failJoin(job, Self.laneRefusal)
                // The stream that looked for its connection ends here: the parked ones go on
                // (or meet the full lane themselves).
                if waits > 0 {
                    for resume in withState({ $0.connections[job.socketID]?.takeParkedReplays() ?? [] }) { resume() }
                }
            }
            let queued = lane.submit(LaneJob(client: job.socketID, room: (job.app.id, job.room), run: { [self] in streamJoin(job, stream, rule: rule, listMembers: listMembers, waits: waits) },
                                             refused: refused))
            if !queued { refused() }
        }
        if let wait { DispatchQueue.global().asyncAfter(deadline: .now() + wait, execute: next) } else { next() }
    }

    /// Once a second (`sweep`): while the node's queued bytes are over
    /// `Configuration.replayMemoryBudget`, looks at every connection's queue, and drops without a
    /// close frame (which would wait behind what they do not read; the client sees 1006, backs
    /// off and resumes from its position) those whose queue has stayed over
    /// `replayQueuedBytes` at every look for `replayStallDeadline`, the longest first, until
    /// what they hold brings the node under it. Any connection counts, replaying or not: the
    /// budget is the node's queued bytes, so a few members of a live room that never read would
    /// otherwise hold every replay back. Also gives the heap's free pages back to the kernel
    /// once a node that queued a lot has let most of it go (`HeapTrim`, `HeapTrimTrigger`).
    func sweepSlowReaders() {
        guard let queuedBytes = configurationStorage.queuedBytes else { return }
        let queued = queuedBytes()
        let instant = now()
        if withState({ state in state.heapTrim.observe(queued: queued, connections: state.connections.count, at: instant) }) {
            HeapTrim.releaseFreeMemory()
        }
        let over = queued > configurationStorage.replayMemoryBudget
        let deadline = instant - configurationStorage.replayStallDeadline
        let stalled = withState { state -> [(String, ContinuousClock.Instant, Int)] in
            // Under the budget: one pass forgets the looks of the last time over, then none.
            guard over || state.slowReadersWatched else { return [] }
            state.slowReadersWatched = over
            var stalled: [(String, ContinuousClock.Instant, Int)] = []
            var marks: [(String, ContinuousClock.Instant?)] = []
            for (socketID, connection) in state.connections {
                let bytes = over ? connection.output.queuedBytes : 0
                guard bytes > Self.replayQueuedBytes else {
                    if connection.queueFullSince != nil { marks.append((socketID, nil)) }
                    continue
                }
                guard let since = connection.queueFullSince else {
                    marks.append((socketID, instant))
                    continue
                }
                if since <= deadline { stalled.append((socketID, since, bytes)) }
            }
            // Apart from the loop: a write to the dictionary it walks would copy it.
            for (socketID, since) in marks { state.connections[socketID]?.queueFullSince = since }
            return stalled
        }
        var excess = queued - configurationStorage.replayMemoryBudget
        // The longest first; of those found in the same look, the one holding most.
        for (socketID, _, bytes) in stalled.sorted(by: { ($0.1, -$0.2) < ($1.1, -$1.2) }) where excess > 0 {
            // Dropped, not closed: a close frame would wait behind what it does not read.
            let dropped = withState { state -> Bool in
                guard let connection = state.connections[socketID], connection.queueFullSince != nil else { return false }
                state.queue(.abort(connection.output))
                forget(socketID, in: &state)
                return true
            }
            guard dropped else { continue }
            excess -= bytes
            metrics.slowReadersDropped.add(1, ordering: .relaxed)
            log("dropped \(socketID): its queue stayed over \(Self.replayQueuedBytes / 1024) KiB for \(configurationStorage.replayStallDeadline) with the node over its replay memory")
        }
    }
}

/// When to give freed heap memory back to the kernel: once the bytes queued for clients fall
/// to a quarter of a peak of at least 8 MiB, or the connections to half of a peak of at least
/// 256 (a crowd of slow readers gone: what they held is freed, but `free` keeps it resident),
/// then not again until a new peak, and at most once in 5 s (one held back by that happens at
/// the first look past it, so memory is back within about 6 s of a crowd leaving). A trim
/// costs a pass over the heap's arenas (milliseconds for hundreds of megabytes) holding each
/// arena's lock.
struct HeapTrimTrigger {
    private(set) var queuedPeak = 0
    private(set) var connectionsPeak = 0

    private var lastTrim: ContinuousClock.Instant?

    /// The least time between two trims.
    static let interval = Duration.seconds(5)

    /// Takes the node's queued bytes and connections now; returns whether to trim the heap: at
    /// most once in 5 s, so a peer that opens and closes hundreds of connections cannot make
    /// the node hold its arenas' locks at will (at most a few milliseconds in 5 s).
    mutating func observe(queued: Int, connections: Int, at instant: ContinuousClock.Instant) -> Bool {
        queuedPeak = max(queuedPeak, queued)
        connectionsPeak = max(connectionsPeak, connections)
        let drained = queuedPeak >= 8 * 1024 * 1024 && queued <= queuedPeak / 4
        let left = connectionsPeak >= 256 && connections <= connectionsPeak / 2
        guard drained || left, lastTrim.map({ instant - $0 >= Self.interval }) ?? true else { return false }
        queuedPeak = queued
        connectionsPeak = connections
        lastTrim = instant
        return true
    }
}
