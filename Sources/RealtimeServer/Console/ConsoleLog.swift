import Synchronization
import SystemSupport

/// One line of the operator's console's live log: a connection, a subscription, a room
/// membership, an event or an error of one app, as the hub decided it.
public struct ConsoleEntry: Sendable, Hashable {
    /// What happened.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// A connection was accepted.
        case connect
        /// A connection ended.
        case disconnect
        /// A channel subscription was made.
        case subscribe
        /// A channel subscription ended.
        case unsubscribe
        /// A member joined a room.
        case join
        /// A member left a room.
        case leave
        /// A channel event was handed out (from the HTTP API, a client or the cluster's bus).
        case event
        /// A room event was handed out.
        case roomEvent = "room_event"
        /// A request was refused or broke the protocol.
        case error
    }

    /// Its place in its app's log: grows by one per entry kept (1 is the first).
    public var seq: UInt64 = 0
    /// When it was recorded, in milliseconds since 1970.
    public var at: Int64 = 0
    /// The app it belongs to.
    public var app: String
    /// What happened.
    public var kind: Kind
    /// The connection concerned, if one.
    public var socketID: String?
    /// The channel concerned, if one.
    public var channel: String?
    /// The room concerned, if one.
    public var room: String?
    /// The user concerned (signed in, presence member or room member), if known.
    public var userID: String?
    /// The event's name, for `event` and `room_event`.
    public var event: String?
    /// A short text: the error, the number of deliveries, the event's id.
    public var detail: String

    /// Creates an entry; names and texts are cut to `ConsoleLog.maxFieldBytes` UTF-8 bytes
    /// (at a Unicode scalar boundary), so an entry's size is bounded whatever a peer sent, and their
    /// control characters are written as `\u{…}`, so a name cannot forge a line of the log.
    public init(app: String, kind: Kind, socketID: String? = nil, channel: String? = nil, room: String? = nil,
                userID: String? = nil, event: String? = nil, detail: String = "") {
        func cut(_ text: String) -> String {
            let plain = text.utf8.allSatisfy { $0 >= 0x20 && $0 != 0x7F }
            guard !plain || text.utf8.count > ConsoleLog.maxFieldBytes else { return text }
            var result = ""
            for scalar in text.unicodeScalars {
                let shown = scalar.value < 0x20 || scalar.value == 0x7F ? "\\u{\(String(scalar.value, radix: 16))}" : String(scalar)
                guard result.utf8.count + shown.utf8.count <= ConsoleLog.maxFieldBytes else { break }
                result += shown
            }
            return result
        }
        self.app = app
        self.kind = kind
        self.socketID = socketID.map(cut)
        self.channel = channel.map(cut)
        self.room = room.map(cut)
        self.userID = userID.map(cut)
        self.event = event.map(cut)
        self.detail = cut(detail)
    }
}

/// The console's live log: what the hub did, per app, kept only while a console looks.
///
/// Nothing is recorded, and the hub builds no entry, unless a console asked for the log or a
/// snapshot in the last `watchWindow` (`admits`: one relaxed atomic load on the hub's paths
/// while no console looks). While watched, each app keeps its last `capacity` entries and
/// admits at most `entriesPerSecond` a second (counted in atomics, before any entry is built):
/// a busy app's log is sampled, the entries left out counted (`Page.skipped`), so the console
/// costs a busy node a bounded amount of memory and work.
public final class ConsoleLog: Sendable {
    /// Entries kept per app (the oldest go first).
    public static let capacity = 1_000
    /// Entries recorded per app per second of the wall clock; the rest are counted, not kept.
    public static let entriesPerSecond = 200
    /// Longest name or text of an entry, in UTF-8 bytes.
    public static let maxFieldBytes = 200
    /// How long after a console's last request the log keeps recording.
    public static let watchWindow: Duration = .seconds(10)

    /// What a console gets for `entries(app:after:)`.
    public struct Page: Sendable, Equatable {
        /// The entries after the one asked for, oldest first.
        public var entries: [ConsoleEntry]
        /// The `seq` to ask after next time.
        public var next: UInt64
        /// Entries the per-second limit left out between the one asked after (or the first
        /// returned, when that one is no longer kept) and the last returned: each counted once,
        /// with the page of the first entry kept after it (0 when none is returned).
        public var skipped: UInt64
        /// Entries recorded after the one asked for that are no longer kept (the ring moved on
        /// while the console did not ask): the gap before the first returned.
        public var lost: UInt64 = 0
        /// The app log's epoch (empty when the app has none yet): a console sends it back with
        /// its next `seq`, so a `seq` of an earlier log is never read against this one.
        public var epoch: String = ""
    }

    /// An app's admissions in the current second of the wall clock, and the entries left out
    /// so far.
    private final class Budget: Sendable {
        let watched = Atomic<Bool>(false)
        let second = Atomic<Int64>(-1)
        let used = Atomic<Int>(0)
        let skipped = Atomic<UInt64>(0)
    }

    private struct AppLog {
        /// A new random one each time the app's log starts (the node's start, or the log freed
        /// after no console looked at it): its seqs start again at 1.
        let epoch = String(UInt64.random(in: 1...UInt64.max), radix: 16)
        var ring: [ConsoleEntry] = []
        /// Where the oldest entry is in `ring` once it is full.
        var start = 0
        var lastSeq: UInt64 = 0
        /// The app's skipped count as of each kept entry (same order as `ring`).
        var skippedAt: [UInt64] = []

        /// The seq of the oldest kept entry (seqs are consecutive in the ring).
        var oldestSeq: UInt64 { lastSeq - UInt64(ring.count) + 1 }

        /// Where the entry of `seq` (kept) is in `ring`.
        func position(of seq: UInt64) -> Int { (start + Int(seq - oldestSeq)) % ring.count }
    }

    private struct State {
        var apps: [String: AppLog] = [:]
        /// Apps a console looks at, until when.
        var watchedUntil: [String: ContinuousClock.Instant] = [:]
        /// Apps no console looks at any more, since when: their log is freed `keptUnwatched` after.
        var unwatchedSince: [String: ContinuousClock.Instant] = [:]
    }

    /// How long an app's log is kept after the last console stopped looking at it.
    public static let keptUnwatched: Duration = .seconds(300)

    /// Whether a console looks at any app: the hub's one load while none does.
    private let watching = Atomic<Bool>(false)
    private let state = Locked(State())
    private let budgets: [String: Budget]
    private let wallMilliseconds: @Sendable () -> Int64

    /// Creates an empty log.
    ///
    /// - Parameters:
    ///   - apps: the ids of the apps whose entries it keeps (others are never admitted).
    ///   - wallMilliseconds: the wall clock, milliseconds since 1970 (the entries' `at` and the
    ///     per-second limit).
    public init(apps: [String], wallMilliseconds: @escaping @Sendable () -> Int64) {
        self.budgets = Dictionary(apps.map { ($0, Budget()) }, uniquingKeysWith: { first, _ in first })
        self.wallMilliseconds = wallMilliseconds
    }

    /// Whether a console looked at any app in the last `watchWindow`.
    public var isWatched: Bool { watching.load(ordering: .relaxed) }

    /// Whether a console looked at `app` in the last `watchWindow`.
    public func isWatched(app: String) -> Bool { isWatched && budgets[app]?.watched.load(ordering: .relaxed) == true }

    /// Whether an entry of `app` is to be recorded now: `false` while no console looks at the
    /// app, for an app not kept, and past `entriesPerSecond` in this second of the wall clock
    /// (then it is counted as skipped). A `true` is a promise to `record` the entry: the hub asks
    /// before it builds one. Lock-free (atomics), so the hub may ask under its own lock.
    public func admits(app: String) -> Bool {
        guard isWatched, let budget = budgets[app], budget.watched.load(ordering: .relaxed) else { return false }
        let second = wallMilliseconds() / 1000
        let seen = budget.second.load(ordering: .relaxed)
        if seen != second, budget.second.compareExchange(expected: seen, desired: second, ordering: .relaxed).exchanged {
            budget.used.store(0, ordering: .relaxed)
        }
        if budget.used.wrappingAdd(1, ordering: .relaxed).newValue <= Self.entriesPerSecond { return true }
        budget.skipped.wrappingAdd(1, ordering: .relaxed)
        return false
    }

    /// A console asked for `app`'s log or snapshot at `now`: its entries are recorded until
    /// `now + watchWindow`.
    public func watch(app: String, now: ContinuousClock.Instant) {
        guard let budget = budgets[app] else { return }
        state.withLock { state in
            state.watchedUntil[app] = now + Self.watchWindow
            state.unwatchedSince[app] = nil
            budget.watched.store(true, ordering: .relaxed)
            watching.store(true, ordering: .relaxed)
        }
    }

    /// Stops recording an app once the window after the last console's request for it has
    /// passed, and frees its log `keptUnwatched` later (the hub's one-second sweep calls it):
    /// until then the entries stay for the next console.
    public func sweep(now: ContinuousClock.Instant) {
        state.withLock { state in
            let expired = state.watchedUntil.filter { $0.value <= now }.map(\.key)
            for app in expired {
                state.watchedUntil[app] = nil
                state.unwatchedSince[app] = now
            }
            for (app, since) in state.unwatchedSince where now - since >= Self.keptUnwatched {
                state.unwatchedSince[app] = nil
                state.apps[app] = nil
            }
            // Stored under the lock, so a `watch` taken meanwhile is not overwritten.
            for app in expired { budgets[app]?.watched.store(false, ordering: .relaxed) }
            if state.watchedUntil.isEmpty { watching.store(false, ordering: .relaxed) }
        }
    }

    /// Records an entry `admits` let through (its `seq` and `at` are given here).
    public func record(_ entry: ConsoleEntry) {
        guard let budget = budgets[entry.app] else { return }
        let now = wallMilliseconds()
        let skipped = budget.skipped.load(ordering: .relaxed)
        state.withLock { state in
            // Taken out while it changes, so the ring is not copied.
            var log = state.apps.removeValue(forKey: entry.app) ?? AppLog()
            defer { state.apps[entry.app] = log }
            log.lastSeq += 1
            var kept = entry
            kept.seq = log.lastSeq
            kept.at = now
            if log.ring.count < Self.capacity {
                log.ring.append(kept)
                log.skippedAt.append(skipped)
            } else {
                log.ring[log.start] = kept
                log.skippedAt[log.start] = skipped
                log.start = (log.start + 1) % Self.capacity
            }
        }
    }

    /// The app's entries after `seq`, at most `limit` (for `seq` 0, a console's first request:
    /// the newest `limit`). A `seq` of another epoch than the log's is an earlier log's (the
    /// node restarted, or the log was freed): the entries come from this log's start, its
    /// oldest kept entry, with those no longer kept counted in `lost`. A `seq` past the last
    /// entry with no epoch (a console that sent none) reads as 0.
    ///
    /// - Parameters:
    ///   - app: the app id.
    ///   - seq: the last `seq` the console has.
    ///   - epoch: the epoch that `seq` is of (the last page's), or `nil` when the console has none.
    ///   - limit: most entries returned (the rest come at the next request).
    public func entries(app: String, after seq: UInt64, epoch: String? = nil, limit: Int = capacity) -> Page {
        state.withLock { state in
            guard let log = state.apps[app], !log.ring.isEmpty else { return Page(entries: [], next: 0, skipped: 0) }
            let otherEpoch = epoch != nil && epoch != log.epoch
            let seq = otherEpoch || seq > log.lastSeq ? 0 : seq
            // Entries after `seq`, or from the oldest kept when `seq` is no longer kept; a
            // console's first request (0) gets the newest `limit`, a cursor of another epoch
            // this log's oldest.
            let newest = log.lastSeq >= UInt64(max(1, limit)) ? log.lastSeq - UInt64(max(1, limit)) + 1 : 1
            let first = otherEpoch ? log.oldestSeq : seq == 0 ? max(newest, log.oldestSeq) : max(seq + 1, log.oldestSeq)
            let count = min(Int(log.lastSeq + 1 - first), max(0, limit))
            let entries = (0..<count).map { log.ring[log.position(of: first + UInt64($0))] }
            guard count > 0 else { return Page(entries: [], next: seq, skipped: 0, epoch: log.epoch) }
            // Skips between the entry asked after (or the first returned, when it is gone) and
            // the last returned; those after the last come with the next page.
            let last = first + UInt64(count) - 1
            let base = seq >= log.oldestSeq ? log.skippedAt[log.position(of: seq)] : log.skippedAt[log.position(of: first)]
            let upTo = log.skippedAt[log.position(of: last)]
            return Page(entries: entries, next: last, skipped: upTo >= base ? upTo - base : 0,
                        lost: otherEpoch ? first - 1 : seq != 0 && first > seq + 1 ? first - seq - 1 : 0, epoch: log.epoch)
        }
    }
}
