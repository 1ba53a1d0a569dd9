import SystemSupport
import ReconnectTesting
import Testing

@Suite struct ManualClockTests {
    @Test("advance runs due timers in deadline order, each at its own instant, and skips cancelled ones")
    func order() {
        let clock = ManualClock()
        let start = clock.now
        let fired = Locked<[(String, Duration)]>([])
        _ = clock.schedule(at: start + .seconds(3)) { fired.withLock { $0.append(("c", clock.now - start)) } }
        _ = clock.schedule(at: start + .seconds(1)) { fired.withLock { $0.append(("a", clock.now - start)) } }
        let cancelled = clock.schedule(at: start + .seconds(2)) { fired.withLock { $0.append(("x", clock.now - start)) } }
        cancelled.cancel()
        clock.advance(by: .seconds(2))
        #expect(fired.withLock { $0.map(\.0) } == ["a"])
        #expect(clock.now - start == .seconds(2))
        clock.advance(by: .seconds(5))
        #expect(fired.withLock { $0.map(\.0) } == ["a", "c"])
        #expect(fired.withLock { $0.map(\.1) } == [.seconds(1), .seconds(3)])
        #expect(clock.pendingTimers == 0)
    }

    @Test("timers scheduled by a firing timer run in the same advance when due")
    func chained() {
        let clock = ManualClock()
        let count = Locked(0)
        @Sendable func tick() {
            count.withLock { $0 += 1 }
            _ = clock.schedule(at: clock.now + .seconds(1)) { tick() }
        }
        _ = clock.schedule(at: clock.now + .seconds(1)) { tick() }
        clock.advance(by: .seconds(10))
        #expect(count.withLock { $0 } == 10)
    }

    @Test("sleep resumes when the clock reaches the deadline, and on cancellation")
    func sleep() async throws {
        let clock = ManualClock()
        let deadline = clock.now + .seconds(5)
        let sleeper = Task { try await clock.sleep(until: deadline) }
        while clock.pendingTimers == 0 { await Task.yield() }
        clock.advance(by: .seconds(5))
        try await sleeper.value

        let cancelled = Task { try await clock.sleep(until: clock.now + .seconds(60)) }
        cancelled.cancel()
        await #expect(throws: CancellationError.self) { try await cancelled.value }
    }
}
