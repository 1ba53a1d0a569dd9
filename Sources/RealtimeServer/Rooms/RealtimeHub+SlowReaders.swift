import Foundation
import RealtimeProtocol
import SystemSupport

/// The node's queued bytes for its clients: slow readers dropped while the node is over its
/// replay memory, and the heap trimmed once a crowd let go of what it held (a join's streamed
/// replay waits for the same budget: `RealtimeHub+RoomJoin.swift`).
extension RealtimeHub {
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
        let dropped = withState { slowReadersDropped(queued: queued, at: instant, in: &$0) }
        for socketID in dropped {
            metrics.slowReadersDropped.add(1, ordering: .relaxed)
            log("dropped \(socketID): its queue stayed over \(Self.replayQueuedBytes / 1024) KiB for \(configurationStorage.replayStallDeadline) with the node over its replay memory")
        }
    }

    /// The sweep's look at slow readers with the node's `queued` bytes, under the lock: while
    /// over `Configuration.replayMemoryBudget`, each connection over `replayQueuedBytes` is
    /// marked from when (a connection under it, or every one once the node is back under,
    /// unmarked), and those marked `replayStallDeadline` ago or more are dropped (their
    /// connections aborted and forgotten), the longest first, of those marked in the same look
    /// the one holding most, until what they held brings the node under.
    ///
    /// - Returns: the socket ids dropped.
    func slowReadersDropped(queued: Int, at instant: ContinuousClock.Instant, in state: inout State) -> [String] {
        let over = queued > configurationStorage.replayMemoryBudget
        // Under the budget: one pass forgets the looks of the last time over, then none.
        guard over || state.slowReadersWatched else { return [] }
        state.slowReadersWatched = over
        let deadline = instant - configurationStorage.replayStallDeadline
        var stalled: [(socketID: String, since: ContinuousClock.Instant, bytes: Int)] = []
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
        var excess = queued - configurationStorage.replayMemoryBudget
        var dropped: [String] = []
        for reader in stalled.sorted(by: { ($0.since, -$0.bytes) < ($1.since, -$1.bytes) }) where excess > 0 {
            // Dropped, not closed: a close frame would wait behind what it does not read.
            guard let connection = state.connections[reader.socketID] else { continue }
            state.queue(.abort(connection.output))
            forget(reader.socketID, in: &state)
            excess -= reader.bytes
            dropped.append(reader.socketID)
        }
        return dropped
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
