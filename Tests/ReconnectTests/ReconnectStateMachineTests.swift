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
        _ = machine.streamReady()
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
        _ = told.streamReady()
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

    @Test("a 42xx-style immediate retry waits at least minimumAttemptInterval after the last attempt started")
    func immediateRetryFloor() {
        var (machine, first) = Self.dropped { $0.minimumAttemptInterval = .milliseconds(100) }
        let wait = Self.timer(first)!
        let vote = Self.vote(machine.timerFired(id: wait.id, now: wait.deadline))!
        _ = machine.voteFinished(id: vote, approved: true, now: wait.deadline)
        _ = machine.streamWillConnect()
        let again = machine.streamDisconnected(now: wait.deadline + .milliseconds(10), retry: .immediately)
        #expect(Self.timer(again)?.deadline == wait.deadline + .milliseconds(100))
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
        _ = ready.streamReady()
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

    @Test("success resets the backoff and reports the attempts the process took")
    func success() {
        var (machine, first) = Self.dropped { $0.policy = .backoff(ExponentialBackoff(base: .seconds(1), cap: .seconds(30))) }
        let wait = Self.timer(first)!
        let vote = Self.vote(machine.timerFired(id: wait.id, now: wait.deadline))!
        _ = machine.voteFinished(id: vote, approved: true, now: wait.deadline)
        _ = machine.streamWillConnect()
        _ = machine.streamOpened()
        #expect(machine.streamReady().contains(.emit(.succeeded(attempts: 1))))
        #expect(!machine.isReconnecting)
    }
}
