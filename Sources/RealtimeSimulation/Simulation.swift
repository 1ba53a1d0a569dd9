import Foundation
import ReconnectTesting
import SystemSupport

/// One process's deterministic world (as FoundationDB's and TigerBeetle's simulators): a virtual
/// clock, one seeded random source, and the events scheduled on that clock, run one at a time in
/// time order (ties in the order they were scheduled). Nothing here reads the real clock or
/// starts a thread: the same seed gives the same run, event for event.
package final class Simulation: Sendable {
    private struct Scheduled {
        var time: Int64
        var sequence: UInt64
        var action: @Sendable () -> Void
    }

    private struct State {
        var now: Int64 = 0
        var sequence: UInt64 = 0
        var heap: [Scheduled] = []
        var random: SeededRandomNumberGenerator
        var events = 0
        /// A running hash of what happened (`note`), for comparing two runs of one seed.
        var trace: UInt64 = 0xcbf2_9ce4_8422_2325
    }

    private let state: Locked<State>
    /// The instant the virtual clock started at: the hub's instants are this plus the time.
    private let origin = ContinuousClock.now
    /// The wall clock's start, milliseconds since 1970 (a fixed date: runs do not depend on today).
    package static let wallOrigin: Int64 = 1_767_225_600_000

    /// Most events one run may take: a run that goes on past it has a loop (a violation).
    package static let maxEvents = 2_000_000

    /// Creates a world whose randomness all comes from `seed`.
    package init(seed: UInt64) {
        state = Locked(State(random: SeededRandomNumberGenerator(seed: seed)))
    }

    /// Nanoseconds since the start.
    package var time: Int64 { state.withLock { $0.now } }

    /// The virtual instant, for the hub's `now`.
    package var instant: ContinuousClock.Instant { origin + .nanoseconds(time) }

    /// The virtual wall clock, milliseconds since 1970.
    package var wallMilliseconds: Int64 { Self.wallOrigin + time / 1_000_000 }

    /// Events run so far.
    package var events: Int { state.withLock { $0.events } }

    /// The run's trace hash so far.
    package var trace: UInt64 { state.withLock { $0.trace } }

    /// A random number in `range`, from the seed.
    package func random(in range: ClosedRange<Int>) -> Int {
        state.withLock { Int.random(in: range, using: &$0.random) }
    }

    /// Whether `note` prints what it folds, with the time (`SIMULATE_TRACE=1`: reading a
    /// failing seed's run).
    static let printsNotes = ProcessInfo.processInfo.environment["SIMULATE_TRACE"] != nil

    /// Folds `text` into the trace hash (FNV-1a); printed too with `SIMULATE_TRACE` set.
    package func note(_ text: String) {
        if Self.printsNotes { print("\(Double(time / 1_000) / 1_000) ms: \(text)") }
        state.withLock { state in
            for byte in text.utf8 {
                state.trace ^= UInt64(byte)
                state.trace &*= 0x100_0000_01b3
            }
        }
    }

    /// A duration in whole nanoseconds, the clock's unit.
    static func nanoseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000_000_000 + duration.components.attoseconds / 1_000_000_000
    }

    /// Runs `action` once `delay` has passed (at once, after what is due now, for zero).
    package func after(_ delay: Duration, _ action: @escaping @Sendable () -> Void) {
        let nanoseconds = max(0, Self.nanoseconds(delay))
        state.withLock { state in
            state.sequence += 1
            state.heap.append(Scheduled(time: state.now + nanoseconds, sequence: state.sequence, action: action))
            var child = state.heap.count - 1
            while child > 0 {
                let parent = (child - 1) / 2
                guard Self.before(state.heap[child], state.heap[parent]) else { break }
                state.heap.swapAt(child, parent)
                child = parent
            }
        }
    }

    /// Drops every event still scheduled (the end of a run).
    package func clear() { state.withLock { $0.heap = [] } }

    /// Waits `duration` as a thread blocked on a round trip does: the events due meanwhile run
    /// (the caller's own serial queue's next job does not: `SimulatedExecutor`).
    package func wait(_ duration: Duration) {
        run(until: time + max(0, Self.nanoseconds(duration)))
    }

    /// Runs the events due up to `end` (nanoseconds since the start), in order.
    ///
    /// - Returns: false when the run took more than `maxEvents` events.
    @discardableResult
    package func run(until end: Int64) -> Bool {
        while let action = next(until: end) {
            action()
        }
        state.withLock { $0.now = max($0.now, end) }
        return events <= Self.maxEvents
    }

    private func next(until end: Int64) -> (@Sendable () -> Void)? {
        state.withLock { state in
            guard let first = state.heap.first, first.time <= end, state.events <= Self.maxEvents else { return nil }
            let last = state.heap.removeLast()
            if !state.heap.isEmpty {
                state.heap[0] = last
                var parent = 0
                while true {
                    let left = 2 * parent + 1
                    let right = left + 1
                    var smallest = parent
                    if left < state.heap.count, Self.before(state.heap[left], state.heap[smallest]) { smallest = left }
                    if right < state.heap.count, Self.before(state.heap[right], state.heap[smallest]) { smallest = right }
                    guard smallest != parent else { break }
                    state.heap.swapAt(parent, smallest)
                    parent = smallest
                }
            }
            state.now = first.time
            state.events += 1
            return first.action
        }
    }

    private static func before(_ a: Scheduled, _ b: Scheduled) -> Bool {
        a.time != b.time ? a.time < b.time : a.sequence < b.sequence
    }
}
