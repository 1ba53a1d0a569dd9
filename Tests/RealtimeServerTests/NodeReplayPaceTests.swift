@testable import RealtimeServer
import Testing

@Suite("The node's replay pace")
struct NodeReplayPaceTests {
    static let start = ContinuousClock.now

    @Test("one replayer may take the node's whole rate; a second gets its share, and what the node has left is lent to whoever asks")
    func shares() {
        var pace = NodeReplayPace(bytesPerSecond: 1000)
        #expect(pace.admits("a", at: Self.start))
        pace.charge("a", bytes: 400, at: Self.start)
        // b arrives: two replay in this window, 500 each, and 600 are left.
        #expect(pace.admits("b", at: Self.start))
        pace.charge("b", bytes: 300, at: Self.start)
        pace.charge("a", bytes: 200, at: Self.start + .milliseconds(10))
        // a has 600: over its 500, and the node has 100 left, under what a has.
        #expect(!pace.admits("a", at: Self.start + .milliseconds(20)), "a has its share and more")
        #expect(pace.admits("b", at: Self.start + .milliseconds(20)))
        pace.charge("b", bytes: 200, at: Self.start + .milliseconds(20))
        #expect(!pace.admits("b", at: Self.start + .milliseconds(30)) && !pace.admits("c", at: Self.start + .milliseconds(30)), "the node's 1,000 are spent")
        // The next second: the two of the last second share it; a, alone asking, goes past its
        // share while more than a share is left, which is kept for b.
        let next = Self.start + .seconds(1)
        pace.charge("a", bytes: 300, at: next)
        #expect(pace.admits("a", at: next + .milliseconds(1)))
        pace.charge("a", bytes: 300, at: next + .milliseconds(1))
        #expect(!pace.admits("a", at: next + .milliseconds(2)), "600 of 1,000 spent: 400 left, under a share of 500")
        #expect(pace.admits("b", at: next + .milliseconds(2)))
        // Two seconds later with no replay between, a lone replayer has the whole rate again.
        let later = next + .seconds(3)
        pace.charge("a", bytes: 900, at: later)
        #expect(pace.admits("a", at: later))
    }

    @Test("200 connections replaying a few bytes each leave the rest of the rate to a long resume (the loan: a 200th of it without)")
    func tinyReplayersLendTheRest() {
        var pace = NodeReplayPace(bytesPerSecond: 100_000)
        for index in 0..<200 { pace.charge("tiny\(index)", bytes: 300, at: Self.start) }
        var long = 0
        while pace.admits("long", at: Self.start + .milliseconds(1)), long < 1_000_000 {
            pace.charge("long", bytes: 1000, at: Self.start + .milliseconds(1))
            long += 1000
        }
        #expect(long >= 100_000 - 200 * 300 - 1000, "the long resume got \(long)")
    }

    @Test("ten replayers within a second are each held to a tenth; the node never passes its rate by more than one page each")
    func crowd() {
        var pace = NodeReplayPace(bytesPerSecond: 10_000)
        var sent: [String: Int] = [:]
        for step in 0..<10_000 {
            let id = "c\(step % 10)"
            let instant = Self.start + .microseconds(step * 50)
            if pace.admits(id, at: instant) {
                pace.charge(id, bytes: 256, at: instant)
                sent[id, default: 0] += 256
            }
        }
        // 10,000 steps of 50 µs: half a second, one window.
        #expect(sent.count == 10)
        #expect(sent.values.allSatisfy { $0 <= 1000 + 256 && $0 >= 1000 - 256 }, "\(sent)")
        #expect(sent.values.reduce(0, +) <= 10_000 + 10 * 256)
    }
}

@Suite("When the heap is trimmed")
struct HeapTrimTriggerTests {
    static let start = ContinuousClock.now

    @Test("once queued bytes fall to a quarter of a peak of 8 MiB or more, or connections to half of a peak of 256 or more; the peaks then count from there")
    func trims() {
        var trigger = HeapTrimTrigger()
        let mebibyte = 1024 * 1024
        let steps: [(queued: Int, connections: Int, trims: Bool)] = [
            (4 * mebibyte, 10, false), (0, 10, false),               // a peak under 8 MiB is not worth a trim
            (100 * mebibyte, 10, false), (30 * mebibyte, 10, false), // not yet a quarter
            (20 * mebibyte, 10, true),                               // a quarter: trimmed, the peak now 20 MiB
            (6 * mebibyte, 10, false), (5 * mebibyte, 10, true),     // a quarter of 20 MiB
            (0, 1000, false), (0, 600, false), (0, 500, true),       // half of 1,000 connections
            (0, 300, false), (0, 0, true),                           // half of 500
            (0, 200, false), (0, 0, false),                          // a peak under 256 is not a crowd
            (0, 1000, false), (0, 400, true),                        // half of 1,000
            (0, 0, false),                                           // half of 400, but 2 s after that trim
            (0, 0, false),                                           // 4 s after
            (0, 0, true),                                            // 5 s after: the held-back trim
        ]
        var seen: [Bool] = []
        // 10 s between looks: the 5 s between trims never holds one back, but the last three,
        // a second apart from 2 s after the one before.
        let heldBack = steps.count - 3
        for (index, step) in steps.enumerated() {
            let instant = index < heldBack
                ? Self.start + .seconds(10 * index)
                : Self.start + .seconds(10 * (heldBack - 1) + [2, 4, 5][index - heldBack])
            seen.append(trigger.observe(queued: step.queued, connections: step.connections, at: instant))
        }
        #expect(seen == steps.map(\.trims))
    }
}
