import RealtimeProtocol
import RealtimeServer
import Testing

/// What one peer can make the server spend: every frame parsed in one linear pass (a `data`
/// of thousands of keys is never built), a read budget per connection (frames and bytes per
/// second), protocol events' data capped before it is decoded, and every refused request
/// (bad frames, refused subscriptions, failed signins) counted toward the error limit.
@Suite struct InboundBudgetTests {
    /// A `data` object of `keys` members, about 11 bytes each.
    static func manyKeys(_ keys: Int) -> String {
        "{" + (0..<keys).map { #""k\#($0)":\#($0)"# }.joined(separator: ",") + "}"
    }

    @Test("5,000 keys beside a ping are scanned and skipped (the ping is answered); as the ping's data they are refused by size before any decoding")
    func manyKeysPing() throws {
        let fixture = HubFixture()
        let (output, id) = fixture.connect()
        fixture.hub.receive(text: #"{"event":"bird:ping","pad":\#(Self.manyKeys(5_000))}"#, from: id)
        #expect(output.last?.event == "bird:pong")
        fixture.hub.receive(text: #"{"event":"bird:ping","data":\#(Self.manyKeys(5_000))}"#, from: id)
        let error = try #require(output.last)
        #expect(error.event == "bird:error")
        #expect(try error.decodeData(ErrorPayload.self).message == "bird:ping data over 8192 bytes")
        #expect(output.closeCode == nil)
    }

    @Test("more than inboundMessagesPerSecond frames in a second close with 4301; the next second starts anew")
    func frameBudget() {
        let fixture = HubFixture { $0.inboundMessagesPerSecond = 20 }
        let (steady, steadyID) = fixture.connect()
        for _ in 0..<3 {
            for _ in 0..<20 { fixture.hub.receive(text: #"{"event":"bird:ping"}"#, from: steadyID) }
            fixture.advance(.seconds(1))
        }
        #expect(steady.events("bird:pong").count == 60)
        #expect(steady.closeCode == nil)

        let (flood, floodID) = fixture.connect()
        for _ in 0..<21 { fixture.hub.receive(text: #"{"event":"bird:ping"}"#, from: floodID) }
        #expect(flood.closeCode == 4301)
        #expect(flood.events("bird:pong").count == 20)
    }

    @Test("more than inboundBytesPerSecond bytes in a second close with 4301")
    func byteBudget() {
        let fixture = HubFixture { $0.inboundBytesPerSecond = 100_000 }
        let (output, id) = fixture.connect()
        let frame = #"{"event":"bird:ping","pad":\#(Self.manyKeys(3_000))}"#
        #expect(frame.utf8.count > 30_000 && frame.utf8.count < 50_000)
        for _ in 0..<3 { fixture.hub.receive(text: frame, from: id) }
        #expect(output.events("bird:pong").count == 2)
        #expect(output.closeCode == 4301)
    }

    @Test("a subscribe (or signin) with data over 8 KiB is refused before it is decoded, and counts as an error")
    func protocolDataCap() throws {
        let fixture = HubFixture()
        let (output, id) = fixture.connect()
        let padding = String(repeating: "x", count: 9_000)
        fixture.hub.receive(text: #"{"event":"bird:subscribe","data":{"channel":"news","pad":"\#(padding)"}}"#, from: id)
        let error = try #require(output.last)
        #expect(error.event == "bird:error")
        #expect(try error.decodeData(ErrorPayload.self).message.contains("data over 8192 bytes"))
        #expect(fixture.hub.channels(appID: "1")["news"] == nil)
        fixture.hub.receive(text: #"{"event":"bird:signin","data":{"auth":"x","user_data":"\#(padding)"}}"#, from: id)
        #expect(output.events("bird:error").count == 2)
    }

    @Test("refused subscriptions and failed signins count toward the error limit: the eleventh closes with 4300")
    func refusalsCount() {
        let fixture = HubFixture()
        let (subscriber, subscriberID) = fixture.connect()
        for index in 0..<11 { fixture.subscribe(subscriberID, "private-\(index)", auth: "app-key:forged") }
        #expect(subscriber.events("bird:subscription_error").count == 11)
        #expect(subscriber.closeCode == 4300)

        let (signer, signerID) = fixture.connect()
        for _ in 0..<11 { fixture.send(signerID, "bird:signin", SigninRequest(auth: "app-key:forged", userData: #"{"id":"u"}"#)) }
        #expect(signer.closeCode == 4300)
    }

    @Test("nesting deeper than 32 levels is a protocol error, never a crash", arguments: [33, 100_000])
    func deepNesting(levels: Int) {
        let fixture = HubFixture()
        let (output, id) = fixture.connect()
        fixture.hub.receive(text: #"{"event":"bird:ping","data":\#(String(repeating: "[", count: levels))\#(String(repeating: "]", count: levels))}"#, from: id)
        #expect(output.last?.event == "bird:error")
        #expect(output.events("bird:pong").isEmpty)
    }

    @Test("what a subscription makes the server write counts against the subscriber's byte budget: cycling through a full presence channel is cut off with 4301")
    func outputCharged() throws {
        let app = RealtimeApp(id: "1", key: "app-key", secret: "app-secret", maxConnections: 200, activityTimeout: 30)
        let fixture = HubFixture { $0.apps = [app] }
        func join(_ socketID: String, user: String) throws {
            let channelData = try RealtimeMessage.jsonText(PresenceMember(userID: user, userInfo: .string(String(repeating: "i", count: 1000))))
            fixture.subscribe(socketID, "presence-full", auth: fixture.signer.authorizeSubscription(socketID: socketID, channel: "presence-full", channelData: channelData), channelData: channelData)
        }
        for index in 0..<100 {
            let (_, id) = fixture.connect()
            try join(id, user: "member-\(index)")
        }
        #expect(fixture.hub.presenceMembers(appID: "1", channel: "presence-full").count == 100)
        // One more socket of a member's user: each subscribe is answered with the 100 KB list.
        let (cycler, cyclerID) = fixture.connect()
        var cycles = 0
        while cycler.closeCode == nil, cycles < 100 {
            try join(cyclerID, user: "member-0")
            fixture.send(cyclerID, "bird:unsubscribe", UnsubscribeRequest(channel: "presence-full"))
            cycles += 1
        }
        #expect(cycler.closeCode == 4301, "after \(cycles) cycles")
        #expect(cycles <= 11, "1 MiB a second is about ten such lists")
        #expect(fixture.hub.presenceMembers(appID: "1", channel: "presence-full").count == 100)
    }
}
