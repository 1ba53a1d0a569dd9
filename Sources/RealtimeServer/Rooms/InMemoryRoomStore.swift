import SystemSupport
import RealtimeProtocol

/// The embedded history store: every room's stream in this process's memory, bounded by a
/// byte budget and a room count. A restart loses the streams, and with them their epochs, so
/// a client resuming afterwards is told its position cannot be recovered (never replayed
/// partially).
public final class InMemoryRoomStore: RoomHistoryStore {
    /// Bytes of kept events across all rooms beyond which appends are refused (`full`).
    public let budget: Int
    /// Most rooms with a stream.
    public let maxRooms: Int
    /// How long a stream with no kept events keeps its epoch and last id after its last use,
    /// in milliseconds (24 hours): an idle room whose events expired still resumes. `expire`
    /// drops such streams past it; at the room limit the least recently used goes sooner.
    public let idleRetention: Int64 = 24 * 3600 * 1000

    struct Stream {
        var epoch: String
        var lastID: UInt64 = 0
        /// Oldest first; `events[head...]` are kept.
        var events: [RoomEventRecord] = []
        var head = 0
        var bytes = 0
        var span: Int64 = Int64(RoomRule.maxSpan) * 1000
        var count = RoomRule.maxHistory
        var touched: Int64 = 0
        /// The stream's place in the store's use order (`State.touches` when last used).
        var touch: UInt64 = 0

        var kept: ArraySlice<RoomEventRecord> { events[head...] }

        /// Drops events past the span or count; returns the bytes freed.
        mutating func trim(now: Int64) -> Int {
            var freed = 0
            while head < events.count, events.count - head > count || events[head].at <= now - span {
                freed += events[head].size
                head += 1
            }
            if head > 64, head * 2 > events.count {
                events.removeFirst(head)
                head = 0
            }
            bytes -= freed
            return freed
        }
    }

    struct State {
        var streams: [String: Stream] = [:]
        var bytes = 0
        /// When every stream was last trimmed (`trimAll`), in milliseconds since 1970.
        var lastTrimAll: Int64 = .min
        /// Streams in the order they were last used, least recent first, from `useHead` on: an
        /// entry is live while its stream's `touch` is still its number (each use appends a new
        /// one), so eviction takes the least recently used stream without looking at the rest.
        var useOrder: [(key: String, touch: UInt64)] = []
        var useHead = 0
        /// Uses so far: the number of the last entry of `useOrder`.
        var touches: UInt64 = 0

        /// Marks `stream` (stored under `key`) as used now: last in the use order.
        mutating func use(_ stream: inout Stream, key: String, at now: Int64) {
            touches += 1
            stream.touch = touches
            stream.touched = now
            useOrder.append((key, touches))
            // Entries of streams used since (or gone) are dropped once they are the majority:
            // each is copied at most once per compaction, so a use costs O(1) amortized.
            if useOrder.count - useHead > 2 * streams.count + 1024 {
                // The stream in use may be out of the table now: only its entry just made is kept
                // (keeping every entry of its key, a room used over and over alone never shrank
                // the list, and each use filtered all of it).
                useOrder = useOrder[useHead...].filter { streams[$0.key]?.touch == $0.touch || ($0.key == key && $0.touch == touches) }
                useHead = 0
            } else if useHead > 4096, useHead * 2 > useOrder.count {
                useOrder.removeFirst(useHead)
                useHead = 0
            }
        }
    }

    /// Most streams an eviction looks at before it refuses a new room: those that still keep
    /// events go to the back of the use order.
    static let maxEvictionProbes = 64

    private let state = Locked(State())

    /// Creates a store.
    ///
    /// - Parameters:
    ///   - budget: bytes of kept events across rooms (256 MiB by default).
    ///   - maxRooms: most rooms with a stream (100,000 by default).
    public init(budget: Int = 256 * 1024 * 1024, maxRooms: Int = 100_000) {
        self.budget = budget
        self.maxRooms = maxRooms
        self.newEpoch = { Crypto.hex(Crypto.randomBytes(8)) }
    }

    /// Creates a store whose epochs come from `newEpoch` (a simulation's seed) instead of 8
    /// random bytes.
    package init(budget: Int = 256 * 1024 * 1024, maxRooms: Int = 100_000, newEpoch: @escaping @Sendable () -> String) {
        self.budget = budget
        self.maxRooms = maxRooms
        self.newEpoch = newEpoch
    }

    /// Makes a new stream's epoch.
    private let newEpoch: @Sendable () -> String

    /// Drops a room's newest `count` events and sets its last id back before them, in the same
    /// epoch, as a Redis replica promoted without its master's last writes has the room.
    package func dropNewest(app: String, room: String, count: Int) {
        state.withLock { state in
            let key = Self.key(app, room)
            guard var stream = state.streams[key] else { return }
            let dropped = min(count, stream.events.count - stream.head)
            guard dropped > 0 else { return }
            for record in stream.events.suffix(dropped) {
                stream.bytes -= record.size
                state.bytes -= record.size
            }
            stream.events.removeLast(dropped)
            stream.lastID -= UInt64(dropped)
            state.streams[key] = stream
        }
    }

    /// Forgets a room's stream as a store that lost it would (a failover that dropped writes, a
    /// flush): its next use starts a new epoch at id 0.
    package func lose(app: String, room: String) {
        state.withLock { state in
            let key = Self.key(app, room)
            state.bytes -= state.streams[key]?.bytes ?? 0
            state.streams[key] = nil
        }
    }

    /// The room's position as kept, `nil` when it has no stream: read without making one or
    /// touching the use order (for a checker that must not change what it checks).
    package func peekPosition(app: String, room: String) -> RoomPosition? {
        state.withLock { state in state.streams[Self.key(app, room)].map { RoomPosition(epoch: $0.epoch, id: $0.lastID) } }
    }

    /// Bytes of kept events now.
    public var bytes: Int { state.withLock { $0.bytes } }

    /// Entries of the use order still in it (tests: it stays within twice the rooms and 1,024).
    var useEntries: Int { state.withLock { $0.useOrder.count - $0.useHead } }

    /// The room's position; a new stream (fresh epoch, id 0) when it has none (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.tooManyRooms` at the room limit with nothing to evict.
    public func position(app: String, room: String, now: Int64) throws(RoomStoreError) -> RoomPosition {
        try state.withLock { state throws(RoomStoreError) in
            let key = Self.key(app, room)
            var stream = try stream(key, in: &state, now: now)
            state.use(&stream, key: key, at: now)
            state.streams[key] = stream
            return RoomPosition(epoch: stream.epoch, id: stream.lastID)
        }
    }

    /// Keeps one event with the next id and trims the stream to the rule (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.full` over the byte budget (nothing kept), `.tooManyRooms`.
    @discardableResult
    public func append(app: String, room: String, event: String, data: String, from: String?, rule: RoomRule, at: Int64) throws(RoomStoreError) -> (epoch: String, record: RoomEventRecord) {
        try state.withLock { state throws(RoomStoreError) in
            let key = Self.key(app, room)
            var stream = try stream(key, in: &state, now: at)
            // Out of the table while it changes, so that appending does not copy its events.
            state.streams[key] = nil
            stream.span = Int64(rule.span) * 1000
            stream.count = rule.history
            let record = RoomEventRecord(id: stream.lastID + 1, at: at, event: event, data: data, from: from)
            state.bytes -= stream.trim(now: at)
            if rule.history > 0 {
                if state.bytes + record.size > budget, state.lastTrimAll <= at - 1000 {
                    // Expired events of idle rooms may hold the budget: free them (once a second at most).
                    state.streams[key] = stream
                    trimAll(in: &state, now: at)
                    stream = state.streams.removeValue(forKey: key) ?? stream
                }
                guard state.bytes + record.size <= budget else {
                    state.streams[key] = stream
                    throw .full(budget: budget)
                }
                stream.events.append(record)
                stream.bytes += record.size
                state.bytes += record.size
                state.bytes -= stream.trim(now: at)
            }
            stream.lastID = record.id
            state.use(&stream, key: key, at: at)
            state.streams[key] = stream
            return (stream.epoch, record)
        }
    }

    /// Every event after `position` if all are still kept, the epoch matches and they come to
    /// at most `maxBytes`, else why not (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.tooManyRooms` when the room has no stream and none can be made.
    public func replay(app: String, room: String, after position: RoomPosition, now: Int64, maxBytes: Int) throws(RoomStoreError) -> RoomReplay {
        try state.withLock { state throws(RoomStoreError) in
            let stream = try trimmedStream(Self.key(app, room), in: &state, now: now)
            let current = RoomPosition(epoch: stream.epoch, id: stream.lastID)
            guard position.epoch == stream.epoch else { return .unrecoverable(.epochChanged, current: current) }
            guard position.id <= stream.lastID else { return .unrecoverable(.unknownPosition, current: current) }
            if position.id == stream.lastID { return .events([], current: current) }
            // Every event after the position must still be kept: the first kept id is at most
            // position.id + 1.
            guard let first = stream.kept.first, first.id <= position.id + 1 else { return .unrecoverable(.expired, current: current) }
            let start = stream.head + Int(position.id + 1 - first.id)
            var bytes = 0
            for record in stream.events[start...] {
                bytes += record.size
                if bytes > maxBytes { return .unrecoverable(.tooLarge, current: current) }
            }
            return .events(Array(stream.events[start...]), current: current)
        }
    }

    /// Up to `limit` kept events after `position`, oldest first, until they come to `maxBytes`,
    /// and the room's position (`RoomHistoryStore`).
    ///
    /// - Throws: `RoomStoreError.tooManyRooms` when the room has no stream and none can be made.
    public func replayPage(app: String, room: String, after position: RoomPosition, limit: Int, maxBytes: Int, now: Int64) throws(RoomStoreError) -> RoomReplayPage {
        try state.withLock { state throws(RoomStoreError) in
            let stream = try trimmedStream(Self.key(app, room), in: &state, now: now)
            let current = RoomPosition(epoch: stream.epoch, id: stream.lastID)
            guard position.epoch == stream.epoch, let first = stream.kept.first, position.id < stream.lastID else {
                return RoomReplayPage(events: [], current: current)
            }
            // Ids are contiguous within the kept slice: the first after the position follows.
            let start = stream.head + Int(min(UInt64(stream.kept.count), position.id < first.id ? 0 : position.id + 1 - first.id))
            var events: [RoomEventRecord] = []
            var bytes = 0
            for record in stream.events[start...].prefix(max(1, limit)) where bytes < maxBytes {
                bytes += record.size
                events.append(record)
            }
            return RoomReplayPage(events: events, current: current)
        }
    }

    /// The newest `limit` events before `before`, oldest first (`RoomHistoryStore`).
    ///
    /// - Throws: never for this store (the protocol allows a remote store to).
    public func page(app: String, room: String, before: UInt64?, limit: Int, now: Int64) throws(RoomStoreError) -> RoomStorePage {
        try state.withLock { state throws(RoomStoreError) in
            let key = Self.key(app, room)
            guard var stream = state.streams.removeValue(forKey: key) else { return RoomStorePage(events: [], more: false) }
            state.bytes -= stream.trim(now: now)
            state.streams[key] = stream
            let kept = stream.kept
            // Ids are contiguous within the kept slice: the end index follows from `before`.
            var end = kept.endIndex
            if let before, let first = kept.first {
                end = before <= first.id ? kept.startIndex : min(kept.endIndex, kept.startIndex + Int(min(before - first.id, UInt64(Int.max / 2))))
            }
            let start = max(kept.startIndex, end - max(0, limit))
            return RoomStorePage(events: Array(kept[start..<end]), more: start > kept.startIndex)
        }
    }

    static func key(_ app: String, _ room: String) -> String { "\(app)\u{0}\(room)" }

    /// The stream for `key` (made when absent), trimmed to its rule and marked used now; taken
    /// out of the table while it is trimmed, so that its events are not copied.
    private func trimmedStream(_ key: String, in state: inout State, now: Int64) throws(RoomStoreError) -> Stream {
        var stream = try stream(key, in: &state, now: now)
        state.streams[key] = nil
        state.bytes -= stream.trim(now: now)
        state.use(&stream, key: key, at: now)
        state.streams[key] = stream
        return stream
    }

    /// The stream for `key`, created with a fresh epoch when absent. At the room limit the
    /// least recently used stream that keeps no event goes (its epoch is lost: a resume there
    /// is told `epoch_changed`, never replayed wrongly), found from the front of the use order
    /// without a scan of the rooms; a stream that still keeps events is moved to the back.
    /// When `maxEvictionProbes` streams all keep events, the new one is refused.
    private func stream(_ key: String, in state: inout State, now: Int64) throws(RoomStoreError) -> Stream {
        if let stream = state.streams[key] { return stream }
        var probes = 0
        while state.streams.count >= maxRooms, probes < min(Self.maxEvictionProbes, state.streams.count), state.useHead < state.useOrder.count {
            let entry = state.useOrder[state.useHead]
            state.useHead += 1
            // A stale entry (its stream used since, or gone) costs nothing more: skipped.
            guard var candidate = state.streams[entry.key], candidate.touch == entry.touch else { continue }
            probes += 1
            state.bytes -= candidate.trim(now: now)
            if candidate.kept.isEmpty {
                state.streams[entry.key] = nil
            } else {
                let touched = candidate.touched
                state.use(&candidate, key: entry.key, at: touched)
                state.streams[entry.key] = candidate
            }
        }
        guard state.streams.count < maxRooms else { throw .tooManyRooms(limit: maxRooms) }
        var stream = Stream(epoch: newEpoch(), touched: now)
        state.use(&stream, key: key, at: now)
        state.streams[key] = stream
        return stream
    }

    /// Drops expired events in every room (`RoomHistoryStore`).
    public func expire(now: Int64) {
        state.withLock { state in trimAll(in: &state, now: now) }
    }

    /// Drops every stream's events past its span (streams untouched since are otherwise trimmed
    /// only when next used), and the streams that kept no event for `idleRetention`.
    private func trimAll(in state: inout State, now: Int64) {
        for key in Array(state.streams.keys) {
            guard var stream = state.streams[key] else { continue }
            if stream.kept.isEmpty {
                if stream.touched <= now - idleRetention { state.streams[key] = nil }
                continue
            }
            guard let oldest = stream.kept.first, oldest.at <= now - stream.span else { continue }
            state.bytes -= stream.trim(now: now)
            state.streams[key] = stream
        }
        state.lastTrimAll = now
    }
}
