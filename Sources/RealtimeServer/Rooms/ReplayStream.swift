import RealtimeProtocol

/// A member's resume read and sent a page at a time (docs/rooms-protocol.md
/// "Replay"): what each page of the store means, decided on plain
/// values; the hub reads the pages on its lane and sends what this decides.
///
/// The first page finds the gap, if any (the member's epoch is gone, or events after its
/// position are no longer kept); every later page must follow the last one without a hole,
/// since the member cannot be told a second gap between replayed events. A later page that
/// cannot (the room's epoch changed, or a busy room's trim dropped events the stream had not
/// reached) ends the stream with `resync`: the member rejoins from where it got to, and that
/// join is told the gap.
struct ReplayStream: Hashable, Sendable {
    /// What the hub does with a page it read.
    enum Step: Hashable, Sendable {
        /// Read again from `reached`: the first read found the member's epoch gone, and the
        /// new epoch is replayed from its start.
        case readAgain
        /// Send `gap` (first, when this page found one) and `events` with `meta.replayed`;
        /// `done` when they reach the room's position `current` (then `joined` follows).
        case send(gap: RoomResumeGap?, events: [RoomEventRecord], done: Bool, current: RoomPosition)
        /// The position is ahead of the room's stream (an id never given out): nothing is
        /// replayed, `joined` says `unknown_position`.
        case unknownPosition(current: RoomPosition)
        /// The stream cannot go on without a hole: the member is told `resync`.
        case resync(String)
    }

    /// Where the member resumes from.
    let since: RoomPosition
    /// How far the replay got: the epoch it reads and the last id sent (`since` at first).
    private(set) var reached: RoomPosition
    /// The gap told on the first page, if any (`joined` then says `recovered: false`).
    private(set) var gap: RoomResumeGap?
    /// Pages taken so far.
    private(set) var pages = 0
    /// Events sent so far.
    private(set) var sent = 0
    /// The member's epoch was found gone on the first read (`readAgain` asked once).
    private var epochChanged = false
    /// Bytes of records a page is meant to hold.
    let pageBytes: Int
    /// Most events a page asks for.
    let maxPageEvents: Int
    /// Events the next page asks for: sized by the last page's records to about `pageBytes`
    /// (at first as if each were 1 KiB), so a store sends about a page's bytes, not
    /// `maxPageEvents` records of 10 KiB each.
    private(set) var pageLimit: Int

    /// A stream from `since`, read in pages of about `pageBytes` bytes of records and at most
    /// `maxPageEvents` events.
    init(since: RoomPosition, pageBytes: Int = 256 * 1024, maxPageEvents: Int = 2000) {
        self.since = since
        reached = since
        self.pageBytes = max(1, pageBytes)
        self.maxPageEvents = max(1, maxPageEvents)
        pageLimit = min(self.maxPageEvents, self.pageBytes / 1024 + 1)
    }

    /// Most events the stream sends before it gives up catching a room whose events come
    /// faster than its member takes them (`resync`): twice what a room may keep.
    static let maxEvents = 2 * RoomRule.maxHistory

    /// What `page` (read after `reached`) means.
    mutating func take(_ page: RoomReplayPage) -> Step {
        let current = page.current
        if current.epoch != reached.epoch {
            // Only the first read may find another epoch: afterwards the room's history was
            // lost under the stream.
            guard pages == 0, !epochChanged else { return .resync("the room's history was lost during the replay (a new epoch)") }
            epochChanged = true
            reached = RoomPosition(epoch: current.epoch, id: 0)
            return .readAgain
        }
        let first = pages == 0
        pages += 1
        if first, !epochChanged, since.id > current.id { return .unknownPosition(current: current) }
        // Only what follows the position up to the room's, each one more than the last.
        var events: [RoomEventRecord] = []
        events.reserveCapacity(page.events.count)
        for record in page.events where record.id > reached.id && record.id <= current.id {
            if let last = events.last, record.id != last.id + 1 { break }
            events.append(record)
        }
        if !page.events.isEmpty {
            let average = max(64, page.events.reduce(0) { $0 + $1.size } / page.events.count)
            pageLimit = min(maxPageEvents, max(1, pageBytes / average + 1))
        }
        let next = events.first?.id ?? current.id + 1
        var told: RoomResumeGap?
        if next != reached.id + 1 || (first && epochChanged) {
            // A hole before the page's first event (or the epoch changed): on the first page,
            // the gap; afterwards, nothing left but a resync.
            guard first else {
                return .resync("events not yet replayed were dropped from the room's history (\(reached.id + 1)…\(max(reached.id + 1, next - 1)))")
            }
            let resume = RoomPosition(epoch: current.epoch, id: min(next, current.id + 1) - 1)
            told = RoomResumeGap(reason: epochChanged ? .epochChanged : .expired, previous: since, resume: resume, before: events.first?.at)
            gap = told
            reached = resume
        }
        reached.id = events.last?.id ?? reached.id
        sent += events.count
        guard reached.id >= current.id || sent < Self.maxEvents else {
            return .resync("the room's events came faster than the replay reached them (\(sent) replayed)")
        }
        return .send(gap: told, events: events, done: reached.id >= current.id, current: current)
    }
}
