import Dispatch
import Foundation
import SystemSupport
import Realtime
import RealtimeProtocol
import Reconnect
import ReconnectTesting
import Testing

/// The realtime-connection-lifecycle seed, on a manual clock and an in-memory transport.
@Suite struct ConnectionLifecycleTests {
    @Test("initialized, connecting, connected: the id is set before the state becomes connected")
    func handshake() {
        let fixture = ClientFixture()
        #expect(fixture.state == .initialized)
        #expect(fixture.bird.connection.connectionId == nil)
        fixture.bird.connect()
        #expect(fixture.state == .connecting)
        #expect(fixture.socketCount == 1)
        #expect(fixture.socket.url == "ws://realtime.test:6001/app/test-key?namespace=bird&client=swift-reconnect&protocol=7")
        fixture.socket.accept()
        #expect(fixture.state == .connecting, "an open socket stays connecting until the handshake")
        fixture.socket.sendHandshake(socketID: "42.7")
        #expect(fixture.state == .connected)
        #expect(fixture.bird.connection.connectionId == "42.7")
        #expect(fixture.states == [.connecting, .connected])
        #expect(fixture.idsAtConnected == ["42.7"])
    }

    @Test("all six states: drop, backoff, reconnect, disconnect, connect, refusal")
    func sixStates() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.socket.drop()
        #expect(fixture.state == .unavailable)
        #expect(fixture.bird.connection.connectionId == nil)
        fixture.advanceToNextTimer()
        #expect(fixture.socketCount == 2)
        #expect(fixture.state == .connecting)
        fixture.handshake("2.2")
        fixture.bird.disconnect()
        #expect(fixture.state == .disconnected)
        #expect(fixture.socket.clientEnd == .closed(code: 1000, reason: "disconnect()"))
        fixture.bird.connect()
        fixture.handshake("3.3")
        fixture.socket.serverClose(code: 4001, reason: "App key not found")
        #expect(fixture.states == [.connecting, .connected, .unavailable, .connecting, .connected, .disconnected,
                                   .connecting, .connected, .failed])
        #expect(fixture.errors.last == RealtimeError(kind: .closed, code: 4001, message: "App key not found"))
    }

    /// Expected reaction per close code, at every range edge of the seed's table.
    static let closeCodes: [(UInt16, ConnectionState)] = [
        (1000, .unavailable), (1006, .unavailable), (3999, .unavailable),
        (4000, .failed), (4099, .failed),
        (4100, .unavailable), (4199, .unavailable),
        (4200, .connecting), (4299, .connecting),
        (4300, .unavailable),
    ]

    @Test("close codes at the edges of each range", arguments: closeCodes)
    func closeCodeTable(code: UInt16, expected: ConnectionState) {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.stayUp()
        fixture.socket.serverClose(code: code, reason: "test")
        #expect(fixture.state == expected)
        switch expected {
        case .failed:
            fixture.clock.advance(by: .seconds(3600))
            #expect(fixture.socketCount == 1, "a refusal is never retried")
            #expect(!fixture.bird.reconnector.isReconnecting)
        case .connecting:
            // Immediate retry: the next socket opens within the reconnector's 100 ms floor.
            fixture.clock.advance(by: .milliseconds(100))
            #expect(fixture.socketCount == 2)
            #expect(!fixture.states.contains(.unavailable))
        default:
            #expect(fixture.socketCount == 1, "no retry before the backoff delay")
            let wait = fixture.advanceToNextTimer()
            #expect(wait.map { $0 <= .seconds(1) } == true, "the first delay is within the 1 s base")
            #expect(fixture.socketCount == 2)
        }
    }

    @Test("backoff: full jitter under min(30 s, 1 s × 2^n), not constant, reset by a connection that stayed up")
    func backoff() {
        let fixture = ClientFixture(seed: 99)
        fixture.connected()
        fixture.socket.drop()
        for _ in 0..<9 {
            fixture.advanceToNextTimer()
            fixture.socket.fail()
        }
        let delays = fixture.scheduledDelays
        #expect(delays.count == 10)
        for (retry, delay) in delays.enumerated() {
            let ceiling = Duration.seconds(min(30, 1 << retry))
            #expect(delay >= .zero && delay <= ceiling, "retry \(retry): \(delay) over \(ceiling)")
        }
        #expect(Set(delays).count > 5, "jittered delays differ")
        #expect(delays.suffix(4).contains { $0 > .seconds(1) }, "later ceilings grow past the base")
        #expect(fixture.state == .unavailable)
        fixture.advanceToNextTimer()
        fixture.handshake("9.9")
        fixture.stayUp()
        fixture.socket.drop()
        #expect(fixture.scheduledDelays.count == 11)
        #expect(fixture.scheduledDelays.last! <= .seconds(1), "a connection that stayed up resets the backoff to its base")
    }

    // Eight seeds: with a grown ceiling (8 s) all eight draws landing under 1 s has odds 8⁻⁸.
    @Test("immediate retries (4200 from a server shutting down) do not grow the backoff ceiling", arguments: 1...8)
    func immediateRetriesKeepBase(seed: UInt64) {
        let fixture = ClientFixture(seed: seed)
        fixture.connected()
        for index in 0..<3 {
            fixture.stayUp()
            fixture.socket.serverClose(code: 4200, reason: "Server shutting down")
            fixture.clock.advance(by: .milliseconds(100))
            fixture.handshake("\(index + 2).1")
        }
        #expect(fixture.socketCount == 4)
        fixture.stayUp()
        fixture.socket.serverClose(code: 4200, reason: "Server shutting down")
        #expect(fixture.socketCount == 5)
        fixture.socket.fail()
        #expect(fixture.state == .unavailable)
        #expect(fixture.scheduledDelays.last.map { $0 <= .seconds(1) } == true, "the first backoff wait is under the 1 s base")
    }

    @Test("a server that closes with 4200 right after every handshake: past the short connection allowance (5), a growing backoff, at most 10 connections a second")
    func refusalLoopBacksOff() {
        let fixture = ClientFixture(seed: 5)
        fixture.connected()
        let started = fixture.clock.now
        var retriedAtOnce: [Bool] = []
        for index in 0..<12 {
            fixture.socket.serverClose(code: 4200, reason: "Server shutting down")
            retriedAtOnce.append(fixture.state == .connecting)
            #expect(fixture.state == .connecting || fixture.state == .unavailable, "cycle \(index)")
            fixture.advanceToNextTimer()
            fixture.handshake("\(index + 2).1")
        }
        #expect(fixture.socketCount == 13)
        let elapsed = fixture.clock.now - started
        // A 4200 this soon after the handshake is retried at once within the allowance only:
        // the first five, then one more per 5 s.
        #expect(Array(retriedAtOnce.prefix(6)) == [true, true, true, true, true, false], "\(retriedAtOnce)")
        #expect(retriedAtOnce.count { $0 } <= 5 + Int(elapsed / .seconds(5)), "\(retriedAtOnce) in \(elapsed)")
        #expect(elapsed >= .seconds(12) / 10, "at most 10 connections a second: 12 took \(elapsed)")
        #expect(fixture.scheduledDelays.suffix(4).contains { $0 > .seconds(1) }, "the backoff grew past its base")
    }

    @Test("a timer firing 80 s late (a frozen process): a ping with the 1 s deadline at once, and a dead connection replaced after it")
    func frozenProcess() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.stayUp()
        // Frozen for 200 s: the activity check due at 120 s runs 80 s late.
        fixture.clock.jump(by: .seconds(200))
        fixture.clock.runDueTimers()
        #expect(fixture.socket.sentMessages.last?.event == "bird:ping")
        #expect(fixture.socketCount == 1)
        // No answer: within the 1 s deadline, not the 30 s one, the client closes and reconnects.
        fixture.clock.advance(by: .seconds(1))
        #expect(fixture.socket.index == 1, "a new socket after the 1 s deadline")
        #expect(fixture.errors.last?.code == 4201)
    }

    @Test("an activity check on time keeps the 30 s pong deadline")
    func onTimeActivityCheck() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.clock.advance(by: .seconds(120))
        #expect(fixture.socket.sentMessages.last?.event == "bird:ping")
        fixture.clock.advance(by: .seconds(29))
        #expect(fixture.socketCount == 1, "still waiting for the pong")
        fixture.clock.advance(by: .seconds(1))
        #expect(fixture.errors.last?.code == 4201)
    }

    @Test("the activity timeout comes from the handshake; 120 s when absent")
    func activityTimeout() {
        let fromHandshake = ClientFixture()
        fromHandshake.connected(activityTimeout: 30)
        #expect(fromHandshake.bird.connection.activityTimeout == .seconds(30))
        fromHandshake.clock.advance(by: .milliseconds(29_999))
        #expect(!fromHandshake.socket.sent.contains { $0.contains("bird:ping") })
        fromHandshake.clock.advance(by: .milliseconds(1))
        #expect(fromHandshake.socket.sentMessages.filter { $0.event == "bird:ping" }.count == 1)

        let absent = ClientFixture()
        absent.connected(activityTimeout: nil)
        #expect(absent.bird.connection.activityTimeout == .seconds(120))
        absent.clock.advance(by: .seconds(119))
        #expect(!absent.socket.sent.contains { $0.contains("bird:ping") })
        absent.clock.advance(by: .seconds(1))
        #expect(absent.socket.sentMessages.contains { $0.event == "bird:ping" })
    }

    @Test("any frame resets the activity timer")
    func activityResets() {
        let fixture = ClientFixture()
        fixture.connected(activityTimeout: 30)
        _ = fixture.bird.subscribe("prices")
        fixture.clock.advance(by: .seconds(20))
        fixture.publish("tick", on: "prices", data: "{}")
        fixture.clock.advance(by: .seconds(20))
        #expect(!fixture.socket.sent.contains { $0.contains("bird:ping") })
        fixture.clock.advance(by: .seconds(10))
        #expect(fixture.socket.sent.contains { $0.contains("bird:ping") })
    }

    @Test("no pong within 30 s: closed with 4201 and retried at once")
    func pongTimeout() {
        let fixture = ClientFixture()
        fixture.connected(activityTimeout: 30)
        fixture.clock.advance(by: .seconds(30))
        fixture.clock.advance(by: .milliseconds(29_999))
        #expect(fixture.socket.clientEnd == nil)
        fixture.clock.advance(by: .milliseconds(1))
        #expect(fixture.transport.sockets[0].clientEnd == .closed(code: 4201, reason: "pong not received"))
        #expect(fixture.errors.last?.kind == .pongTimeout)
        fixture.clock.advance(by: .milliseconds(100))
        #expect(fixture.socketCount == 2)
        #expect(fixture.states.suffix(2) == [.connected, .connecting])
    }

    @Test("a pong in time keeps the connection")
    func pongInTime() {
        let fixture = ClientFixture()
        fixture.connected(activityTimeout: 30)
        fixture.clock.advance(by: .seconds(30))
        fixture.clock.advance(by: .seconds(29))
        fixture.socket.receive(RealtimeMessage(event: "bird:pong", data: "{}"))
        fixture.clock.advance(by: .seconds(29))
        #expect(fixture.socket.clientEnd == nil)
        #expect(fixture.state == .connected)
    }

    @Test("the server's ping is answered with a pong")
    func answersPing() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.socket.receive(RealtimeMessage(event: "bird:ping", data: "{}"))
        #expect(fixture.socket.sentMessages.last?.event == "bird:pong")
    }

    @Test("disconnect while connecting: disconnected, the socket closed, nothing scheduled")
    func disconnectWhileConnecting() {
        let fixture = ClientFixture()
        fixture.bird.connect()
        fixture.bird.disconnect()
        #expect(fixture.state == .disconnected)
        #expect(fixture.socket.clientEnd == .closed(code: 1000, reason: "disconnect()"))
        fixture.socket.accept()
        fixture.socket.sendHandshake(socketID: "late.1")
        #expect(fixture.state == .disconnected, "frames of the closed socket are ignored")
        fixture.clock.advance(by: .seconds(3600))
        #expect(fixture.socketCount == 1)
        #expect(fixture.clock.pendingTimers == 0)
    }

    @Test("disconnect while unavailable: the scheduled retry is cancelled")
    func disconnectWhileUnavailable() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.socket.drop()
        #expect(fixture.state == .unavailable)
        fixture.bird.disconnect()
        #expect(fixture.state == .disconnected)
        fixture.clock.advance(by: .seconds(3600))
        #expect(fixture.socketCount == 1)
        #expect(!fixture.bird.reconnector.isReconnecting)
    }

    @Test("the two causes of 4009 (seed, \"Close code 4009\") are told apart by the close reason the error carries: signin required, or terminated by the app's server; both end in failed")
    func twoCausesOf4009() {
        var reasons: [String] = []
        for reason in ["Unauthorized: signin required", "Connection terminated"] {
            let fixture = ClientFixture()
            fixture.connected()
            fixture.socket.serverClose(code: 4009, reason: reason)
            #expect(fixture.state == .failed)
            #expect(fixture.errors.last == RealtimeError(kind: .closed, code: 4009, message: reason))
            fixture.clock.advance(by: .seconds(60))
            #expect(fixture.socketCount == 1, "no retry after 4009, whichever the cause")
            reasons.append(fixture.errors.last?.message ?? "")
        }
        #expect(Set(reasons).count == 2)
    }

    @Test("connect after failed opens a new connection")
    func connectAfterFailed() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.socket.serverClose(code: 4009, reason: "Connection terminated")
        #expect(fixture.state == .failed)
        fixture.bird.connect()
        #expect(fixture.socketCount == 2)
        fixture.handshake("2.1")
        #expect(fixture.state == .connected)
        #expect(fixture.bird.connection.connectionId == "2.1")
    }

    @Test("connect while unavailable attempts now instead of after the backoff")
    func connectWhileUnavailable() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.socket.drop()
        #expect(fixture.socketCount == 1)
        fixture.bird.connect()
        #expect(fixture.socketCount == 2)
        #expect(fixture.state == .connecting)
    }

    @Test("a handshake without a socket id is an error; the socket is closed and retried with backoff")
    func handshakeWithoutID() {
        let fixture = ClientFixture()
        fixture.bird.connect()
        fixture.socket.accept()
        fixture.socket.receive(RealtimeMessage(event: "bird:connection_established", data: #"{"activity_timeout":30}"#))
        #expect(fixture.state == .unavailable)
        #expect(fixture.bird.connection.connectionId == nil)
        #expect(fixture.socket.clientEnd == .closed(code: 1002, reason: "handshake without a socket id"))
        #expect(fixture.errors.map(\.kind) == [.handshake])
        fixture.advanceToNextTimer()
        #expect(fixture.socketCount == 2)
    }

    @Test("bad frames are reported and skipped; the connection stays up")
    func badFrames() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.socket.receive("{not json")
        fixture.socket.receive("[1,2]")
        fixture.socket.receive(#"{"data":"x"}"#)
        fixture.socket.receiveBinary(size: 10)
        #expect(fixture.state == .connected)
        #expect(fixture.errors.map(\.kind) == Array(repeating: .protocolViolation, count: 4))
        #expect(fixture.socket.clientEnd == nil)
    }

    @Test("a server error event without a channel reaches onError with code and message")
    func serverError() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.socket.receive(RealtimeMessage(event: "bird:error", data: #"{"code":4301,"message":"Too many client events"}"#))
        #expect(fixture.errors == [RealtimeError(kind: .server, code: 4301, message: "Too many client events")])
    }

    @Test("the pusher namespace is spoken end to end")
    func pusherNamespace() {
        let fixture = ClientFixture { $0.namespace = .pusher }
        fixture.bird.connect()
        #expect(fixture.socket.url.contains("namespace=pusher"))
        fixture.socket.accept()
        fixture.socket.sendHandshake(socketID: "5.5", namespace: .pusher)
        #expect(fixture.state == .connected)
        fixture.socket.receive(RealtimeMessage(event: "pusher:ping", data: "{}"))
        #expect(fixture.socket.sentMessages.last?.event == "pusher:pong")
    }

    @Test("a transport that cannot open counts as a failed attempt and is retried")
    func openThrows() {
        struct Refused: Error {}
        let fixture = ClientFixture()
        fixture.transport.openError = Refused()
        fixture.bird.connect()
        #expect(fixture.state == .unavailable)
        #expect(fixture.errors.first?.kind == .transport)
        fixture.transport.openError = nil
        fixture.advanceToNextTimer()
        fixture.handshake()
        #expect(fixture.state == .connected)
    }

    @Test("a hung attempt is aborted after the connect timeout and retried")
    func connectTimeout() {
        let fixture = ClientFixture { $0.connectTimeout = .seconds(10) }
        fixture.bird.connect()
        fixture.socket.accept()
        fixture.clock.advance(by: .seconds(10))
        #expect(fixture.transport.sockets[0].clientEnd == .aborted)
        #expect(fixture.state == .unavailable)
        fixture.advanceToNextTimer()
        #expect(fixture.socketCount == 2)
    }

    @Test("disconnect() during the reconnector's attempt wins: nothing opens (found by the bad-input trial)")
    func disconnectRacesRetry() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.socket.drop()
        let bird = fixture.bird
        let once = Locked(false)
        // The app disconnects from another thread exactly when the attempt starts.
        let token = bird.reconnector.onEvent { event in
            guard case .attemptStarted = event, once.withLock({ done in defer { done = true }; return !done }) else { return }
            let finished = DispatchSemaphore(value: 0)
            Thread { bird.disconnect(); finished.signal() }.start()
            finished.wait()
        }
        fixture.advanceToNextTimer()
        token.cancel()
        #expect(fixture.state == .disconnected)
        #expect(fixture.socketCount == 1, "no socket opened after disconnect()")
        fixture.clock.advance(by: .seconds(3600))
        #expect(fixture.socketCount == 1)
    }

    @Test("handshake activity_timeout that is not a positive integer: fractions kept, huge ones clamped, strings ignored")
    func lenientHandshake() {
        for (data, expected) in [(#"{"socket_id":"1.1","activity_timeout":30.5}"#, Duration.seconds(30.5)),
                                 (#"{"socket_id":"1.1","activity_timeout":1e30}"#, .seconds(86_400)),
                                 (#"{"socket_id":"1.1","activity_timeout":"120"}"#, .seconds(120))] {
            let fixture = ClientFixture()
            fixture.bird.connect()
            fixture.socket.accept()
            fixture.socket.receive(RealtimeMessage(event: "bird:connection_established", data: data))
            #expect(fixture.state == .connected, "\(data)")
            #expect(fixture.bird.connection.activityTimeout == expected, "\(data)")
        }
    }

    @Test("subscription_succeeded for a channel never subscribed is reported")
    func unknownConfirmation() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.confirm("nobody")
        #expect(fixture.errors.map(\.kind) == [.protocolViolation])
    }
}
