import RealtimeProtocol
import RealtimeServer
import Testing

@Suite("In-memory room store")
struct InMemoryRoomStoreTests {
    @Test("streams are trimmed by their own count and span: a busy room never evicts a quiet one")
    func perRoomTrimming() throws {
        let store = InMemoryRoomStore()
        let busy = RoomRule(history: 10)
        let quiet = RoomRule(history: 10, span: 60)
        let start = try store.append(app: "1", room: "quiet", event: "e", data: "1", from: nil, rule: quiet, at: 0)
        for index in 0..<1000 { try store.append(app: "1", room: "busy", event: "e", data: "\(index)", from: nil, rule: busy, at: 1000) }
        #expect(try store.page(app: "1", room: "busy", before: nil, limit: 100, now: 1000).events.map(\.id) == Array(991...1000))
        #expect(try store.page(app: "1", room: "quiet", before: nil, limit: 100, now: 1000).events.map(\.id) == [1])
        // Past the quiet room's 60 s span its event is gone, but its position stays.
        #expect(try store.page(app: "1", room: "quiet", before: nil, limit: 100, now: 61_001).events.isEmpty)
        #expect(try store.replay(app: "1", room: "quiet", after: RoomPosition(epoch: start.epoch, id: 1), now: 61_001) == .events([], current: RoomPosition(epoch: start.epoch, id: 1)))
        #expect(try store.replay(app: "1", room: "quiet", after: RoomPosition(epoch: start.epoch, id: 0), now: 61_001) == .unrecoverable(.expired, current: RoomPosition(epoch: start.epoch, id: 1)))
    }

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

    @Test("a room rule with history 0 keeps no event but still numbers them")
    func noHistory() throws {
        let store = InMemoryRoomStore()
        let rule = RoomRule(history: 0)
        let first = try store.append(app: "1", room: "r", event: "e", data: "1", from: nil, rule: rule, at: 0)
        let second = try store.append(app: "1", room: "r", event: "e", data: "2", from: nil, rule: rule, at: 0)
        #expect(first.record.id == 1 && second.record.id == 2 && store.bytes == 0)
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
}
