import RealtimeProtocol
@testable import RealtimeServer
import TestSupport
import Testing

/// What only the in-memory store does (its byte budget and room limit); the contract both
/// stores hold is in RealtimeClusterTests (`RoomStoreContractTests`).
@Suite("In-memory room store")
struct InMemoryRoomStoreTests {
    @Test("the byte budget refuses an append with full and keeps what it had")
    func budget() throws {
        let store = InMemoryRoomStore(budget: 1000)
        let rule = RoomRule(history: 100)
        var kept = 0
        do {
            while true {
                try store.append(app: "1", room: "r", event: "e", data: String(repeating: "x", count: 100), from: nil, rule: rule, at: 0)
                kept += 1
            }
        } catch {
            #expect(error == .full(budget: 1000))
        }
        #expect(kept > 0 && store.bytes <= 1000)
        #expect(try store.page(app: "1", room: "r", before: nil, limit: 100, now: 0).events.count == kept)
    }

    @Test("the room limit refuses a new stream with tooManyRooms only while every stream keeps events")
    func roomLimit() throws {
        let store = InMemoryRoomStore(maxRooms: 2)
        let rule = RoomRule(history: 5, span: 60)
        try store.append(app: "1", room: "a", event: "e", data: "1", from: nil, rule: rule, at: 0)
        try store.append(app: "1", room: "b", event: "e", data: "1", from: nil, rule: rule, at: 0)
        #expect(throws: RoomStoreError.tooManyRooms(limit: 2)) { try store.position(app: "1", room: "c", now: 1000) }
        // Past the span both streams are empty: one can go.
        #expect(throws: Never.self) { try store.position(app: "1", room: "c", now: 61_001) }
    }

    @Test("expired events of idle rooms are freed, by expire() and by an append that finds the budget full")
    func idleRoomsFreed() throws {
        let store = InMemoryRoomStore(budget: 5000)
        let rule = RoomRule(history: 100, span: 1)
        for room in 0..<20 { try store.append(app: "1", room: "r\(room)", event: "e", data: String(repeating: "x", count: 100), from: nil, rule: rule, at: 0) }
        #expect(throws: RoomStoreError.full(budget: 5000)) {
            try store.append(app: "1", room: "new", event: "e", data: String(repeating: "x", count: 4000), from: nil, rule: rule, at: 500)
        }
        // Two seconds later every event is past its 1 s span: the full append frees them itself.
        #expect(throws: Never.self) { try store.append(app: "1", room: "new", event: "e", data: String(repeating: "x", count: 4000), from: nil, rule: rule, at: 2000) }
        store.expire(now: 10_000)
        #expect(store.bytes == 0)
    }

    @Test("at the room limit the least recently used empty streams make room, even within the idle retention")
    func roomLimitEvictsEmpty() throws {
        let store = InMemoryRoomStore(maxRooms: 10)
        for room in 0..<10 { _ = try store.position(app: "1", room: "r\(room)", now: Int64(room)) }
        let position = try store.position(app: "1", room: "fresh", now: 100)
        #expect(position.id == 0)
        // r0 (the least recently used) lost its epoch: a resume there is told, not replayed.
        let replay = try store.replay(app: "1", room: "r0", after: RoomPosition(epoch: "old", id: 0), now: 1200)
        guard case .unrecoverable(.epochChanged, _) = replay else { Issue.record("\(replay)"); return }
    }

    @Test("a store whose every stream keeps events refuses new rooms at once, looking for evictable streams at most once a second")
    func fullOfEvents() throws {
        let store = InMemoryRoomStore(maxRooms: 3)
        let rule = RoomRule(history: 5)
        for room in 0..<3 { try store.append(app: "1", room: "r\(room)", event: "e", data: "1", from: nil, rule: rule, at: 0) }
        for attempt in 0..<100 {
            #expect(throws: RoomStoreError.tooManyRooms(limit: 3)) { try store.position(app: "1", room: "new\(attempt)", now: Int64(attempt)) }
        }
        #expect(try store.position(app: "1", room: "r1", now: 100).id == 1, "existing rooms still answer")
    }

    @Test("at a limit of 100,000 rooms, 20,000 new rooms each evict the least recently used without a scan: no call takes 20 ms, used and event-keeping rooms stay (issue 30, finding 12)", .timeLimit(.minutes(2)))
    func evictionWithoutScan() throws {
        let store = InMemoryRoomStore(maxRooms: 100_000)
        let rule = RoomRule(history: 5)
        try store.append(app: "1", room: "kept", event: "e", data: "1", from: nil, rule: rule, at: 0)
        for room in 1..<100_000 { _ = try store.position(app: "1", room: "r\(room)", now: 1) }
        let favourite = try store.position(app: "1", room: "r1", now: 2)
        var slowest = Duration.zero
        for room in 0..<20_000 {
            let start = ContinuousClock.now
            _ = try store.position(app: "1", room: "new\(room)", now: 3)
            slowest = max(slowest, ContinuousClock.now - start)
        }
        #expect(slowest < .milliseconds(20 * Sanitizers.slowdown), "the slowest new room took \(slowest)")
        // r1 was used last among the first rooms: it kept its epoch; r2 did not.
        #expect(try store.position(app: "1", room: "r1", now: 4) == favourite)
        let replay = try store.replay(app: "1", room: "r2", after: RoomPosition(epoch: "old", id: 0), now: 4)
        guard case .unrecoverable(.epochChanged, _) = replay else { Issue.record("\(replay)"); return }
        #expect(try store.page(app: "1", room: "kept", before: nil, limit: 5, now: 4).events.count == 1, "a room keeping events is never evicted")
    }

    @Test("a room used over and over with no other room between keeps the use order short (each use used to filter every entry it ever made)")
    func oneBusyRoomKeepsTheUseOrderShort() throws {
        let store = InMemoryRoomStore()
        for index in 0..<20_000 {
            try store.append(app: "1", room: "busy", event: "e", data: "\(index)", from: nil, rule: RoomRule(history: 10), at: Int64(index))
        }
        #expect(store.useEntries <= 2 * 1 + 1024 + 1, "\(store.useEntries) entries for one room")
    }
}
