import Reconnect
import ReconnectTesting
import Testing

@Suite struct ReconnectPolicyTests {
    @Test("full-jitter ceilings double from base to cap")
    func ceilings() {
        let backoff = ExponentialBackoff(base: .seconds(1), cap: .seconds(30))
        #expect((0..<7).map { backoff.ceiling(forRetry: $0) } == [1, 2, 4, 8, 16, 30, 30].map { Duration.seconds($0) })
        #expect(backoff.ceiling(forRetry: 10_000) == .seconds(30))
    }

    @Test("delays stay within 0…ceiling and spread over it (full jitter)")
    func jitterBounds() {
        let backoff = ExponentialBackoff(base: .seconds(1), cap: .seconds(30))
        var random = SeededRandomNumberGenerator(seed: 42)
        for retry in 0..<8 {
            let delays = (0..<200).map { _ in backoff.delay(forRetry: retry, using: &random) }
            let ceiling = backoff.ceiling(forRetry: retry)
            #expect(delays.allSatisfy { $0 >= .zero && $0 <= ceiling })
            // Full jitter: both halves of the range are used.
            #expect(delays.contains { $0 < ceiling / 2 })
            #expect(delays.contains { $0 > ceiling / 2 })
        }
    }

    @Test("negative or non-finite settings keep delays within 0…cap")
    func hostileSettings() {
        var random = SeededRandomNumberGenerator(seed: 1)
        for backoff in [ExponentialBackoff(base: .seconds(-1)), ExponentialBackoff(multiplier: -2), ExponentialBackoff(multiplier: .nan),
                        ExponentialBackoff(base: .zero, cap: .zero), ExponentialBackoff(cap: .seconds(-5))] {
            for retry in [0, 1, 10, -3] {
                let delay = backoff.delay(forRetry: retry, using: &random)
                #expect(delay >= .zero && delay <= max(backoff.cap, .zero))
            }
        }
    }

    @Test("zero delays with a stream that fails at once retry at minimumAttemptInterval, not in a tight loop")
    func zeroBackoffIsPaced() {
        let harness = Harness { $0.policy = .backoff(ExponentialBackoff(base: .zero, cap: .zero)) }
        harness.stream.behaviour = .fail
        harness.reconnector.manualStart(immediately: true)
        #expect(harness.stream.attempts == 1)
        harness.clock.advance(by: .seconds(1))
        #expect(harness.stream.attempts == 11)
    }

    @Test("the same seed gives the same delays")
    func seeded() {
        let backoff = ExponentialBackoff()
        var a = SeededRandomNumberGenerator(seed: 9)
        var b = SeededRandomNumberGenerator(seed: 9)
        #expect((0..<5).map { backoff.delay(forRetry: $0, using: &a) } == (0..<5).map { backoff.delay(forRetry: $0, using: &b) })
    }

    @Test("the backoff policy schedules jittered delays within the ceilings and resets after a healthy connection")
    func backoffPolicy() {
        let harness = Harness { $0.policy = .backoff(ExponentialBackoff(base: .seconds(1), cap: .seconds(8))) }
        harness.connectReady()
        harness.stream.behaviour = .fail
        harness.stream.drop()
        for _ in 0..<6 { harness.clock.advance(by: .seconds(8)) }
        let delays = harness.events.compactMap { if case .scheduled(_, let delay) = $0 { delay } else { nil } }
        #expect(delays.count >= 6)
        let ceilings: [Duration] = [1, 2, 4, 8, 8, 8].map { .seconds($0) }
        for (delay, ceiling) in zip(delays, ceilings) { #expect(delay <= ceiling) }
        // A connection that stays ready for stableConnectionDuration (5 s) resets the retry
        // count: the next drop's first delay is back under the base.
        harness.stream.behaviour = .succeed
        harness.clock.advance(by: .seconds(8))
        #expect(harness.stream.isConnected)
        harness.clock.advance(by: .seconds(5))
        let before = harness.events.count
        harness.stream.drop()
        let next = harness.events[before...].compactMap { if case .scheduled(_, let delay) = $0 { delay } else { nil } }
        #expect(next.first.map { $0 <= .seconds(1) } == true)
    }
}

@Suite struct ReconnectorLifecycleTests {
    @Test("reconnector and stream hold no strong cycle")
    func noCycle() {
        weak var weakStream: ScriptedStream?
        weak var weakReconnector: Reconnector?
        do {
            let stream = ScriptedStream()
            let reconnector = Reconnector(scheduler: ManualClock())
            reconnector.activate(stream)
            stream.connect()
            weakStream = stream
            weakReconnector = reconnector
        }
        #expect(weakStream == nil)
        #expect(weakReconnector == nil)
    }

    @Test("deactivate detaches: the stream's drops no longer reconnect")
    func deactivate() {
        let harness = Harness()
        harness.connectReady()
        harness.reconnector.deactivate()
        harness.stream.drop()
        harness.clock.advance(by: .seconds(60))
        #expect(harness.stream.attempts == 1)
    }

    @Test("events arrive as an AsyncSequence")
    func asyncEvents() async {
        let harness = Harness()
        let events = harness.reconnector.events()
        harness.connectReady()
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        var seen: [ReconnectEvent] = []
        for await event in events {
            seen.append(event)
            if case .succeeded = event { break }
        }
        #expect(seen == [.accidentalDisconnect(flags: [.reachable]), .scheduled(attempt: 1, delay: .seconds(2)), .attemptStarted(attempt: 1, trigger: .timer), .succeeded(attempts: 1)])
    }

    @Test("without a reachability source, retries run on timers and flags are empty")
    func noReachability() {
        let clock = ManualClock()
        let stream = ScriptedStream()
        let reconnector = Reconnector(scheduler: clock)
        reconnector.activate(stream)
        stream.connect()
        stream.drop()
        clock.advance(by: .seconds(2))
        #expect(stream.attempts == 2)
        #expect(reconnector.flags == [])
    }

    @Test("a reachability source that cannot be made is reported, and timers still work")
    func reachabilityFailure() {
        struct Broken: Error {}
        let clock = ManualClock()
        let stream = ScriptedStream()
        let reconnector = Reconnector(scheduler: clock, reachability: { _ in throw Broken() })
        reconnector.activate(stream)
        #expect(reconnector.reachabilityError is Broken)
        stream.connect()
        stream.drop()
        clock.advance(by: .seconds(2))
        #expect(stream.attempts == 2)
    }
}
