import Foundation
import SystemSupport
import Realtime
import RealtimeProtocol
import ReconnectTesting
import Testing
import RealtimeTesting

/// An authoriser that records every request and answers when the test says so.
final class ScriptedAuthorizer: Sendable {
    enum Answer: Sendable {
        case grant
        case refuse(AuthorizationError)
        /// Hold the answer until `release(_:)`.
        case hold
    }

    private struct Pending {
        var request: ChannelAuthorizationRequest
        var continuation: CheckedContinuation<ChannelAuthorizationResponse, any Error>?
    }

    let signer = ChannelAuthorization(key: "test-key", secret: "test-secret")
    let key = [UInt8](repeating: 7, count: 32)
    private let state = Locked<(answer: Answer, requests: [Pending])>((.grant, []))

    var answer: Answer {
        get { state.withLock { $0.answer } }
        set { state.withLock { $0.answer = newValue } }
    }

    var requests: [ChannelAuthorizationRequest] { state.withLock { $0.requests.map(\.request) } }

    func response(for request: ChannelAuthorizationRequest) -> ChannelAuthorizationResponse {
        switch RealtimeChannel.Kind(channelName: request.channelName) {
        case .presence:
            let data = #"{"user_id":"me","user_info":{"name":"Me"}}"#
            return ChannelAuthorizationResponse(auth: signer.authorizeSubscription(socketID: request.socketID, channel: request.channelName, channelData: data), channelData: data)
        case .encrypted:
            return ChannelAuthorizationResponse(auth: signer.authorizeSubscription(socketID: request.socketID, channel: request.channelName),
                                                sharedSecret: Data(key).base64EncodedString())
        default:
            return ChannelAuthorizationResponse(auth: signer.authorizeSubscription(socketID: request.socketID, channel: request.channelName))
        }
    }

    var closure: ChannelAuthorizer {
        { request in
            try await withCheckedThrowingContinuation { continuation in
                let answer = self.state.withLock { state -> Answer in
                    let held: CheckedContinuation<ChannelAuthorizationResponse, any Error>?
                    if case .hold = state.answer { held = continuation } else { held = nil }
                    state.requests.append(Pending(request: request, continuation: held))
                    return state.answer
                }
                switch answer {
                case .grant: continuation.resume(returning: self.response(for: request))
                case .refuse(let error): continuation.resume(throwing: error)
                case .hold: break
                }
            }
        }
    }

    /// Answers held request `index` with a grant.
    func release(_ index: Int) {
        let (continuation, request) = state.withLock { state in
            defer { state.requests[index].continuation = nil }
            return (state.requests[index].continuation, state.requests[index].request)
        }
        continuation?.resume(returning: response(for: request))
    }
}

extension ClientFixture {
    /// Subscribe frames of the latest socket with their auth.
    func subscribeRequests(on socket: InMemorySocket? = nil) -> [SubscribeRequest] {
        (socket ?? self.socket).sentMessages.filter { $0.event == "bird:subscribe" }.compactMap { try? $0.decodeData(SubscribeRequest.self) }
    }
}

@Suite struct AuthorizationTests {
    @Test("a private channel is authorised with the connection id, and again with every new id")
    func reauthorizedPerConnection() async {
        let authorizer = ScriptedAuthorizer()
        let fixture = ClientFixture { $0.authorizer = authorizer.closure }
        _ = fixture.bird.subscribe("private-orders")
        fixture.connected("1.1")
        await eventually("the subscribe") { fixture.subscribeRequests().count == 1 }
        #expect(authorizer.requests == [ChannelAuthorizationRequest(socketID: "1.1", channelName: "private-orders")])
        #expect(fixture.subscribeRequests().first?.auth == authorizer.signer.authorizeSubscription(socketID: "1.1", channel: "private-orders"))
        fixture.socket.drop()
        fixture.advanceToNextTimer()
        fixture.handshake("2.2")
        await eventually("the second subscribe") { fixture.subscribeRequests().count == 1 }
        #expect(authorizer.requests.map(\.socketID) == ["1.1", "2.2"])
        #expect(fixture.subscribeRequests().first?.auth == authorizer.signer.authorizeSubscription(socketID: "2.2", channel: "private-orders"))
    }

    @Test("an answer delayed past a drop is discarded; the new connection's own request is used")
    func staleAnswerDiscarded() async {
        let authorizer = ScriptedAuthorizer()
        authorizer.answer = .hold
        let fixture = ClientFixture { $0.authorizer = authorizer.closure }
        _ = fixture.bird.subscribe("private-orders")
        fixture.connected("1.1")
        await eventually("the first request") { authorizer.requests.count == 1 }
        let first = fixture.socket
        first.drop()
        fixture.advanceToNextTimer()
        fixture.handshake("2.2")
        await eventually("the second request") { authorizer.requests.count == 2 }
        authorizer.release(0)  // the answer signed for 1.1 arrives late
        try? await Task.sleep(for: .milliseconds(50))
        #expect(fixture.subscribeRequests().isEmpty, "nothing sent with the old id's signature")
        #expect(first.sentMessages.filter { $0.event == "bird:subscribe" }.isEmpty)
        authorizer.release(1)
        await eventually("the subscribe") { fixture.subscribeRequests().count == 1 }
        #expect(fixture.subscribeRequests().first?.auth == authorizer.signer.authorizeSubscription(socketID: "2.2", channel: "private-orders"))
    }

    @Test("an authoriser refusal arrives on the channel as subscription_error; the connection stays up")
    func refusal() async {
        let authorizer = ScriptedAuthorizer()
        authorizer.answer = .refuse(.httpStatus(403, body: "forbidden"))
        let fixture = ClientFixture { $0.authorizer = authorizer.closure }
        let deliveries = Deliveries()
        fixture.bird.subscribe("private-orders").bindAll { deliveries.record($0) }
        fixture.connected()
        await eventually("the channel error") { fixture.drain(); return !deliveries.all.isEmpty }
        let event = deliveries.all.first
        #expect(event?.event == "bird:subscription_error")
        #expect(event?.data?.contains(#""status":403"#) == true)
        #expect(fixture.state == .connected)
        #expect(fixture.errors.isEmpty, "a channel error is not a connection error")
        #expect(fixture.subscribeRequests().isEmpty)
    }

    @Test("an authoriser that never answers times out (manual clock); its late answer is ignored")
    func timeout() async {
        let authorizer = ScriptedAuthorizer()
        authorizer.answer = .hold
        let fixture = ClientFixture {
            $0.authorizer = authorizer.closure
            $0.authTimeout = .seconds(3)
        }
        let deliveries = Deliveries()
        fixture.bird.subscribe("private-orders").bindAll { deliveries.record($0) }
        fixture.connected()
        await eventually("the request") { authorizer.requests.count == 1 }
        fixture.clock.advance(by: .seconds(3))
        fixture.drain()
        #expect(deliveries.all.map(\.event) == ["bird:subscription_error"])
        #expect(deliveries.all.first?.data?.contains("within") == true)
        authorizer.release(0)
        try? await Task.sleep(for: .milliseconds(50))
        #expect(fixture.subscribeRequests().isEmpty)
        #expect(fixture.state == .connected)
    }

    @Test("without an auth endpoint or authoriser a private channel gets a channel error, not a crash")
    func notConfigured() async {
        let fixture = ClientFixture()
        let deliveries = Deliveries()
        fixture.bird.subscribe("private-orders").bindAll { deliveries.record($0) }
        fixture.connected()
        await eventually("the channel error") { fixture.drain(); return !deliveries.all.isEmpty }
        #expect(deliveries.all.first?.event == "bird:subscription_error")
        #expect(fixture.state == .connected)
    }

    @Test("presence: members from the server, added and removed once each, replaced after a reconnect")
    func presence() async {
        let authorizer = ScriptedAuthorizer()
        let fixture = ClientFixture { $0.authorizer = authorizer.closure }
        let deliveries = Deliveries()
        let room = fixture.bird.subscribe("presence-room")
        room.bindAll { deliveries.record($0) }
        fixture.connected("1.1")
        await eventually("the subscribe") { fixture.subscribeRequests().count == 1 }
        #expect(fixture.subscribeRequests().first?.channelData == #"{"user_id":"me","user_info":{"name":"Me"}}"#)
        func succeeded(_ ids: [String]) {
            let data = PresenceSubscriptionData(presence: .init(ids: ids, hash: Dictionary(uniqueKeysWithValues: ids.map { ($0, JSONValue.null) }), count: ids.count))
            fixture.socket.receive(try! RealtimeMessage(event: "bird_internal:subscription_succeeded", channel: "presence-room", payload: data))
        }
        func member(_ event: String, _ id: String) {
            fixture.socket.receive(try! RealtimeMessage(event: "bird_internal:\(event)", channel: "presence-room", payload: PresenceMember(userID: id)))
        }
        succeeded(["me", "ann", "bob"])
        member("member_added", "cid")
        member("member_added", "cid")      // a repeat lists nobody twice
        member("member_removed", "ann")
        member("member_removed", "zed")    // unknown: nothing happens
        fixture.drain()
        #expect(room.members.map(\.userID) == ["me", "bob", "cid"])
        #expect(room.me?.userID == "me")
        #expect(deliveries.all.map(\.event) == ["bird:subscription_succeeded", "bird:member_added", "bird:member_removed"])
        // Bob leaves while we are away; the new subscription's list is the truth.
        fixture.socket.drop()
        #expect(room.members.isEmpty)
        fixture.advanceToNextTimer()
        fixture.handshake("2.2")
        await eventually("the resubscribe") { fixture.subscribeRequests().count == 1 }
        succeeded(["me", "cid", "dan"])
        fixture.drain()
        #expect(room.members.map(\.userID) == ["me", "cid", "dan"])
    }

    @Test("trigger: false and nothing on the wire unless a subscribed private/presence channel and a client- name")
    func trigger() async {
        let authorizer = ScriptedAuthorizer()
        let fixture = ClientFixture { $0.authorizer = authorizer.closure }
        let chat = fixture.bird.subscribe("private-chat")
        let news = fixture.bird.subscribe("news")
        #expect(!chat.trigger("client-typing", data: "{}"), "not connected")
        fixture.connected()
        await eventually("the subscribe") { fixture.subscribeRequests().count == 2 }
        #expect(!chat.trigger("client-typing", data: "{}"), "not yet subscribed")
        fixture.confirm("private-chat")
        fixture.confirm("news")
        #expect(!chat.trigger("typing", data: "{}"), "not a client- name")
        #expect(!news.trigger("client-typing", data: "{}"), "public channel")
        let sentBefore = fixture.socket.sent.count
        #expect(chat.trigger("client-typing", data: #"{"on":true}"#))
        #expect(fixture.socket.sent.count == sentBefore + 1)
        #expect(fixture.socket.sentMessages.last == RealtimeMessage(event: "client-typing", channel: "private-chat", data: #"{"on":true}"#))
        // Reconnecting: false, nothing sent.
        fixture.socket.drop()
        #expect(!chat.trigger("client-typing", data: "{}"))
        fixture.advanceToNextTimer()
        fixture.handshake("2.2")
        #expect(!chat.trigger("client-typing", data: "{}"), "resubscription not confirmed yet")
        #expect(fixture.socket.sentMessages.filter { $0.event.hasPrefix("client-") }.isEmpty)
    }

    @Test("encrypted channel: events opened with the shared secret before handlers; a tampered one is an error, never delivered")
    func encrypted() async throws {
        let authorizer = ScriptedAuthorizer()
        let fixture = ClientFixture { $0.authorizer = authorizer.closure }
        let deliveries = Deliveries()
        let vault = fixture.bird.subscribe("private-encrypted-vault")
        vault.bind("secret") { deliveries.record($0) }
        fixture.connected()
        await eventually("the subscribe") { fixture.subscribeRequests().count == 1 }
        fixture.confirm("private-encrypted-vault")
        #expect(!vault.trigger("client-x", data: "{}"), "no client events on encrypted channels")
        let sealed = try SecretBox.seal(Array(#"{"code":42}"#.utf8), key: authorizer.key)
        fixture.publish("secret", on: "private-encrypted-vault", data: try RealtimeMessage.jsonText(sealed))
        var tampered = Array(Data(base64Encoded: sealed.ciphertext)!)
        tampered[tampered.count - 1] ^= 1
        let forged = EncryptedPayload(nonce: sealed.nonce, ciphertext: Data(tampered).base64EncodedString())
        fixture.publish("secret", on: "private-encrypted-vault", data: try RealtimeMessage.jsonText(forged))
        fixture.publish("secret", on: "private-encrypted-vault", data: #"{"plain":"text"}"#)
        fixture.publish("bird:custom", on: "private-encrypted-vault", data: #"{"plain":"text"}"#)
        let notUTF8 = try SecretBox.seal([0xFF, 0xFE], key: authorizer.key)
        fixture.publish("secret", on: "private-encrypted-vault", data: try RealtimeMessage.jsonText(notUTF8))
        fixture.drain()
        #expect(deliveries.all.map(\.data) == [#"{"code":42}"#])
        #expect(fixture.errors.map(\.kind) == [.decryption, .decryption, .decryption, .decryption])
        #expect(fixture.state == .connected)
    }
}

/// A user authenticator that answers from a script.
final class ScriptedAuthenticator: Sendable {
    let signer = ChannelAuthorization(key: "test-key", secret: "test-secret")
    private let state = Locked<(fail: Bool, requests: [String])>((false, []))
    var fail: Bool {
        get { state.withLock { $0.fail } }
        set { state.withLock { $0.fail = newValue } }
    }
    var requests: [String] { state.withLock { $0.requests } }
    var closure: UserAuthenticator {
        { socketID in
            let fail = self.state.withLock { state in
                state.requests.append(socketID)
                return state.fail
            }
            if fail { throw AuthorizationError.httpStatus(401, body: "signed out") }
            let userData = #"{"id":"u1"}"#
            return UserAuthenticationResponse(auth: self.signer.authorizeSignin(socketID: socketID, userData: userData), userData: userData)
        }
    }
}

@Suite struct SigninTests {
    @Test("a signin the server never answers is reported after authTimeout")
    func unanswered() async {
        let authenticator = ScriptedAuthenticator()
        let fixture = ClientFixture {
            $0.userAuthenticator = authenticator.closure
            $0.authTimeout = .seconds(4)
        }
        let failures = Locked<[AuthorizationError]>([])
        fixture.bird.onSigninError { error in failures.withLock { $0.append(error) } }
        fixture.bird.signin()
        fixture.connected()
        await eventually("the signin frame") { fixture.socket.sentMessages.contains { $0.event == "bird:signin" } }
        fixture.clock.advance(by: .seconds(4))
        fixture.drain()
        #expect(failures.withLock { $0 } == [.timedOut(.seconds(4))])
    }

    @Test("signin on every new connection; a later failure goes to onSigninError; a server refusal too")
    func signinEveryConnection() async {
        let authenticator = ScriptedAuthenticator()
        let fixture = ClientFixture { $0.userAuthenticator = authenticator.closure }
        let failures = Locked<[AuthorizationError]>([])
        fixture.bird.onSigninError { error in failures.withLock { $0.append(error) } }
        fixture.bird.signin()
        fixture.connected("1.1")
        await eventually("the signin frame") { fixture.socket.sentMessages.contains { $0.event == "bird:signin" } }
        let request = fixture.socket.sentMessages.first { $0.event == "bird:signin" }.flatMap { try? $0.decodeData(SigninRequest.self) }
        #expect(request == SigninRequest(auth: authenticator.signer.authorizeSignin(socketID: "1.1", userData: #"{"id":"u1"}"#), userData: #"{"id":"u1"}"#))
        fixture.socket.receive(RealtimeMessage(event: "bird:signin_success", data: #"{"user_data":"{\"id\":\"u1\"}"}"#))
        #expect(fixture.bird.connection.signedInUserData == #"{"id":"u1"}"#)

        // The next connection signs in again; this time the backend refuses.
        authenticator.fail = true
        fixture.socket.drop()
        #expect(fixture.bird.connection.signedInUserData == nil)
        fixture.advanceToNextTimer()
        fixture.handshake("2.2")
        await eventually("the signin error") { fixture.drain(); return !failures.withLock { $0 }.isEmpty }
        #expect(authenticator.requests == ["1.1", "2.2"])
        #expect(failures.withLock { $0 } == [.httpStatus(401, body: "signed out")])
        #expect(fixture.state == .connected)

        // A third connection: the server refuses the signature.
        authenticator.fail = false
        fixture.socket.drop()
        fixture.advanceToNextTimer()
        fixture.handshake("3.3")
        await eventually("the signin frame") { fixture.socket.sentMessages.contains { $0.event == "bird:signin" } }
        fixture.socket.receive(RealtimeMessage(event: "bird:error", data: #"{"code":4301,"message":"unrelated"}"#))
        fixture.socket.receive(RealtimeMessage(event: "bird:error", data: #"{"code":4009,"message":"invalid signin"}"#))
        fixture.drain()
        #expect(fixture.errors.last == RealtimeError(kind: .server, code: 4301, message: "unrelated"), "an unrelated error stays the connection's")
        #expect(failures.withLock { $0 }.last == .refusedByServer(code: 4009, message: "invalid signin"))
        #expect(fixture.errors.filter { $0.kind != .transport }.count == 1, "signin failures are not connection errors (the drops and the unrelated error are)")
    }
}
