import RealtimeProtocol

/// What a member resuming from a position gets (docs/rooms-protocol.md "Replay"): every event
/// it missed, or, when some of them are gone, the gap (told first) and every missed event
/// that is still kept. Never a silent skip, never all-or-nothing.
public enum RoomResume: Hashable, Sendable {
    /// Every missed event (possibly none), oldest first: they bring the member to `current`.
    case events([RoomEventRecord], current: RoomPosition)
    /// Some missed events are gone: `gap` says which; `events` (oldest first, possibly none)
    /// are the missed ones still kept, which follow it.
    case gap(RoomResumeGap, events: [RoomEventRecord], current: RoomPosition)
    /// The position is ahead of the stream (an id never given out: a store that lost writes);
    /// nothing is replayed.
    case unknownPosition(current: RoomPosition)
    /// The replay is past what is left of the reader's budget (`budgetLimited`): nothing is
    /// replayed now; asked again later, it may be whole.
    case overBudget(current: RoomPosition)
}

/// The missed events a resume cannot bring, as the store found them (the protocol's `RoomGap`
/// is what the member is told).
public struct RoomResumeGap: Hashable, Sendable {
    /// Why: `expired` (past the room's span or count), `epochChanged` (the history itself was
    /// lost), `tooLarge` (more than one replay may carry: the oldest are left out).
    public var reason: RoomUnrecoverableReason
    /// Where the member was: every event after it in its epoch is missed.
    public var previous: RoomPosition
    /// Where the replay that follows starts from: its epoch, and the id before its first event
    /// (the room's last id when nothing follows).
    public var resume: RoomPosition
    /// When the first event that follows was kept, in milliseconds since 1970: every missing
    /// event was kept before it (`nil` when nothing follows).
    public var before: Int64?

    /// Creates a gap.
    public init(reason: RoomUnrecoverableReason, previous: RoomPosition, resume: RoomPosition, before: Int64?) {
        self.reason = reason
        self.previous = previous
        self.resume = resume
        self.before = before
    }

    /// What the member is told: the missing ids of `resume.epoch` (after `previous` in the same
    /// epoch, from 1 in a new one), and `previous` when the epoch changed.
    public var told: RoomGap {
        let first = previous.epoch == resume.epoch ? previous.id + 1 : 1
        return RoomGap(reason: reason.rawValue, epoch: resume.epoch, missing: first <= resume.id ? first...resume.id : nil, before: before,
                       previous: previous.epoch == resume.epoch ? nil : previous)
    }
}

extension RoomHistoryStore {
    /// What a member resuming from `position` gets: `replay(app:room:after:now:maxBytes:)`'s
    /// events when it can answer them all; otherwise the gap and the missed events still kept,
    /// the newest that fit in `maxBytes`, read newest first through `page` (one `replay`, then
    /// pages sized to the bytes left: a remote store sends about `maxBytes`). After an epoch
    /// change every event the new epoch keeps is missed: all of them follow. The kept events
    /// must follow each other without a hole: where one is missing, the older ones count as
    /// gone too (never a replay that skips inside).
    ///
    /// - Parameters:
    ///   - now: milliseconds since 1970.
    ///   - maxBytes: most bytes of records (`RoomEventRecord.size`) to replay.
    ///   - budgetLimited: `maxBytes` is what is left of the reader's budget, not the most one
    ///     replay may carry: a replay it cuts short is `.overBudget` (asked again later, it may
    ///     be whole), decided before any page is read.
    /// - Throws: as `replay` and `page`.
    public func resume(app: String, room: String, after position: RoomPosition, now: Int64, maxBytes: Int,
                       budgetLimited: Bool = false) throws(RoomStoreError) -> RoomResume {
        var reason: RoomUnrecoverableReason
        let current: RoomPosition
        switch try replay(app: app, room: room, after: position, now: now, maxBytes: maxBytes) {
        case .events(let records, let position): return .events(records, current: position)
        case .unrecoverable(.unknownPosition, let position): return .unknownPosition(current: position)
        case .unrecoverable(.tooLarge, let position) where budgetLimited: return .overBudget(current: position)
        case .unrecoverable(let why, let position): (reason, current) = (why, position)
        }
        // The missed events still kept: those after the position (all of a new epoch's), up to
        // the position the replay answered, newest first until the bytes run out.
        let floor = position.epoch == current.epoch ? position.id : 0
        var kept: [RoomEventRecord] = []
        var bytes = 0
        var stoppedOnBytes = false
        var before: UInt64? = current.id + 1
        // The first page sized for about 1 KiB an event, the next ones by the records read.
        var limit = max(1, min(Self.resumePage, maxBytes / 1024 + 1))
        reading: while let upper = before, upper > floor + 1 {
            let page = try page(app: app, room: room, before: upper, limit: limit, now: now)
            for record in page.events.reversed() where record.id < upper && record.id <= current.id {
                // Newest first, each the one before the last: a hole ends what can be replayed.
                if let last = kept.last, record.id != last.id - 1 { break reading }
                guard record.id > floor else { break reading }
                bytes += record.size
                guard bytes <= maxBytes else {
                    stoppedOnBytes = true
                    break reading
                }
                kept.append(record)
            }
            guard page.more, let oldest = page.events.first, oldest.id < upper else { break }
            before = oldest.id
            let average = max(64, page.events.reduce(0) { $0 + $1.size } / max(1, page.events.count))
            limit = max(1, min(Self.resumePage, (maxBytes - bytes) / average + 1))
        }
        if stoppedOnBytes {
            if budgetLimited { return .overBudget(current: current) }
            reason = .tooLarge
        }
        kept.reverse()
        // The newest kept must be the room's last (else what follows the replay would skip).
        if let newest = kept.last, newest.id != current.id { kept = [] }
        let resume = RoomPosition(epoch: current.epoch, id: kept.first.map { $0.id - 1 } ?? current.id)
        // The replay fit before the pages were read, or the events were trimmed meanwhile: a
        // whole answer is still an answer with no gap.
        if position.epoch == current.epoch, resume.id == position.id { return .events(kept, current: current) }
        return .gap(RoomResumeGap(reason: reason, previous: position, resume: resume, before: kept.first?.at), events: kept, current: current)
    }
}

extension RoomHistoryStore {
    /// Events a `resume` reads at a time.
    static var resumePage: Int { 100 }
}
