import RealtimeProtocol
import RealtimeServer
import Testing

@Suite struct RealtimeHubTests {
    @Test("the handshake carries a unique socket id and the app's activity timeout")
    func handshake() throws {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let (b, idB) = fixture.connect(.pusher)
        let first = try #require(a.frames.first)
        #expect(first.event == "bird:connection_established")
        #expect(try first.decodeData(ConnectionEstablished.self) == ConnectionEstablished(socketID: idA, activityTimeout: 30))
        #expect(b.frames.first?.event == "pusher:connection_established")
        #expect(idA != idB)
        #expect(idA.split(separator: ".").count == 2)
    }

    @Test("unknown app key closes with 4001; over the connection limit closes with 4100")
    func refusals() {
        let fixture = HubFixture()
        let stranger = RecordingOutput()
        #expect(fixture.hub.open(appKey: "nope", namespace: .bird, output: stranger) == nil)
        #expect(stranger.closeCode == 4001)
        for _ in 0..<3 { _ = fixture.connect() }
        let extra = RecordingOutput()
        #expect(fixture.hub.open(appKey: HubFixture.app.key, namespace: .bird, output: extra) == nil)
        #expect(extra.closeCode == 4100)
    }

    @Test("ping gets pong in the connection's namespace")
    func pingPong() {
        let fixture = HubFixture()
        let (output, id) = fixture.connect(.pusher)
        fixture.hub.receive(text: #"{"event":"pusher:ping","data":{}}"#, from: id)
        #expect(output.last?.event == "pusher:pong")
    }

    @Test("a silent connection is pinged after the activity timeout and closed with 4201 without a pong")
    func pruning() {
        let fixture = HubFixture()
        let (quiet, _) = fixture.connect()
        let (lively, livelyID) = fixture.connect()
        fixture.advance(.seconds(29))
        fixture.hub.sweep()
        #expect(quiet.events("bird:ping").isEmpty)
        fixture.advance(.seconds(1))
        fixture.hub.sweep()
        #expect(quiet.events("bird:ping").count == 1)
        #expect(lively.events("bird:ping").count == 1)
        fixture.hub.receive(text: #"{"event":"bird:pong","data":"{}"}"#, from: livelyID)
        fixture.advance(.seconds(30))
        fixture.hub.sweep()
        #expect(quiet.closeCode == 4201)
        #expect(lively.closeCode == nil)
        #expect(fixture.hub.connectionCount == 1)
    }

    @Test("subscribers receive published events in publish order; unsubscribe stops delivery")
    func publishOrder() {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let (b, idB) = fixture.connect(.pusher)
        fixture.subscribe(idA, "news")
        fixture.subscribe(idB, "news", namespace: .pusher)
        #expect(a.last?.event == "bird_internal:subscription_succeeded")
        #expect(b.last?.event == "pusher_internal:subscription_succeeded")
        for index in 0..<100 { fixture.hub.publish(appID: "1", channels: ["news"], event: "update", data: "\(index)") }
        #expect(a.events("update").map(\.data) == (0..<100).map { "\($0)" })
        #expect(b.events("update").map(\.data) == (0..<100).map { "\($0)" })
        #expect(fixture.hub.channels(appID: "1") == ["news": 2])
        fixture.send(idA, "bird:unsubscribe", UnsubscribeRequest(channel: "news"))
        fixture.hub.publish(appID: "1", channels: ["news"], event: "update", data: "late")
        #expect(a.events("update").count == 100)
        #expect(b.events("update").count == 101)
    }

    @Test("the publisher's own socket can be excluded")
    func excluding() {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        fixture.subscribe(idA, "news")
        #expect(fixture.hub.publish(appID: "1", channels: ["news"], event: "e", data: "{}", excluding: idA) == 0)
        #expect(a.events("e").isEmpty)
    }

    @Test("bad input gets an error event and the connection keeps working", arguments: [
        "not json", "[]", #"{"event":"bird:subscribe"}"#, #"{"event":"bird:subscribe","data":"{}"}"#,
        #"{"event":"bird:nonsense","data":"{}"}"#, #"{"event":"something","data":"{}"}"#,
        #"{"event":"bird_internal:subscription_succeeded","channel":"x"}"#,
    ])
    func badInput(text: String) {
        let fixture = HubFixture()
        let (output, id) = fixture.connect()
        fixture.hub.receive(text: text, from: id)
        #expect(output.last?.event == "bird:error")
        #expect(output.closeCode == nil)
        fixture.hub.receive(text: #"{"event":"bird:ping"}"#, from: id)
        #expect(output.last?.event == "bird:pong")
    }

    @Test("binary frames are refused with an error event")
    func binary() {
        let fixture = HubFixture()
        let (output, id) = fixture.connect()
        fixture.hub.receiveBinary(from: id)
        #expect(output.last?.event == "bird:error")
    }

    @Test("repeated abuse closes the connection with 4300; others keep being served")
    func abuse() {
        let fixture = HubFixture()
        let (bad, badID) = fixture.connect()
        let (good, goodID) = fixture.connect()
        fixture.subscribe(goodID, "news")
        for _ in 0..<11 { fixture.hub.receive(text: "garbage", from: badID) }
        #expect(bad.closeCode == 4300)
        fixture.hub.publish(appID: "1", channels: ["news"], event: "still", data: "{}")
        #expect(good.last?.event == "still")
    }

    @Test("fault injection: close with any code, drop without a close frame; both forget the connection")
    func closeAndDrop() {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let (b, idB) = fixture.connect()
        fixture.subscribe(idA, "news")
        fixture.subscribe(idB, "news")
        #expect(fixture.hub.close(appID: "1", socketID: idA, code: 4201, reason: "test"))
        #expect(a.closeCode == 4201)
        #expect(!fixture.hub.close(appID: "2", socketID: idB, code: 4201, reason: "wrong app"))
        #expect(fixture.hub.drop(appID: "1", socketID: idB))
        #expect(b.aborted && b.closeCode == nil)
        #expect(!fixture.hub.drop(appID: "1", socketID: idB))
        #expect(fixture.hub.publish(appID: "1", channels: ["news"], event: "e", data: "{}") == 0)
        #expect(fixture.hub.connectionCount == 0)
    }

    @Test("terminating a socket closes it with 4009; shutdown closes everyone with 4200 and refuses new connections")
    func terminateAndShutdown() {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let (b, _) = fixture.connect()
        #expect(fixture.hub.terminate(appID: "1", socketID: idA))
        #expect(a.closeCode == 4009)
        #expect(!fixture.hub.terminate(appID: "1", socketID: idA))
        fixture.hub.shutdown()
        #expect(b.closeCode == 4200)
        let late = RecordingOutput()
        #expect(fixture.hub.open(appKey: HubFixture.app.key, namespace: .bird, output: late) == nil)
        #expect(late.closeCode == 4200)
    }
}

@Suite struct RealtimeHubChannelTests {
    @Test("private channels need a valid signature for this socket id")
    func privateChannels() {
        let fixture = HubFixture()
        let (output, id) = fixture.connect()
        fixture.subscribe(id, "private-a")
        #expect(output.last?.event == "bird:subscription_error")
        fixture.subscribe(id, "private-a", auth: fixture.signer.authorizeSubscription(socketID: "1.2", channel: "private-a"))
        #expect(output.last?.event == "bird:subscription_error")
        fixture.subscribe(id, "private-a", auth: fixture.signer.authorizeSubscription(socketID: id, channel: "private-a"))
        #expect(output.last?.event == "bird_internal:subscription_succeeded")
    }

    @Test("presence: members listed on subscribe, added and removed once per user")
    func presence() throws {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let (b, idB) = fixture.connect()
        let dataA = #"{"user_id":"ana","user_info":{"name":"Ana"}}"#
        let dataB = #"{"user_id":"bo"}"#
        fixture.subscribe(idA, "presence-room", auth: fixture.signer.authorizeSubscription(socketID: idA, channel: "presence-room", channelData: dataA), channelData: dataA)
        fixture.subscribe(idB, "presence-room", auth: fixture.signer.authorizeSubscription(socketID: idB, channel: "presence-room", channelData: dataB), channelData: dataB)
        let succeeded = try #require(b.events("bird_internal:subscription_succeeded").last)
        let presence = try succeeded.decodeData(PresenceSubscriptionData.self).presence
        #expect(presence.ids == ["ana", "bo"])
        #expect(presence.hash["ana"]?["name"]?.string == "Ana")
        #expect(try a.events("bird_internal:member_added").map { try $0.decodeData(PresenceMember.self).userID } == ["bo"])
        fixture.hub.closed(idB)
        #expect(try a.events("bird_internal:member_removed").map { try $0.decodeData(PresenceMember.self).userID } == ["bo"])
    }

    @Test("a presence user id cannot be spoofed: channel_data is part of the signature")
    func spoofing() {
        let fixture = HubFixture()
        let (output, id) = fixture.connect()
        let signed = #"{"user_id":"me"}"#
        fixture.subscribe(id, "presence-x", auth: fixture.signer.authorizeSubscription(socketID: id, channel: "presence-x", channelData: signed), channelData: #"{"user_id":"admin"}"#)
        #expect(output.last?.event == "bird:subscription_error")
    }

    @Test("client events reach other members of private channels, never the sender, never public channels")
    func clientEvents() {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let (b, idB) = fixture.connect()
        for (id, channel) in [(idA, "private-c"), (idB, "private-c"), (idA, "news"), (idB, "news")] {
            fixture.subscribe(id, channel, auth: channel.hasPrefix("private-") ? fixture.signer.authorizeSubscription(socketID: id, channel: channel) : nil)
        }
        fixture.hub.receive(text: #"{"event":"client-typing","channel":"private-c","data":"{}"}"#, from: idA)
        #expect(b.events("client-typing").count == 1)
        #expect(a.events("client-typing").isEmpty)
        fixture.hub.receive(text: #"{"event":"client-typing","channel":"news","data":"{}"}"#, from: idA)
        #expect(b.events("client-typing").count == 1)
        #expect(a.last?.event == "bird:error")
    }

    @Test("client events over the rate limit close the sender with 4301")
    func clientEventRateLimit() {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        fixture.subscribe(idA, "private-c", auth: fixture.signer.authorizeSubscription(socketID: idA, channel: "private-c"))
        for _ in 0..<11 { fixture.hub.receive(text: #"{"event":"client-x","channel":"private-c","data":"{}"}"#, from: idA) }
        #expect(a.closeCode == 4301)
    }

    @Test("signin binds a user id; the terminate-user API closes all its connections with 4009")
    func signinAndTerminateUser() {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let (b, idB) = fixture.connect()
        let user = #"{"id":"u1"}"#
        for id in [idA, idB] {
            fixture.send(id, "bird:signin", SigninRequest(auth: fixture.signer.authorizeSignin(socketID: id, userData: user), userData: user))
        }
        #expect(a.last?.event == "bird:signin_success")
        #expect(fixture.hub.terminateUser(appID: "1", userID: "u1") == 2)
        #expect(a.closeCode == 4009)
        #expect(b.closeCode == 4009)
    }

    @Test("huge numeric ids in presence data and signin are text, never a crash")
    func hugeNumericIDs() throws {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let data = #"{"user_id":1e300}"#
        fixture.subscribe(idA, "presence-big", auth: fixture.signer.authorizeSubscription(socketID: idA, channel: "presence-big", channelData: data), channelData: data)
        let presence = try #require(a.last).decodeData(PresenceSubscriptionData.self).presence
        #expect(presence.ids == ["1e+300"])
        let user = #"{"id":1e300}"#
        fixture.send(idA, "bird:signin", SigninRequest(auth: fixture.signer.authorizeSignin(socketID: idA, userData: user), userData: user))
        #expect(a.last?.event == "bird:signin_success")
        #expect(PresenceMember.idText(42) == "42")
        #expect(PresenceMember.idText(-0.0) == "0")
        #expect(PresenceMember.idText(.infinity) == "inf")
    }

    @Test("a connection holds at most 1000 channels")
    func channelCap() {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        for index in 0..<1001 { fixture.subscribe(idA, "c\(index)") }
        #expect(a.events("bird_internal:subscription_succeeded").count == 1000)
        #expect(a.last?.event == "bird:subscription_error")
    }

    @Test("a forged signin is refused with an error")
    func forgedSignin() {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        fixture.send(idA, "bird:signin", SigninRequest(auth: "app-key:00", userData: #"{"id":"u1"}"#))
        #expect(a.last?.event == "bird:error")
        #expect(fixture.hub.terminateUser(appID: "1", userID: "u1") == 0)
    }
}
