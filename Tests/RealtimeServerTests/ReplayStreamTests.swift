import RealtimeProtocol
import Testing
@testable import RealtimeServer

/// `ReplayStream`'s decisions on plain pages: the gap found on the first page only, pages that
/// follow without a hole, the end at the room's position, and a resync for what cannot go on.
struct ReplayStreamTests {
    static func records(_ ids: ClosedRange<UInt64>) -> [RoomEventRecord] {
        ids.map { RoomEventRecord(id: $0, at: Int64($0) * 10, event: "e", data: "{}", from: nil) }
    }

    static func page(_ ids: ClosedRange<UInt64>?, epoch: String = "E", last: UInt64) -> RoomReplayPage {
        RoomReplayPage(events: ids.map(records) ?? [], current: RoomPosition(epoch: epoch, id: last))
    }

    @Test("every missed event kept: pages follow one another, the last one done at the room's position, no gap")
    func wholePages() {
        var stream = ReplayStream(since: RoomPosition(epoch: "E", id: 10))
        #expect(stream.take(Self.page(11...20, last: 30)) == .send(gap: nil, events: Self.records(11...20), done: false, current: RoomPosition(epoch: "E", id: 30)))
        #expect(stream.reached == RoomPosition(epoch: "E", id: 20))
        // The room grew meanwhile: the stream chases it.
        #expect(stream.take(Self.page(21...32, last: 32)) == .send(gap: nil, events: Self.records(21...32), done: true, current: RoomPosition(epoch: "E", id: 32)))
        #expect(stream.gap == nil && stream.sent == 22 && stream.pages == 2)
    }

    @Test("nothing missed: done at once; an idle room whose events expired is no gap")
    func nothingMissed() {
        var stream = ReplayStream(since: RoomPosition(epoch: "E", id: 10))
        #expect(stream.take(Self.page(nil, last: 10)) == .send(gap: nil, events: [], done: true, current: RoomPosition(epoch: "E", id: 10)))
    }

    @Test("events after the position expired: the first page tells the gap with its exact ids and the first kept one's time")
    func expiredGap() {
        var stream = ReplayStream(since: RoomPosition(epoch: "E", id: 10))
        let step = stream.take(Self.page(50...60, last: 70))
        let gap = RoomResumeGap(reason: .expired, previous: RoomPosition(epoch: "E", id: 10), resume: RoomPosition(epoch: "E", id: 49), before: 500)
        #expect(step == .send(gap: gap, events: Self.records(50...60), done: false, current: RoomPosition(epoch: "E", id: 70)))
        #expect(gap.told.missing == 11...49)
        #expect(stream.take(Self.page(61...70, last: 70)) == .send(gap: nil, events: Self.records(61...70), done: true, current: RoomPosition(epoch: "E", id: 70)))
        #expect(stream.gap == gap)
    }

    @Test("every missed event gone: the gap runs to the room's last id, nothing follows")
    func allGone() {
        var stream = ReplayStream(since: RoomPosition(epoch: "E", id: 10))
        let gap = RoomResumeGap(reason: .expired, previous: RoomPosition(epoch: "E", id: 10), resume: RoomPosition(epoch: "E", id: 70), before: nil)
        #expect(stream.take(Self.page(nil, last: 70)) == .send(gap: gap, events: [], done: true, current: RoomPosition(epoch: "E", id: 70)))
        #expect(gap.told.missing == 11...70)
    }

    @Test("another epoch: read again from the new epoch's start; its kept events all follow the gap, which names the old position")
    func epochChanged() {
        var stream = ReplayStream(since: RoomPosition(epoch: "old", id: 10))
        #expect(stream.take(Self.page(nil, epoch: "new", last: 8)) == .readAgain)
        #expect(stream.reached == RoomPosition(epoch: "new", id: 0))
        let step = stream.take(Self.page(3...8, epoch: "new", last: 8))
        let gap = RoomResumeGap(reason: .epochChanged, previous: RoomPosition(epoch: "old", id: 10), resume: RoomPosition(epoch: "new", id: 2), before: 30)
        #expect(step == .send(gap: gap, events: Self.records(3...8), done: true, current: RoomPosition(epoch: "new", id: 8)))
        #expect(gap.told.missing == 1...2 && gap.told.previous == RoomPosition(epoch: "old", id: 10))
    }

    @Test("another epoch whose events are all kept: the gap is told with no missing ids")
    func epochChangedNothingMissing() {
        var stream = ReplayStream(since: RoomPosition(epoch: "old", id: 10))
        #expect(stream.take(Self.page(nil, epoch: "new", last: 3)) == .readAgain)
        guard case .send(let gap?, let events, true, _) = stream.take(Self.page(1...3, epoch: "new", last: 3)) else {
            Issue.record("no gap")
            return
        }
        #expect(events == Self.records(1...3) && gap.told.missing == nil && gap.reason == .epochChanged)
    }

    @Test("a position ahead of the room's: unknown_position, nothing replayed")
    func unknownPosition() {
        var stream = ReplayStream(since: RoomPosition(epoch: "E", id: 90))
        #expect(stream.take(Self.page(nil, last: 70)) == .unknownPosition(current: RoomPosition(epoch: "E", id: 70)))
    }

    @Test("after the first page: a hole, a new epoch or a stream that went back is a resync, never a second gap")
    func resyncLater() {
        var hole = ReplayStream(since: RoomPosition(epoch: "E", id: 0))
        _ = hole.take(Self.page(1...10, last: 100))
        guard case .resync = hole.take(Self.page(15...20, last: 100)) else {
            Issue.record("a hole went on")
            return
        }

        var epoch = ReplayStream(since: RoomPosition(epoch: "E", id: 0))
        _ = epoch.take(Self.page(1...10, last: 100))
        guard case .resync = epoch.take(Self.page(1...10, epoch: "F", last: 100)) else {
            Issue.record("a new epoch went on")
            return
        }

        var back = ReplayStream(since: RoomPosition(epoch: "E", id: 0))
        _ = back.take(Self.page(1...10, last: 100))
        guard case .resync = back.take(Self.page(nil, last: 5)) else {
            Issue.record("a stream that went back went on")
            return
        }

        var twice = ReplayStream(since: RoomPosition(epoch: "old", id: 3))
        #expect(twice.take(Self.page(nil, epoch: "new", last: 3)) == .readAgain)
        guard case .resync = twice.take(Self.page(nil, epoch: "newer", last: 3)) else {
            Issue.record("a second epoch change went on")
            return
        }
    }

    @Test("a page with a hole inside stops before it; events past the room's position are left for later")
    func pageHoleInside() {
        var stream = ReplayStream(since: RoomPosition(epoch: "E", id: 0))
        let page = RoomReplayPage(events: Self.records(1...3) + Self.records(5...6), current: RoomPosition(epoch: "E", id: 6))
        #expect(stream.take(page) == .send(gap: nil, events: Self.records(1...3), done: false, current: RoomPosition(epoch: "E", id: 6)))
        var bounded = ReplayStream(since: RoomPosition(epoch: "E", id: 0))
        #expect(bounded.take(Self.page(1...9, last: 5)) == .send(gap: nil, events: Self.records(1...5), done: true, current: RoomPosition(epoch: "E", id: 5)))
    }

    @Test("pages are sized by the records read: about pageBytes of them, at first as if each were 1 KiB, at most maxPageEvents")
    func pageSizing() {
        var stream = ReplayStream(since: RoomPosition(epoch: "E", id: 0), pageBytes: 256 * 1024, maxPageEvents: 2000)
        #expect(stream.pageLimit == 257)
        let big = (1...25).map { RoomEventRecord(id: $0, at: 0, event: "e", data: String(repeating: "x", count: 10_000), from: nil) }
        _ = stream.take(RoomReplayPage(events: big, current: RoomPosition(epoch: "E", id: 1000)))
        #expect(stream.pageLimit == 256 * 1024 / big[0].size + 1, "10 KB records: about 26 a page")
        _ = stream.take(Self.page(26...100, last: 1000))
        #expect(stream.pageLimit == 2000, "small records: the most a page asks for")
    }

    @Test("a room whose events come faster than the replay reaches them: resync after twice the most a room keeps")
    func neverCatchesUp() {
        var stream = ReplayStream(since: RoomPosition(epoch: "E", id: 0))
        var id: UInt64 = 0
        var step = ReplayStream.Step.readAgain
        while id < UInt64(ReplayStream.maxEvents) + 2000 {
            step = stream.take(Self.page((id + 1)...(id + 1000), last: id + 5000))
            id += 1000
            if case .resync = step { break }
        }
        guard case .resync = step else {
            Issue.record("\(stream.sent) replayed and still going")
            return
        }
        #expect(stream.sent == ReplayStream.maxEvents)
    }
}
