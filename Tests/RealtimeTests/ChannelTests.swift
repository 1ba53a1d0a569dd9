import Realtime
import RealtimeProtocol
import Reconnect
import ReconnectTesting
import Testing

/// Public channels across reconnects, and the reconnect bug kinds of DESIGN.md.
@Suite struct ChannelTests {
    @Test("subscribe returns the same object for the same name; sent at once when connected, after the handshake otherwise")
    func sameObject() {
        let fixture = ClientFixture()
        let early = fixture.bird.subscribe("early")
        #expect(fixture.bird.subscribe("early") === early)
        fixture.connected()
        #expect(fixture.subscribes() == ["early"])
        _ = fixture.bird.subscribe("late")
        #expect(fixture.subscribes() == ["early", "late"])
        #expect(fixture.bird.channelNames == ["early", "late"])
    }

    @Test("resubscribed after a reconnect with handlers kept; subscription_succeeded after each (re)subscription")
    func resubscribe() {
        let fixture = ClientFixture()
        let deliveries = Deliveries()
        let prices = fixture.bird.subscribe("prices")
        prices.bindAll { deliveries.record($0) }
        fixture.connected()
        fixture.confirm("prices")
        fixture.drain()
        #expect(prices.subscribed)
        fixture.socket.drop()
        #expect(!prices.subscribed, "subscriptions belong to the connection")
        fixture.advanceToNextTimer()
        fixture.handshake("2.2")
        #expect(fixture.subscribes() == ["prices"])
        fixture.confirm("prices")
        fixture.publish("tick", on: "prices", data: #"{"p":1}"#)
        fixture.drain()
        #expect(prices.subscribed)
        #expect(deliveries.all.map(\.event) == ["bird:subscription_succeeded", "bird:subscription_succeeded", "tick"])
        #expect(deliveries.named("tick").first?.data == #"{"p":1}"#)
    }

    @Test("a channel the app unsubscribed is not resubscribed after a reconnect")
    func unsubscribedStaysGone() {
        let fixture = ClientFixture()
        let a = fixture.bird.subscribe("a")
        _ = fixture.bird.subscribe("b")
        fixture.connected()
        a.unsubscribe()
        #expect(fixture.socket.sentMessages.last?.event == "bird:unsubscribe")
        fixture.socket.drop()
        fixture.advanceToNextTimer()
        fixture.handshake("2.2")
        #expect(fixture.subscribes() == ["b"])
        #expect(fixture.bird.channel(named: "a") == nil)
        #expect(fixture.bird.subscribe("a") !== a, "a later subscribe makes a new channel")
    }

    @Test("unsubscribing while disconnected sends nothing and is honoured on the next connection")
    func unsubscribeWhileDown() {
        let fixture = ClientFixture()
        _ = fixture.bird.subscribe("a")
        fixture.connected()
        fixture.socket.drop()
        fixture.bird.unsubscribe("a")
        fixture.advanceToNextTimer()
        fixture.handshake("2.2")
        #expect(fixture.subscribes().isEmpty)
    }

    @Test("exactly one delivery per event per handler after several reconnects")
    func oneDeliveryAfterReconnects() {
        let fixture = ClientFixture()
        let first = Deliveries()
        let second = Deliveries()
        let channel = fixture.bird.subscribe("prices")
        channel.bind("tick") { first.record($0) }
        channel.bind("tick") { second.record($0) }
        fixture.connected()
        for round in 2...5 {
            fixture.socket.drop()
            fixture.advanceToNextTimer()
            fixture.handshake("\(round).\(round)")
            _ = fixture.bird.subscribe("prices")
        }
        fixture.publish("tick", on: "prices", data: "1")
        fixture.drain()
        #expect(first.all.count == 1)
        #expect(second.all.count == 1)
        #expect(fixture.subscribes() == ["prices"], "one subscribe per connection")
    }

    @Test("frames of an old socket are ignored once a new one is up")
    func oldSocketIgnored() {
        let fixture = ClientFixture()
        let deliveries = Deliveries()
        fixture.bird.subscribe("prices").bindAll { deliveries.record($0) }
        fixture.connected()
        let old = fixture.socket
        old.drop()
        fixture.advanceToNextTimer()
        fixture.handshake("2.2")
        fixture.publish("stale", on: "prices", data: "{}", socket: old)
        old.serverClose(code: 4009, reason: "late close of the old socket")
        old.sendHandshake(socketID: "old.1")
        fixture.drain()
        #expect(deliveries.all.isEmpty)
        #expect(fixture.state == .connected)
        #expect(fixture.bird.connection.connectionId == "2.2")
    }

    @Test("a pong deadline of the old connection never closes the new one")
    func oldPongDeadline() {
        let fixture = ClientFixture()
        fixture.connected(activityTimeout: 30)
        fixture.clock.advance(by: .seconds(30))
        #expect(fixture.socket.sentMessages.contains { $0.event == "bird:ping" })
        fixture.socket.drop()
        fixture.advanceToNextTimer()
        fixture.handshake("2.2", activityTimeout: 120)
        fixture.clock.advance(by: .seconds(60))
        #expect(fixture.socket.clientEnd == nil)
        #expect(fixture.state == .connected)
    }

    @Test("ten drops in a row never reach failed")
    func tenDrops() {
        let fixture = ClientFixture()
        fixture.connected()
        for _ in 0..<10 {
            fixture.socket.drop()
            #expect(fixture.state == .unavailable)
            fixture.advanceToNextTimer()
            fixture.socket.fail()
        }
        #expect(!fixture.states.contains(.failed))
        #expect(fixture.bird.reconnector.isReconnecting)
        fixture.advanceToNextTimer()
        fixture.handshake("12.1")
        #expect(fixture.state == .connected)
    }

    @Test("after disconnect() then connect(), automatic reconnection still works")
    func reconnectAfterDisconnectConnect() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.bird.disconnect()
        fixture.bird.connect()
        fixture.handshake("2.2")
        fixture.socket.drop()
        #expect(fixture.state == .unavailable)
        fixture.advanceToNextTimer()
        #expect(fixture.socketCount == 3)
        fixture.handshake("3.3")
        #expect(fixture.state == .connected)
    }

    @Test("a refused subscription arrives on the channel; errors without a channel on the connection")
    func channelErrors() {
        let fixture = ClientFixture()
        let deliveries = Deliveries()
        let channel = fixture.bird.subscribe("bad name!")
        channel.bindAll { deliveries.record($0) }
        fixture.connected()
        fixture.socket.receive(RealtimeMessage(event: "bird:subscription_error", channel: "bad name!",
                                               data: #"{"type":"InvalidChannel","status":400}"#))
        fixture.drain()
        #expect(deliveries.all.map(\.event) == ["bird:subscription_error"])
        #expect(!channel.subscribed)
        #expect(fixture.errors.isEmpty)
    }

    @Test("events for channels the client does not have are reported, not delivered")
    func unknownChannel() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.publish("tick", on: "nobody", data: "{}")
        #expect(fixture.errors.map(\.kind) == [.protocolViolation])
    }
}

/// Reachability and the reconnector's delegate hook.
@Suite struct ClientReachabilityTests {
    @Test("the path coming back ends the backoff wait at once")
    func pathBack() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.reachability.set([])
        fixture.socket.drop()
        for _ in 0..<6 {
            fixture.advanceToNextTimer()
            fixture.socket.fail()
        }
        let sockets = fixture.socketCount
        #expect(fixture.state == .unavailable)
        fixture.reachability.set([.reachable])
        #expect(fixture.socketCount == sockets + 1, "an attempt starts when the path comes back, not at the next backoff tick")
        fixture.handshake("9.9")
        #expect(fixture.state == .connected)
    }

    @Test("a lost path while connected pings at once with a 1 s deadline; no answer → unavailable")
    func pathLost() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.reachability.set([])
        #expect(fixture.socket.sentMessages.last?.event == "bird:ping")
        fixture.clock.advance(by: .milliseconds(999))
        #expect(fixture.state == .connected)
        fixture.clock.advance(by: .milliseconds(1))
        #expect(fixture.state == .unavailable)
        #expect(fixture.transport.sockets[0].clientEnd == .closed(code: 4201, reason: "pong not received"))
    }

    @Test("a lost path with a live socket: the pong keeps the connection")
    func pathLostButAlive() {
        let fixture = ClientFixture()
        fixture.connected()
        fixture.reachability.set([.reachable, .isDirect])
        fixture.socket.receive(RealtimeMessage(event: "bird:pong", data: "{}"))
        fixture.clock.advance(by: .seconds(5))
        #expect(fixture.state == .connected)
        #expect(fixture.socket.clientEnd == nil)
    }

    @Test("a delegate can veto reconnects; the state stays unavailable")
    func veto() {
        let fixture = ClientFixture()
        fixture.connected()
        let token = fixture.bird.reconnector.addDelegate(queue: fixture.queue, shouldAttemptAutoReconnect: { _ in false })
        fixture.socket.drop()
        fixture.advanceToNextTimer()
        fixture.drain()  // the delegate answers on the delivery queue
        #expect(fixture.reconnectEvents.contains { if case .vetoed = $0 { true } else { false } })
        #expect(fixture.socketCount == 1)
        #expect(fixture.state == .unavailable)
        token.cancel()
    }
}
