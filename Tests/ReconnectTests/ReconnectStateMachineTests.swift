import Reachability
@testable import Reconnect
import ReconnectTesting
import Testing

/// `ReconnectStateMachine` on plain values: the XMPPReconnect rules (seed `XMPPReconnect.h.txt`)
/// and the defects of the original it does not have (DESIGN.md), without a Reconnector.
@Suite("Reconnect state machine")
struct ReconnectStateMachineTests {
    typealias Machine = ReconnectStateMachine
    typealias Action = ReconnectStateMachine.Action
    static let start = ContinuousClock.now

    static func machine(_ configure: (inout ReconnectConfiguration) -> Void = { _ in }) -> Machine {
        var configuration = ReconnectConfiguration()
        configure(&configuration)
        return Machine(configuration: configuration, random: SeededRandomNumberGenerator(seed: 1))
    }

    /// A machine whose stream was ready once and then dropped by accident.
    static func dropped(_ configure: (inout ReconnectConfiguration) -> Void = { _ in }) -> (Machine, [Action]) {
        var machine = machine(configure)
        _ = machine.streamWillConnect()
        _ = machine.streamOpened()
        _ = machine.streamReady(now: Self.start)
        let actions = machine.streamDisconnected(now: start)
        return (machine, actions)
    }

    static func timer(_ actions: [Action]) -> (id: UInt64, deadline: ContinuousClock.Instant)? {
        for action in actions { if case .scheduleTimer(let id, let deadline) = action { return (id, deadline) } }
        return nil
    }

    static func vote(_ actions: [Action]) -> UInt64? {
        for action in actions { if case .askDelegates(let vote, _, _) = action { return vote } }
        return nil
    }

    @Test("an accidental disconnect is told once, then the reconnect delay (2 s) is waited")
    func accidentalDisconnect() {
        let (_, actions) = Self.dropped()
        #expect(actions.filter { if case .notifyAccidentalDisconnect = $0 { true } else { false } }.count == 1)
        #expect(Self.timer(actions)?.deadline == Self.start + .seconds(2))
    }

    @Test("a stream that was never ready is not retried (XMPPReconnect's rule); an intentional disconnect is not either")
    func notEligible() {
        var never = Self.machine()
        _ = never.streamWillConnect()
        #expect(never.streamDisconnected(now: Self.start).isEmpty)
        var told = Self.machine()
        _ = told.streamWillConnect()
        _ = told.streamReady(now: Self.start)
        _ = told.streamToldToDisconnect()
        #expect(told.streamDisconnected(now: Self.start).isEmpty)
        #expect(!told.isReconnecting)
    }

    @Test("the retry runs through a delegate vote; a failed attempt is not told as a second accidental disconnect")
    func retryCycle() {
        var (machine, first) = Self.dropped()
        let wait = Self.timer(first)!
        let voting = machine.timerFired(id: wait.id, now: wait.deadline)
        let vote = Self.vote(voting)!
        let attempt = machine.voteFinished(id: vote, approved: true, now: wait.deadline)
        #expect(attempt.contains(.connect))
        #expect(attempt.contains(.emit(.attemptStarted(attempt: 1, trigger: .timer))))
        _ = machine.streamWillConnect()
        let failed = machine.streamDisconnected(now: wait.deadline + .seconds(1))
        #expect(!failed.contains { if case .notifyAccidentalDisconnect = $0 { true } else { false } })
        #expect(Self.timer(failed)?.deadline == wait.deadline + .seconds(21), "the 20 s timer interval")
    }

    @Test("an interval of 0 disables the periodic timer instead of making it 1 ns")
    func zeroInterval() {
        var (machine, first) = Self.dropped { $0.reconnectTimerInterval = .zero }
        let wait = Self.timer(first)!
        let vote = Self.vote(machine.timerFired(id: wait.id, now: wait.deadline))!
        _ = machine.voteFinished(id: vote, approved: true, now: wait.deadline)
        let failed = machine.streamDisconnected(now: wait.deadline + .seconds(1))
        #expect(Self.timer(failed) == nil)
        #expect(failed.contains(.emit(.waitingForReachability(attempt: 2))))
    }

    @Test("stop() during a vote prevents the attempt; a vote answered after it is ignored")
    func stopDuringVote() {
        var (machine, first) = Self.dropped()
        let wait = Self.timer(first)!
        let vote = Self.vote(machine.timerFired(id: wait.id, now: wait.deadline))!
        #expect(machine.stop().contains(.emit(.stopped)))
        #expect(machine.voteFinished(id: vote, approved: true, now: wait.deadline).isEmpty)
        #expect(!machine.isReconnecting)
    }

    @Test("a hung attempt times out and is aborted; a stream that never reports is taken as disconnected after the grace")
    func hungAttempt() {
        var (machine, first) = Self.dropped { $0.attemptTimeout = .seconds(5) }
        let wait = Self.timer(first)!
        let vote = Self.vote(machine.timerFired(id: wait.id, now: wait.deadline))!
        let attempt = machine.voteFinished(id: vote, approved: true, now: wait.deadline)
        let timeout = Self.timer(attempt)!
        #expect(timeout.deadline == wait.deadline + .seconds(5))
        let aborted = machine.timerFired(id: timeout.id, now: timeout.deadline)
        #expect(aborted.contains(.abortAttempt) && aborted.contains(.emit(.attemptTimedOut(attempt: 1))))
        let grace = Self.timer(aborted)!
        let retried = machine.timerFired(id: grace.id, now: grace.deadline)
        #expect(Self.timer(retried) != nil, "the next wait is scheduled")
    }

    /// The delegates approve `vote` at `now`; the attempt opens and is ready at `readyAt`.
    static func attemptReady(_ machine: inout Machine, vote: UInt64, now: ContinuousClock.Instant, readyAt: ContinuousClock.Instant? = nil) {
        _ = machine.voteFinished(id: vote, approved: true, now: now)
        _ = machine.streamWillConnect()
        _ = machine.streamOpened()
        _ = machine.streamReady(now: readyAt ?? now)
    }

    /// Starts the app's first attempt at `start` and makes it ready at `readyAt`.
    static func readyFromManualStart(_ machine: inout Machine, readyAt: ContinuousClock.Instant) {
        attemptReady(&machine, vote: Self.vote(machine.manualStart(now: start, immediately: true))!, now: start, readyAt: readyAt)
    }

    @Test("an immediate retry after a healthy connection still waits minimumAttemptInterval after the last attempt started, across processes")
    func immediateRetryFloor() {
        var machine = Self.machine { $0.minimumAttemptInterval = .milliseconds(100); $0.stableConnectionDuration = .zero }
        Self.readyFromManualStart(&machine, readyAt: Self.start + .milliseconds(10))
        let again = machine.streamDisconnected(now: Self.start + .milliseconds(20), retry: .immediately)
        #expect(Self.timer(again)?.deadline == Self.start + .milliseconds(100))
        #expect(Self.vote(again) == nil)
    }

    @Test("with no short connection allowance, a connection a peer ends within stableConnectionDuration of its handshake is retried on the backoff, which keeps growing")
    func unhealthyConnectionsBackOff() throws {
        var machine = Self.machine {
            $0.policy = .backoff(ExponentialBackoff(base: .seconds(1), cap: .seconds(30)))
            $0.shortConnectionAllowance = 0
        }
        Self.readyFromManualStart(&machine, readyAt: Self.start)
        var now = Self.start
        var delays: [Duration] = []
        for _ in 0..<8 {
            // The server closes with 4200 ("reconnect at once") 10 ms after each handshake.
            let retry = machine.streamDisconnected(now: now + .milliseconds(10), retry: .immediately)
            let wait = try #require(Self.timer(retry), "an unhealthy connection's immediate-retry request is not honoured")
            delays.append(wait.deadline - (now + .milliseconds(10)))
            Self.attemptReady(&machine, vote: Self.vote(machine.timerFired(id: wait.id, now: wait.deadline))!, now: wait.deadline)
            now = wait.deadline
        }
        for (retry, delay) in delays.enumerated() {
            #expect(delay <= .seconds(min(30, 1 << retry)) && delay >= .milliseconds(90), "retry \(retry): \(delay)")
        }
        #expect(delays.suffix(4).contains { $0 > .seconds(1) }, "the ceiling grew past the base")
    }

    @Test("a connection ready for stableConnectionDuration resets the backoff and has an immediate-retry request honoured")
    func healthyConnectionResets() throws {
        var machine = Self.machine {
            $0.policy = .backoff(ExponentialBackoff(base: .seconds(1), cap: .seconds(30)))
            $0.shortConnectionAllowance = 0
        }
        Self.readyFromManualStart(&machine, readyAt: Self.start)
        // Two unhealthy drops grow the retry count.
        var now = Self.start
        for _ in 0..<2 {
            let wait = Self.timer(machine.streamDisconnected(now: now + .milliseconds(10), retry: .immediately))!
            Self.attemptReady(&machine, vote: Self.vote(machine.timerFired(id: wait.id, now: wait.deadline))!, now: wait.deadline)
            now = wait.deadline
        }
        let healthy = machine.streamDisconnected(now: now + .seconds(5), retry: .immediately)
        #expect(Self.vote(healthy) != nil, "retried at once")
        #expect(Self.timer(healthy) == nil)
        Self.attemptReady(&machine, vote: try #require(Self.vote(healthy)), now: now + .seconds(5))
        // Dropped again 10 ms after its handshake: a backoff wait, drawn from the base again.
        let later = machine.streamDisconnected(now: now + .seconds(5) + .milliseconds(10))
        #expect(Self.timer(later).map { $0.deadline - (now + .seconds(5) + .milliseconds(10)) <= .seconds(1) } == true, "the backoff starts again from its base")
    }

    /// Drops the ready stream at `now` (after `retry`), and makes the retry it schedules (or
    /// votes at once) ready: returns the wait before it, and when it is ready.
    static func flap(_ machine: inout Machine, at now: ContinuousClock.Instant, retry: RetryTiming = .policy) throws -> (wait: Duration, ready: ContinuousClock.Instant) {
        let actions = machine.streamDisconnected(now: now, retry: retry)
        if let vote = vote(actions) {
            attemptReady(&machine, vote: vote, now: now)
            return (.zero, now)
        }
        let wait = try #require(timer(actions))
        attemptReady(&machine, vote: try #require(vote(machine.timerFired(id: wait.id, now: wait.deadline))), now: wait.deadline)
        return (wait.deadline - now, wait.deadline)
    }

    /// A machine on the seed's backoff (base 1 s, cap 30 s) drawing from `seed`, its stream
    /// ready since `start`.
    static func backingOff(seed: UInt64) -> Machine {
        var configuration = ReconnectConfiguration()
        configuration.policy = .backoff(ExponentialBackoff(base: .seconds(1), cap: .seconds(30)))
        var machine = Machine(configuration: configuration, random: SeededRandomNumberGenerator(seed: seed))
        readyFromManualStart(&machine, readyAt: start)
        return machine
    }

    @Test("a path that flaps five times 0.5 s after each handshake: every handshake resets the backoff (the seed), so the retry after the fifth drop is drawn from the base (issue 49)")
    func flappingRecovers() throws {
        for seed in 1...50 as ClosedRange<UInt64> {
            var machine = Self.backingOff(seed: seed)
            var ready = Self.start
            var waits: [Duration] = []
            for _ in 0..<5 {
                let next = try Self.flap(&machine, at: ready + .milliseconds(500))
                waits.append(next.wait)
                ready = next.ready
            }
            #expect(waits.allSatisfy { $0 <= .seconds(1) }, "seed \(seed): \(waits)")
        }
    }

    @Test("a 4200 0.3 s after the handshake is retried at once (minimumAttemptInterval after the last start), as the seed's close codes say (issue 49)")
    func earlyReconnectNow() throws {
        var machine = Self.machine { $0.policy = .backoff(ExponentialBackoff(base: .seconds(1), cap: .seconds(30))) }
        Self.readyFromManualStart(&machine, readyAt: Self.start + .milliseconds(50))
        let retry = try Self.flap(&machine, at: Self.start + .milliseconds(350), retry: .immediately)
        #expect(retry.wait == .zero)
    }

    @Test("a peer that ends every connection right after its handshake with 4200: five retried at once, then the growing backoff; a refill every stableConnectionDuration; at most 100 connections in 10 s, about a dozen (issue 14's bound, issue 49)")
    func refusalStormBounded() throws {
        for seed in 1...20 as ClosedRange<UInt64> {
            var machine = Self.backingOff(seed: seed)
            var ready = Self.start
            var connections = 1
            var immediate = 0
            while ready < Self.start + .seconds(10) {
                let next = try Self.flap(&machine, at: ready + .milliseconds(10), retry: .immediately)
                if next.wait <= .milliseconds(100) { immediate += 1 }
                ready = next.ready
                if ready < Self.start + .seconds(10) { connections += 1 }
            }
            #expect(connections <= 100, "seed \(seed): \(connections)")
            #expect(connections <= 20, "seed \(seed): \(connections) connections in 10 s")
            // Five from the allowance, one or two refilled, and jittered draws under 100 ms.
            #expect(immediate >= 5 && immediate <= 10, "seed \(seed): \(immediate) retried within 100 ms")
        }
    }

    @Test("a reachable path while waiting ends the wait at once; a changed path under a ready stream asks it to verify itself")
    func reachability() {
        var (machine, first) = Self.dropped()
        #expect(Self.timer(first) != nil)
        _ = machine.reachabilityChanged(ReconnectPath(flags: []), now: Self.start)
        let back = machine.reachabilityChanged(ReconnectPath(flags: [.reachable], interfaceIndex: 2), now: Self.start)
        #expect(back.contains(.cancelTimer) && Self.vote(back) != nil)

        var ready = Self.machine()
        _ = ready.streamWillConnect()
        _ = ready.streamOpened()
        _ = ready.streamReady(now: Self.start)
        _ = ready.reachabilityChanged(ReconnectPath(flags: [.reachable], interfaceIndex: 2), now: Self.start)
        let moved = ready.reachabilityChanged(ReconnectPath(flags: [.reachable], interfaceIndex: 3), now: Self.start)
        #expect(moved.first == .verifyConnection)
    }

    @Test("a refusal ends the process and is never retried, including the disconnect that follows")
    func refusal() {
        var (machine, _) = Self.dropped()
        let refused = machine.streamRefused(reason: "4009")
        #expect(refused.contains(.emit(.refused(reason: "4009"))))
        #expect(machine.streamDisconnected(now: Self.start).isEmpty)
        #expect(!machine.isReconnecting)
    }

    @Test("success reports the attempts the process took")
    func success() {
        var (machine, first) = Self.dropped { $0.policy = .backoff(ExponentialBackoff(base: .seconds(1), cap: .seconds(30))) }
        let wait = Self.timer(first)!
        let vote = Self.vote(machine.timerFired(id: wait.id, now: wait.deadline))!
        _ = machine.voteFinished(id: vote, approved: true, now: wait.deadline)
        _ = machine.streamWillConnect()
        _ = machine.streamOpened()
        #expect(machine.streamReady(now: Self.start).contains(.emit(.succeeded(attempts: 1))))
        #expect(!machine.isReconnecting)
    }
}
