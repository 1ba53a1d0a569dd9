import Foundation
import RealtimeProtocol
import RealtimeServer
import Testing

/// Issue 6's security rules on the hub: what a client may not do to others.
@Suite struct RealtimeHubSecurityTests {
    /// Subscriptions a client may try without a valid authorisation for its own socket id.
    enum Forgery: String, CaseIterable, CustomTestStringConvertible {
        case privateUnsigned, privateWrongSecret, privateOtherKey, privateOtherChannel, privateTruncated, privateKeyOnly
        case encryptedUnsigned, encryptedOtherChannel
        case presenceUnsigned, presenceSignedWithoutChannelData, presenceChannelDataDropped, presenceNotJSON, presenceNoUserID

        var testDescription: String { rawValue }

        func request(socketID: String, signer: ChannelAuthorization) -> SubscribeRequest {
            let member = #"{"user_id":"ana"}"#
            switch self {
            case .privateUnsigned:
                return SubscribeRequest(channel: "private-a")
            case .privateWrongSecret:
                return SubscribeRequest(channel: "private-a", auth: ChannelAuthorization(key: signer.key, secret: "guessed").authorizeSubscription(socketID: socketID, channel: "private-a"))
            case .privateOtherKey:
                let other = ChannelAuthorization(key: "other-key", secret: signer.secret).authorizeSubscription(socketID: socketID, channel: "private-a")
                return SubscribeRequest(channel: "private-a", auth: other)
            case .privateOtherChannel:
                return SubscribeRequest(channel: "private-a", auth: signer.authorizeSubscription(socketID: socketID, channel: "private-b"))
            case .privateTruncated:
                return SubscribeRequest(channel: "private-a", auth: String(signer.authorizeSubscription(socketID: socketID, channel: "private-a").dropLast(2)))
            case .privateKeyOnly:
                return SubscribeRequest(channel: "private-a", auth: signer.key + ":")
            case .encryptedUnsigned:
                return SubscribeRequest(channel: "private-encrypted-a")
            case .encryptedOtherChannel:
                return SubscribeRequest(channel: "private-encrypted-a", auth: signer.authorizeSubscription(socketID: socketID, channel: "private-a"))
            case .presenceUnsigned:
                return SubscribeRequest(channel: "presence-a", channelData: member)
            case .presenceSignedWithoutChannelData:
                // A private-style signature (no channel data) for a presence name.
                return SubscribeRequest(channel: "presence-a", auth: signer.authorizeSubscription(socketID: socketID, channel: "presence-a"))
            case .presenceChannelDataDropped:
                return SubscribeRequest(channel: "presence-a", auth: signer.authorizeSubscription(socketID: socketID, channel: "presence-a", channelData: member))
            case .presenceNotJSON:
                return SubscribeRequest(channel: "presence-a", auth: signer.authorizeSubscription(socketID: socketID, channel: "presence-a", channelData: "ana"), channelData: "ana")
            case .presenceNoUserID:
                let data = #"{"user_info":{"name":"Ana"}}"#
                return SubscribeRequest(channel: "presence-a", auth: signer.authorizeSubscription(socketID: socketID, channel: "presence-a", channelData: data), channelData: data)
            }
        }
    }

    @Test("unsigned and forged subscriptions are refused on the channel; nobody hears of them", arguments: Forgery.allCases)
    func forgedSubscriptions(forgery: Forgery) throws {
        let fixture = HubFixture()
        let (member, memberID) = fixture.connect()
        let data = #"{"user_id":"bo"}"#
        fixture.subscribe(memberID, "presence-a", auth: fixture.signer.authorizeSubscription(socketID: memberID, channel: "presence-a", channelData: data), channelData: data)
        let (output, id) = fixture.connect()
        let occupied = fixture.hub.channels(appID: "1")
        let request = forgery.request(socketID: id, signer: fixture.signer)
        fixture.send(id, "bird:subscribe", request)
        let refusal = try #require(output.last)
        #expect(refusal.event == "bird:subscription_error")
        #expect(refusal.channel == request.channel)
        #expect(try refusal.decodeData(ErrorPayload.self).code == 4009)
        #expect(output.closeCode == nil, "a refused subscription is a channel error, the connection stays")
        #expect(fixture.hub.channels(appID: "1") == occupied)
        #expect(fixture.hub.presenceMembers(appID: "1", channel: "presence-a") == ["bo"])
        #expect(member.events("bird_internal:member_added").isEmpty)
        fixture.hub.publish(appID: "1", channels: [request.channel], event: "secret", data: "{}")
        #expect(output.events("secret").isEmpty)
    }

    @Test("the answers AuthorizationSigner makes are accepted: private, presence, encrypted")
    func signerAnswersAccepted() throws {
        let fixture = HubFixture()
        let signer = try AuthorizationSigner(key: HubFixture.app.key, secret: HubFixture.app.secret, encryptionMasterKey: [UInt8](repeating: 7, count: 32))
        let (output, id) = fixture.connect()
        for (channel, member) in [("private-a", nil), ("presence-a", PresenceMember(userID: "ana", userInfo: .object(["name": .string("Ana")]))), ("private-encrypted-a", nil)] {
            let answer = try signer.authorizeChannel(socketID: id, channel: channel, member: member)
            fixture.subscribe(id, channel, auth: answer.auth, channelData: answer.channelData)
            #expect(output.last?.event == "bird_internal:subscription_succeeded", "\(channel)")
        }
        #expect(fixture.hub.presenceMembers(appID: "1", channel: "presence-a") == ["ana"])
        let user = try signer.authenticateUser(socketID: id, userData: #"{"id":"ana"}"#)
        fixture.send(id, "bird:signin", SigninRequest(auth: user.auth, userData: user.userData))
        #expect(output.last?.event == "bird:signin_success")
    }

    @Test("client events only from subscribed members: a stranger to the channel gets an error and nothing is relayed")
    func clientEventsNeedSubscription() throws {
        let fixture = HubFixture()
        let (member, memberID) = fixture.connect()
        let (stranger, strangerID) = fixture.connect()
        fixture.subscribe(memberID, "private-c", auth: fixture.signer.authorizeSubscription(socketID: memberID, channel: "private-c"))
        fixture.subscribe(strangerID, "private-d", auth: fixture.signer.authorizeSubscription(socketID: strangerID, channel: "private-d"))
        fixture.hub.receive(text: #"{"event":"client-x","channel":"private-c","data":"{}"}"#, from: strangerID)
        fixture.hub.receive(text: #"{"event":"client-x","data":"{}"}"#, from: strangerID)
        #expect(stranger.events("bird:error").count == 2)
        #expect(member.events("client-x").isEmpty)
        #expect(stranger.closeCode == nil)
    }

    @Test("client events are refused on private-encrypted- channels (as Pusher does)")
    func noClientEventsOnEncryptedChannels() throws {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let (b, idB) = fixture.connect()
        for id in [idA, idB] {
            fixture.subscribe(id, "private-encrypted-c", auth: fixture.signer.authorizeSubscription(socketID: id, channel: "private-encrypted-c"))
        }
        fixture.hub.receive(text: #"{"event":"client-x","channel":"private-encrypted-c","data":"{\"nonce\":\"\",\"ciphertext\":\"\"}"}"#, from: idA)
        let error = try #require(a.last)
        #expect(error.event == "bird:error")
        #expect(try error.decodeData(ErrorPayload.self).code == 4301)
        #expect(b.events("client-x").isEmpty)
    }

    @Test("a client event's user_id is the server's: the sender's presence member, never what the client wrote")
    func clientEventUserID() throws {
        let fixture = HubFixture()
        let (_, idA) = fixture.connect()
        let (b, idB) = fixture.connect()
        for (id, user) in [(idA, "ana"), (idB, "bo")] {
            let data = #"{"user_id":"\#(user)"}"#
            fixture.subscribe(id, "presence-room", auth: fixture.signer.authorizeSubscription(socketID: id, channel: "presence-room", channelData: data), channelData: data)
            fixture.subscribe(id, "private-c", auth: fixture.signer.authorizeSubscription(socketID: id, channel: "private-c"))
        }
        fixture.hub.receive(text: #"{"event":"client-x","channel":"presence-room","data":"{}","user_id":"admin"}"#, from: idA)
        fixture.hub.receive(text: #"{"event":"client-x","channel":"private-c","data":"{}","user_id":"admin"}"#, from: idA)
        let relayed = b.events("client-x")
        #expect(relayed.map(\.channel) == ["presence-room", "private-c"])
        #expect(relayed.map(\.userID) == ["ana", nil])
    }

    @Test("a client cannot send protocol (system) events or app events to others: an error to the sender, nothing relayed", arguments: [
        "bird:member_added", "bird_internal:member_added", "bird:member_removed", "bird_internal:member_removed",
        "bird:signin_success", "bird:subscription_succeeded", "bird_internal:subscription_succeeded", "bird:subscription_error",
        "bird:connection_established", "bird:error", "bird:ping_internal", "pusher:member_added", "pusher_internal:member_removed",
        "pusher:signin_success", "pusher:connection_established", "pusher_internal:subscription_succeeded",
        "update", "other:ping", "client", "clientx", "Client-x", "bird_internal:signin",
    ])
    func systemEvents(event: String) throws {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let (b, idB) = fixture.connect()
        for (id, user) in [(idA, "ana"), (idB, "bo")] {
            let data = #"{"user_id":"\#(user)"}"#
            fixture.subscribe(id, "presence-room", auth: fixture.signer.authorizeSubscription(socketID: id, channel: "presence-room", channelData: data), channelData: data)
        }
        let before = b.frames.count
        let frame = try RealtimeMessage(event: event, channel: "presence-room", payload: PresenceMember(userID: "mallory")).text
        fixture.hub.receive(text: frame, from: idA)
        #expect(a.last?.event == "bird:error")
        #expect(b.frames.count == before, "nothing reaches the other member")
        #expect(fixture.hub.presenceMembers(appID: "1", channel: "presence-room") == ["ana", "bo"])
        #expect(a.closeCode == nil && b.closeCode == nil)
    }

    @Test("the client-event rate limit is per second: 10 every second for a minute passes, all relayed")
    func clientEventRateWindow() {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let (b, idB) = fixture.connect()
        for id in [idA, idB] {
            fixture.subscribe(id, "private-c", auth: fixture.signer.authorizeSubscription(socketID: id, channel: "private-c"))
        }
        for _ in 0..<60 {
            for _ in 0..<10 { fixture.hub.receive(text: #"{"event":"client-x","channel":"private-c","data":"{}"}"#, from: idA) }
            fixture.advance(.seconds(1))
        }
        #expect(a.closeCode == nil)
        #expect(b.events("client-x").count == 600)
    }

    @Test("terminating a user closes every connection signed in as that user with 4009, and only those")
    func terminateUser() throws {
        let fixture = HubFixture { $0.apps[0].maxConnections = 10 }
        let (watcher, watcherID) = fixture.connect()
        var connections: [(RecordingOutput, String, String?)] = [(watcher, watcherID, "u2")]
        for user in ["u1", "u1", "u1", nil] as [String?] {
            let (output, id) = fixture.connect()
            connections.append((output, id, user))
        }
        for (_, id, user) in connections {
            if let user {
                let userData = #"{"id":"\#(user)"}"#
                fixture.send(id, "bird:signin", SigninRequest(auth: fixture.signer.authorizeSignin(socketID: id, userData: userData), userData: userData))
            }
            let data = #"{"user_id":"\#(user ?? "guest")"}"#
            fixture.subscribe(id, "presence-room", auth: fixture.signer.authorizeSubscription(socketID: id, channel: "presence-room", channelData: data), channelData: data)
        }
        #expect(fixture.hub.terminateUser(appID: "2", userID: "u1") == 0)
        #expect(fixture.hub.terminateUser(appID: "1", userID: "u1") == 3)
        for (output, _, user) in connections {
            #expect(output.closeCode == (user == "u1" ? 4009 : nil))
        }
        #expect(fixture.hub.connectionCount == 2)
        #expect(fixture.hub.presenceMembers(appID: "1", channel: "presence-room") == ["guest", "u2"])
        #expect(try watcher.events("bird_internal:member_removed").map { try $0.decodeData(PresenceMember.self).userID } == ["u1"])
    }
}
