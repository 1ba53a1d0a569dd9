import RealtimeProtocol
import RealtimeServer
import Testing

/// Pusher's presence limits on the hub: at most `maxPresenceMembers` users per presence
/// channel (100 by default) and `user_info` of at most `maxPresenceUserInfoBytes` (1 KB), each
/// refused on the channel with code 4100 before anything is kept or told.
@Suite struct PresenceLimitTests {
    private static let app = RealtimeApp(id: "1", key: "app-key", secret: "app-secret", maxConnections: 10, activityTimeout: 30, maxPresenceMembers: 2)

    private func fixture() -> HubFixture {
        HubFixture { $0.apps = [Self.app] }
    }

    private func join(_ fixture: HubFixture, _ socketID: String, user: String, info: JSONValue? = nil, channel: String = "presence-team") throws {
        let channelData = try RealtimeMessage.jsonText(PresenceMember(userID: user, userInfo: info))
        fixture.subscribe(socketID, channel, auth: fixture.signer.authorizeSubscription(socketID: socketID, channel: channel, channelData: channelData), channelData: channelData)
    }

    @Test("the default limits are Pusher's: 100 members, 1,024 bytes of user_info")
    func defaults() {
        let app = RealtimeApp(id: "1", key: "k", secret: "s")
        #expect(app.maxPresenceMembers == 100)
        #expect(app.maxPresenceUserInfoBytes == 1024)
    }

    @Test("a full presence channel refuses a new user with 4100 and tells nobody; a known user's second socket and a user after a leave get in")
    func memberLimit() throws {
        let fixture = fixture()
        let (ana, anaID) = fixture.connect()
        let (_, boID) = fixture.connect()
        let (cy, cyID) = fixture.connect()
        let (anaPhone, anaPhoneID) = fixture.connect()
        try join(fixture, anaID, user: "ana")
        try join(fixture, boID, user: "bo")
        try join(fixture, cyID, user: "cy")

        let refusal = try #require(cy.last)
        #expect(refusal.event == "bird:subscription_error")
        #expect(refusal.channel == "presence-team")
        #expect(try refusal.decodeData(ErrorPayload.self).code == 4100)
        #expect(cy.closeCode == nil, "a refused subscription is a channel error, the connection stays")
        #expect(fixture.hub.presenceMembers(appID: "1", channel: "presence-team") == ["ana", "bo"])
        #expect(ana.events("bird_internal:member_added").map { try? $0.decodeData(PresenceMember.self).userID } == ["bo"])

        try join(fixture, anaPhoneID, user: "ana")
        #expect(anaPhone.last?.event == "bird_internal:subscription_succeeded")

        fixture.send(boID, "bird:unsubscribe", UnsubscribeRequest(channel: "presence-team"))
        try join(fixture, cyID, user: "cy")
        #expect(cy.last?.event == "bird_internal:subscription_succeeded")
        #expect(fixture.hub.presenceMembers(appID: "1", channel: "presence-team") == ["ana", "cy"])
    }

    @Test("user_info over the limit is refused with 4100 and never kept or told; at the limit it is accepted")
    func userInfoLimit() throws {
        let fixture = fixture()
        let (watcher, watcherID) = fixture.connect()
        let (big, bigID) = fixture.connect()
        try join(fixture, watcherID, user: "watcher")

        // {"name":"xxx…"} is 11 bytes of JSON around the name.
        try join(fixture, bigID, user: "big", info: .object(["name": .string(String(repeating: "x", count: 1024 - 11 + 1))]))
        #expect(big.last?.event == "bird:subscription_error")
        #expect(try big.last?.decodeData(ErrorPayload.self).code == 4100)
        #expect(fixture.hub.presenceMembers(appID: "1", channel: "presence-team") == ["watcher"])
        #expect(watcher.events("bird_internal:member_added").isEmpty)

        try join(fixture, bigID, user: "big", info: .object(["name": .string(String(repeating: "x", count: 1024 - 11))]))
        #expect(big.last?.event == "bird_internal:subscription_succeeded")
        #expect(fixture.hub.presenceMembers(appID: "1", channel: "presence-team") == ["big", "watcher"])
    }

    @Test("a channel_data far over the limit is refused by its size, before it is parsed or its signature checked")
    func channelDataSize() throws {
        let fixture = fixture()
        let (peer, peerID) = fixture.connect()
        // Over the presence limit, under the 8 KiB every protocol event's data is capped at.
        let huge = #"{"user_id":"u","user_info":{"k":""# + String(repeating: "a", count: 5_000) + #""}}"#
        fixture.subscribe(peerID, "presence-team", auth: "app-key:forged", channelData: huge)
        let refusal = try #require(peer.last)
        #expect(refusal.event == "bird:subscription_error")
        let error = try refusal.decodeData(ErrorPayload.self)
        #expect(error.code == 4100)
        #expect(error.message.contains("channel_data over 1280 bytes"))
    }
}
