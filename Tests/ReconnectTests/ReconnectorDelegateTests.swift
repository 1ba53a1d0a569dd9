import Dispatch
import SystemSupport
import Reachability
import Reconnect
import ReconnectTesting
import Testing

/// Delegates: told once per disconnect, asked before every attempt, bounded by a timeout.
@Suite struct ReconnectorDelegateTests {
    @Test("didDetectAccidentalDisconnect fires once per disconnect, not once per failed retry")
    func accidentalOnce() {
        let harness = Harness()
        let delegate = RecordingDelegate()
        let queue = DispatchQueue(label: "delegate")
        harness.reconnector.addDelegate(delegate, queue: queue)
        harness.connectReady()
        harness.stream.behaviour = .fail
        harness.stream.drop()
        for _ in 0..<4 {
            harness.clock.advance(by: .seconds(20))
            queue.sync {}
        }
        #expect(harness.stream.attempts == 5)
        #expect(delegate.accidental == [[.reachable]])
        #expect(delegate.asked.count == 4)
    }

    @Test("shouldAttemptAutoReconnect is asked with the host's flags before every attempt; any no vetoes")
    func veto() {
        let harness = Harness()
        let yes = RecordingDelegate(answer: true)
        let no = RecordingDelegate(answer: false)
        let queue = DispatchQueue(label: "delegates")
        harness.reconnector.addDelegate(yes, queue: queue)
        harness.reconnector.addDelegate(no, queue: queue)
        harness.connectReady()
        harness.reachability.set([.reachable, .isWWAN])
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        queue.sync {}
        #expect(harness.stream.attempts == 1)
        #expect(harness.events.contains(.vetoed(attempt: 1)))
        #expect(no.asked == [[.reachable, .isWWAN]])
        // The veto does not end the process: the timer asks again.
        no.answer = true
        harness.clock.advance(by: .seconds(20))
        queue.sync {}
        #expect(harness.stream.attempts == 2)
        #expect(harness.stream.isConnected)
        #expect(yes.asked.count == 2)
    }

    /// Implements only the first of the two optional methods (the seed: "all delegate methods
    /// are optional"): the other keeps its default, which allows every attempt.
    final class ToldOnly: ReconnectorDelegate, @unchecked Sendable {
        let told = Locked<[ReachabilityFlags]>([])
        func reconnector(_ reconnector: Reconnector, didDetectAccidentalDisconnect flags: ReachabilityFlags) {
            told.withLock { $0.append(flags) }
        }
    }

    /// Implements only the second: a disconnect is not told to it, its answer still counts.
    final class AskedOnly: ReconnectorDelegate, @unchecked Sendable {
        let asked = Locked(0)
        func reconnector(_ reconnector: Reconnector, shouldAttemptAutoReconnect flags: ReachabilityFlags) -> Bool {
            asked.withLock { $0 += 1 }
            return false
        }
    }

    @Test("a delegate that implements only one of the two optional methods: the other is the default (told nothing, every attempt allowed)")
    func oneMethodOnly() {
        let harness = Harness()
        let queue = DispatchQueue(label: "delegate")
        let told = ToldOnly()
        harness.reconnector.addDelegate(told, queue: queue)
        harness.connectReady()
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        queue.sync {}
        #expect(told.told.withLock { $0 } == [[.reachable]])
        #expect(harness.stream.attempts == 2, "the default of shouldAttemptAutoReconnect allows the attempt")
        #expect(harness.stream.isConnected)

        let second = Harness()
        let asked = AskedOnly()
        second.reconnector.addDelegate(asked, queue: queue)
        second.connectReady()
        second.stream.drop()
        second.clock.advance(by: .seconds(2))
        queue.sync {}
        #expect(asked.asked.withLock { $0 } == 1, "asked before the attempt")
        #expect(second.stream.attempts == 1, "its no vetoed it")
    }

    @Test("stop() during a vote means no attempt afterwards")
    func stopDuringVote() {
        let harness = Harness()
        let delegate = RecordingDelegate(answer: true)
        let queue = DispatchQueue(label: "held")
        harness.reconnector.addDelegate(delegate, queue: queue)
        harness.connectReady()
        harness.stream.drop()
        queue.suspend()
        harness.clock.advance(by: .seconds(2))        // the vote is asked, the answer is held
        harness.reconnector.stop()
        queue.resume()
        queue.sync {}
        harness.clock.advance(by: .seconds(3600))
        #expect(delegate.asked.count == 1)
        #expect(harness.stream.attempts == 1)
        #expect(!harness.reconnector.isReconnecting)
    }

    @Test("a delegate that never answers does not block attempts: silence past delegateTimeout is no veto")
    func silentDelegate() {
        let harness = Harness()
        let delegate = RecordingDelegate(answer: false)
        let queue = DispatchQueue(label: "stuck")
        harness.reconnector.addDelegate(delegate, queue: queue)
        harness.connectReady()
        harness.stream.drop()
        queue.suspend()
        harness.clock.advance(by: .seconds(2))
        harness.clock.advance(by: .milliseconds(4999))
        #expect(harness.stream.attempts == 1)
        harness.clock.advance(by: .milliseconds(1))  // delegateTimeout (5 s) passes
        #expect(harness.stream.attempts == 2)
        #expect(harness.stream.isConnected)
        queue.resume()
        queue.sync {}
        // The late "no" changes nothing.
        #expect(harness.stream.isConnected)
    }

    @Test("closures work as a delegate until their token is cancelled")
    func closureDelegate() {
        let harness = Harness()
        let queue = DispatchQueue(label: "closures")
        let told = Locked(0)
        let token = harness.reconnector.addDelegate(
            queue: queue,
            didDetectAccidentalDisconnect: { _ in told.withLock { $0 += 1 } },
            shouldAttemptAutoReconnect: { _ in false }
        )
        harness.connectReady()
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        queue.sync {}
        #expect(told.withLock { $0 } == 1)
        #expect(harness.stream.attempts == 1)
        token.cancel()
        harness.clock.advance(by: .seconds(20))
        queue.sync {}
        #expect(harness.stream.attempts == 2)
    }

    @Test("delegates are held weakly")
    func weakDelegates() {
        let harness = Harness()
        weak var weakDelegate: RecordingDelegate?
        do {
            let delegate = RecordingDelegate(answer: false)
            weakDelegate = delegate
            harness.reconnector.addDelegate(delegate, queue: DispatchQueue(label: "gone"))
        }
        #expect(weakDelegate == nil)
        harness.connectReady()
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        #expect(harness.stream.attempts == 2)
    }
}
