import Dispatch
import Reachability
import Reconnect
import ReconnectTesting
import Testing

/// XMPPReconnect's rules (seed XMPPReconnect.h.txt), driven by a manual clock: no sleeps.
@Suite struct ReconnectorTests {
    @Test("an accidental disconnect of a ready stream reconnects after reconnectDelay, not before")
    func reconnectDelay() {
        let harness = Harness()
        harness.connectReady()
        harness.stream.drop()
        #expect(harness.events.first == .accidentalDisconnect(flags: [.reachable]))
        harness.clock.advance(by: .milliseconds(1999))
        #expect(harness.stream.attempts == 1)
        harness.clock.advance(by: .milliseconds(1))
        #expect(harness.stream.attempts == 2)
        #expect(harness.stream.isConnected)
        #expect(harness.events.last == .succeeded(attempts: 1))
        #expect(!harness.reconnector.isReconnecting)
    }

    @Test("the reconnect uses the connect method the app used (XMPPReconnect's usesOldSchoolSecureConnect)", arguments: [ConnectMethod.standard, .directTLS])
    func sameConnectMethod(_ method: ConnectMethod) {
        let harness = Harness()
        harness.stream.connect(using: method)
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        #expect(harness.stream.attempts == 2 && harness.stream.isConnected)
        #expect(harness.stream.methodsUsed == [method, method])
    }

    @Test("a stream that was never ready is not reconnected")
    func neverReady() {
        let harness = Harness()
        harness.stream.behaviour = .fail
        harness.stream.connect()
        harness.clock.advance(by: .seconds(3600))
        #expect(harness.stream.attempts == 1)
        #expect(harness.clock.pendingTimers == 0)
        #expect(harness.events.isEmpty)
    }

    @Test("an intentional disconnect never reconnects")
    func intentional() {
        let harness = Harness()
        harness.connectReady()
        harness.stream.disconnect()
        harness.clock.advance(by: .seconds(3600))
        #expect(harness.stream.attempts == 1)
        #expect(harness.events.isEmpty)
    }

    @Test("a refusal while connected is terminal: no retry")
    func refusedWhileConnected() {
        let harness = Harness()
        harness.connectReady()
        harness.stream.refuse("conflict")
        harness.clock.advance(by: .seconds(3600))
        #expect(harness.stream.attempts == 1)
        #expect(harness.events == [.refused(reason: "conflict")])
    }

    @Test("a refused attempt ends the process: no retry loop")
    func refusedAttempt() {
        let harness = Harness()
        harness.connectReady()
        harness.stream.behaviour = .refuse("not-authorized")
        harness.stream.drop()
        harness.clock.advance(by: .seconds(3600))
        #expect(harness.stream.attempts == 2)
        #expect(!harness.reconnector.isReconnecting)
        #expect(harness.events.last == .refused(reason: "not-authorized"))
    }

    @Test("failed attempts repeat every reconnectTimerInterval after the first delay")
    func periodicTimer() {
        let harness = Harness()
        harness.connectReady()
        harness.stream.behaviour = .fail
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))       // first attempt at 2 s
        harness.clock.advance(by: .seconds(19))
        #expect(harness.stream.attempts == 2)
        harness.clock.advance(by: .seconds(1))       // 22 s
        #expect(harness.stream.attempts == 3)
        harness.clock.advance(by: .seconds(40))      // 42 s, 62 s
        #expect(harness.stream.attempts == 5)
        #expect(harness.attemptsStarted() == [.timer, .timer, .timer, .timer])
    }

    @Test("reconnectDelay 0 attempts at once")
    func zeroDelay() {
        let harness = Harness { $0.reconnectDelay = .zero }
        harness.connectReady()
        harness.stream.drop()
        #expect(harness.stream.attempts == 2)
        #expect(harness.stream.isConnected)
    }

    @Test("reconnectTimerInterval 0 disables the periodic timer (XMPPReconnect made it a 1 ns timer)")
    func zeroInterval() {
        let harness = Harness { $0.reconnectTimerInterval = .zero }
        harness.connectReady()
        harness.stream.behaviour = .fail
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        #expect(harness.stream.attempts == 2)
        harness.clock.advance(by: .seconds(3600))
        #expect(harness.stream.attempts == 2)
        #expect(harness.clock.pendingTimers == 0)
        #expect(harness.events.last == .waitingForReachability(attempt: 2))
        // Only a reachability change brings the next attempt.
        harness.stream.behaviour = .succeed
        harness.reachability.set([])
        harness.reachability.set([.reachable])
        #expect(harness.stream.attempts == 3)
        #expect(harness.stream.isConnected)
    }

    @Test("autoReconnect off: no reconnect; turning it on later does not start one")
    func autoReconnectOff() {
        let harness = Harness()
        harness.reconnector.autoReconnect = false
        harness.connectReady()
        harness.stream.drop()
        harness.reconnector.autoReconnect = true
        harness.clock.advance(by: .seconds(3600))
        #expect(harness.stream.attempts == 1)
    }

    @Test("turning autoReconnect off does not stop the current process")
    func autoReconnectOffDuringProcess() {
        let harness = Harness()
        harness.connectReady()
        harness.stream.drop()
        harness.reconnector.autoReconnect = false
        harness.clock.advance(by: .seconds(2))
        #expect(harness.stream.attempts == 2)
        #expect(harness.stream.isConnected)
    }

    @Test("manualStart does nothing unless the stream is disconnected")
    func manualStartWhileConnected() {
        let harness = Harness()
        harness.connectReady()
        harness.reconnector.manualStart()
        #expect(!harness.reconnector.isReconnecting)
        harness.clock.advance(by: .seconds(60))
        #expect(harness.stream.attempts == 1)
    }

    @Test("manualStart acts as an accidental disconnect for a stream never connected")
    func manualStart() {
        let harness = Harness()
        harness.reconnector.manualStart()
        #expect(harness.reconnector.isReconnecting)
        harness.clock.advance(by: .seconds(2))
        #expect(harness.stream.attempts == 1)
        #expect(harness.stream.isConnected)
    }

    @Test("a manual start ends when the stream is next opened")
    func manualStartEndsWhenOpened() {
        let harness = Harness()
        harness.stream.behaviour = .failAfterOpen
        harness.reconnector.manualStart()
        harness.clock.advance(by: .seconds(2))
        #expect(harness.stream.attempts == 1)
        harness.clock.advance(by: .seconds(3600))
        #expect(harness.stream.attempts == 1)
        #expect(!harness.reconnector.isReconnecting)
    }

    @Test("with no network at launch, manualStart connects as soon as the host becomes reachable")
    func noNetworkAtLaunch() {
        let harness = Harness()
        harness.reachability.set([], reason: .networkUnreachable)
        harness.stream.behaviour = .fail
        harness.reconnector.manualStart()
        harness.clock.advance(by: .seconds(2))
        #expect(harness.stream.attempts == 1)
        harness.clock.advance(by: .seconds(5))
        harness.stream.behaviour = .succeed
        harness.reachability.set([.reachable])
        #expect(harness.stream.attempts == 2)
        #expect(harness.stream.isConnected)
        #expect(harness.attemptsStarted() == [.timer, .reachability])
    }

    @Test("stop ends the current process only: later disconnects still reconnect")
    func stop() {
        let harness = Harness()
        harness.connectReady()
        harness.stream.drop()
        harness.reconnector.stop()
        harness.clock.advance(by: .seconds(60))
        #expect(harness.stream.attempts == 1)
        #expect(harness.events.last == .stopped)
        harness.stream.connect()
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        #expect(harness.stream.attempts == 3)
        #expect(harness.stream.isConnected)
    }

    @Test("stop() followed by manualStart(): the stopped process stays stopped, the manual start is a new one that connects")
    func stopThenManualStart() {
        let harness = Harness()
        harness.connectReady()
        harness.stream.behaviour = .fail
        harness.stream.drop()
        harness.reconnector.stop()
        harness.clock.advance(by: .seconds(60))
        #expect(harness.stream.attempts == 1, "stopped: no attempt")
        #expect(!harness.reconnector.isReconnecting)
        harness.stream.behaviour = .succeed
        harness.reconnector.manualStart()
        #expect(harness.reconnector.isReconnecting)
        harness.clock.advance(by: .seconds(2))
        #expect(harness.stream.attempts == 2)
        #expect(harness.stream.isConnected)
        #expect(!harness.reconnector.isReconnecting)
    }

    @Test("stop during a hung attempt aborts it, and its disconnect is not taken as accidental")
    func stopDuringAttempt() {
        let harness = Harness()
        harness.connectReady()
        harness.stream.behaviour = .hang
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        harness.reconnector.stop()
        #expect(harness.stream.aborts == 1)
        harness.clock.advance(by: .seconds(3600))
        #expect(harness.stream.attempts == 2)
        #expect(!harness.reconnector.isReconnecting)
    }

    @Test("a stream that ignores the abort still counts as failed after another attemptTimeout")
    func abortIgnored() {
        final class DeafStream: ReconnectableStream, @unchecked Sendable {
            // Test double touched from the test thread only.
            let destinationHost = "fake.test"
            let reconnectEvents = StreamEventRelay()
            var attempts = 0
            func startConnectAttempt() {
                attempts += 1
                reconnectEvents.send(.willConnect)
            }
            func abortConnectAttempt() {}
            func verifyConnection() {}
        }
        let clock = ManualClock()
        let stream = DeafStream()
        let reconnector = Reconnector(scheduler: clock)
        reconnector.activate(stream)
        reconnector.manualStart()
        clock.advance(by: .seconds(2))          // attempt 1 hangs
        clock.advance(by: .seconds(30))         // timed out, aborted, ignored
        #expect(stream.attempts == 1)
        clock.advance(by: .seconds(30))         // counted as failed: the 20 s timer starts
        clock.advance(by: .seconds(20))
        #expect(stream.attempts == 2)
        #expect(reconnector.isReconnecting)
    }

    @Test("stop during an attempt that then succeeds does not swallow the next accidental disconnect")
    func stopRaceWithReady() {
        let harness = Harness()
        harness.connectReady()
        harness.stream.behaviour = .hang
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        harness.stream.behaviour = .succeed
        harness.reconnector.stop()          // aborts: the scripted stream reports the disconnect
        harness.stream.connect()            // the app connects again, and it becomes ready
        harness.stream.drop()
        #expect(harness.events.filter { if case .accidentalDisconnect = $0 { true } else { false } }.count == 2)
    }

    @Test("manualStart(immediately:) connects now and keeps retrying a stream that was never ready")
    func firstConnectRetries() {
        let harness = Harness()
        harness.stream.behaviour = .fail
        harness.reconnector.manualStart(immediately: true)
        #expect(harness.stream.attempts == 1)
        #expect(harness.reconnector.isReconnecting)
        harness.stream.behaviour = .succeed
        harness.clock.advance(by: .seconds(20))
        #expect(harness.stream.attempts == 2)
        #expect(harness.stream.isConnected)
    }

    @Test("a hung connect is aborted after attemptTimeout and retried")
    func hungConnect() {
        let harness = Harness()
        harness.connectReady()
        harness.stream.behaviour = .hang
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        harness.clock.advance(by: .seconds(29))
        #expect(harness.stream.aborts == 0)
        harness.stream.behaviour = .succeed
        harness.clock.advance(by: .seconds(1))
        #expect(harness.stream.aborts == 1)
        #expect(harness.events.contains(.attemptTimedOut(attempt: 1)))
        harness.clock.advance(by: .seconds(20))
        #expect(harness.stream.attempts == 3)
        #expect(harness.stream.isConnected)
    }

    @Test("the host becoming reachable while waiting triggers an attempt now, not at the timer")
    func reachableEndsWait() {
        let harness = Harness()
        harness.connectReady()
        harness.reachability.set([], reason: .networkUnreachable)
        harness.stream.drop()
        harness.reachability.set([.reachable])
        #expect(harness.stream.attempts == 2)
        #expect(harness.attemptsStarted() == [.reachability])
        #expect(harness.stream.isConnected)
        #expect(harness.clock.pendingTimers == 0)
    }

    @Test("a path change while an attempt hangs aborts it and retries at once")
    func pathChangeDuringAttempt() {
        let harness = Harness()
        harness.reachability.set(Harness.path(reachable: true, interface: 2))
        harness.connectReady()
        harness.stream.behaviour = .hang
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        #expect(harness.stream.attempts == 2)
        harness.stream.behaviour = .succeed
        harness.reachability.set(Harness.path(reachable: true, interface: 3, source: "203.0.113.2"))
        #expect(harness.stream.aborts == 1)
        #expect(harness.stream.attempts == 3)
        #expect(harness.stream.isConnected)
    }

    @Test("a dead socket after a network switch is probed and replaced")
    func deadSocketAfterSwitch() {
        let harness = Harness { $0.reconnectDelay = .zero }
        harness.reachability.set(Harness.path(reachable: true, interface: 2))
        harness.connectReady()
        harness.stream.liveness = .dead
        harness.reachability.set(Harness.path(reachable: true, interface: 3, source: "203.0.113.2"))
        #expect(harness.stream.verifications == 1)
        #expect(harness.stream.attempts == 2)
        #expect(harness.stream.isConnected)
    }

    @Test("losing the path while connected asks the stream to verify itself")
    func pathLostWhileConnected() {
        let harness = Harness()
        harness.connectReady()
        harness.reachability.set([], reason: .noCarrier("eth0"))
        #expect(harness.stream.verifications == 1)
        #expect(harness.events == [.verifyingConnection(flags: [])])
        #expect(harness.stream.isConnected)
    }

    @Test("huge durations neither overflow nor fire")
    func hugeDurations() {
        let harness = Harness {
            $0.reconnectDelay = .seconds(Int64.max / 2)
            $0.attemptTimeout = .seconds(10_000_000_000)
        }
        harness.connectReady()
        harness.stream.drop()
        harness.clock.advance(by: .seconds(3600))
        #expect(harness.stream.attempts == 1)
        #expect(harness.reconnector.isReconnecting)
        let scheduler = DispatchReconnectScheduler()
        let timer = scheduler.schedule(at: scheduler.now + .seconds(Int64.max / 2)) {}
        timer.cancel()
    }

    @Test("a healthy connection's disconnect asking for an immediate retry skips the delay; a failed attempt uses the policy")
    func immediateRetry() {
        let harness = Harness()
        harness.connectReady()
        // Honoured after a healthy connection: one that stayed ready for stableConnectionDuration.
        harness.clock.advance(by: .seconds(5))
        harness.stream.drop("server restarting", retry: .immediately)
        #expect(harness.stream.attempts == 2)
        #expect(harness.attemptsStarted() == [.immediate])
        harness.stream.behaviour = .fail
        harness.stream.drop()
        harness.clock.advance(by: .seconds(2))
        #expect(harness.stream.attempts == 3)
        // The failed attempt used the policy; a peer asking for an immediate retry is honoured.
        harness.stream.behaviour = .succeed
        harness.clock.advance(by: .seconds(20))
        #expect(harness.stream.isConnected)
    }

    @Test("reachability noise that does not change the path asks nothing")
    func samePath() {
        let harness = Harness()
        harness.connectReady()
        harness.reachability.set([.reachable])
        #expect(harness.stream.verifications == 0)
    }
}
