import Foundation
@testable import Realtime
import RealtimeProtocol
import Testing

/// `ChannelsMachine` on its own, on plain values (issue 34, item 5): a channel's subscription on
/// each connection and the signin's steps, with the actions each transition asks for. The
/// connection's side is two calls: `connected(generation:socketID:now:ids:)` and `disconnected()`.
@Suite("The channels and signin machine, transition by transition")
struct ChannelsMachineTests {
    typealias Action = ConnectionStateMachine.Action

    static let start = ContinuousClock.now

    var machine = ChannelsMachine(configuration: ConnectionStateMachineTests.configuration)
    var ids = RequestIDs()

    static func frames(_ actions: [Action], _ event: String) -> [RealtimeMessage] {
        ConnectionStateMachineTests.sent(actions).compactMap { try? RealtimeMessage(parsing: $0) }.filter { $0.event == event }
    }

    /// The channels named in the data of the `event` frames sent (`{"channel": …}`).
    static func channels(_ actions: [Action], _ event: String) -> [String?] {
        frames(actions, event).map { (try? $0.decodeData([String: JSONValue].self))?["channel"]?.string }
    }

    static func authorizations(_ actions: [Action]) -> [(ChannelAuthorizationRequest, UInt64)] {
        actions.compactMap { if case .authorize(let request, let id) = $0 { (request, id) } else { nil } }
    }

    static func message(_ event: String, channel: String? = nil, data: String) -> RealtimeMessage {
        RealtimeMessage(event: event, channel: channel, data: data)
    }

    @Test("subscribe with no connection: listed, nothing sent; the handshake subscribes a public channel at once and asks for a private one's authorisation for its socket id")
    mutating func subscribeBeforeConnecting() {
        #expect(machine.subscribe("news", now: Self.start, ids: &ids).isEmpty)
        #expect(machine.subscribe("private-a", now: Self.start, ids: &ids).isEmpty)
        #expect(machine.order == ["news", "private-a"] && machine.session == nil)
        let actions = machine.connected(generation: 1, socketID: "1.1", now: Self.start, ids: &ids)
        #expect(Self.channels(actions, "bird:subscribe") == ["news"])
        let asked = Self.authorizations(actions)
        #expect(asked.map(\.0) == [ChannelAuthorizationRequest(socketID: "1.1", channelName: "private-a")])
        #expect(machine.session?.authorizations == ["private-a": asked[0].1])
        #expect(machine["news"]?.requested == true && machine["private-a"]?.requested == false)
    }

    @Test("an authorisation answered: the subscription is sent with it; then subscription_succeeded subscribes; one answered for an older request is dropped")
    mutating func authorisationAnswered() {
        _ = machine.connected(generation: 1, socketID: "1.1", now: Self.start, ids: &ids)
        let asked = Self.authorizations(machine.subscribe("private-a", now: Self.start, ids: &ids))
        let request = asked[0].1
        #expect(machine.authorizationAnswered(channel: "private-a", request: request + 7, .success(ChannelAuthorizationResponse(auth: "k:s"))).isEmpty)
        let sent = machine.authorizationAnswered(channel: "private-a", request: request, .success(ChannelAuthorizationResponse(auth: "k:s")))
        #expect(Self.channels(sent, "bird:subscribe") == ["private-a"])
        #expect(machine.session?.authorizations.isEmpty == true && machine["private-a"]?.requested == true)
        _ = machine.subscriptionSucceeded(Self.message("bird:subscription_succeeded", channel: "private-a", data: "{}"))
        #expect(machine["private-a"]?.subscribed == true)
    }

    @Test("a refused authorisation: the channel stays unsubscribed and hears subscription_error with the status")
    mutating func authorisationRefused() {
        _ = machine.connected(generation: 1, socketID: "1.1", now: Self.start, ids: &ids)
        let request = Self.authorizations(machine.subscribe("private-a", now: Self.start, ids: &ids))[0].1
        let refused = machine.authorizationAnswered(channel: "private-a", request: request, .failure(.httpStatus(403, body: "no")))
        let delivered = refused.compactMap { if case .deliver(let event) = $0 { event } else { nil } }
        #expect(delivered.map(\.event) == ["bird:subscription_error"] && delivered.first?.data?.contains("403") == true)
        #expect(machine["private-a"]?.subscribed == false)
    }

    @Test("the connection ends: its authorisations and signin cancelled, nothing subscribed, no one signed in; the next handshake authorises for the new id")
    mutating func connectionEnds() {
        _ = machine.subscribe("presence-room", now: Self.start, ids: &ids)
        _ = machine.signin(now: Self.start, ids: &ids)
        let first = machine.connected(generation: 1, socketID: "1.1", now: Self.start, ids: &ids)
        let channelRequest = Self.authorizations(first)[0].1
        let signinRequest = first.compactMap { if case .authenticate(_, let id) = $0 { id } else { nil } }[0]
        let ended = machine.disconnected()
        #expect(ended.contains { if case .cancelRequest(channelRequest) = $0 { true } else { false } })
        #expect(ended.contains { if case .cancelRequest(signinRequest) = $0 { true } else { false } })
        #expect(machine.session == nil && machine["presence-room"]?.subscribed == false && machine.signedInUserData == nil)
        let second = machine.connected(generation: 2, socketID: "2.2", now: Self.start + .seconds(1), ids: &ids)
        #expect(Self.authorizations(second).map(\.0.socketID) == ["2.2"])
        #expect(second.contains { if case .authenticate("2.2", _) = $0 { true } else { false } }, "signin() holds for every connection")
    }

    @Test("signin: authenticating → awaiting the server → signed in; a 4009 error answers it as refused; its deadline reports a timeout")
    mutating func signinSteps() {
        _ = machine.connected(generation: 1, socketID: "1.1", now: Self.start, ids: &ids)
        let asked = machine.signin(now: Self.start, ids: &ids)
        let request = asked.compactMap { if case .authenticate(_, let id) = $0 { id } else { nil } }[0]
        #expect(machine.session?.signin == .authenticating(request: request))
        let sent = machine.signinAuthenticated(request: request, .success(UserAuthenticationResponse(auth: "k:s", userData: #"{"id":"u1"}"#)), now: Self.start)
        #expect(Self.frames(sent, "bird:signin").count == 1 && machine.session?.signin == .awaitingServer(request: request))
        _ = machine.signinSucceeded(Self.message("bird:signin_success", data: #"{"user_data":"{\"id\":\"u1\"}"}"#))
        #expect(machine.signedInUserData == #"{"id":"u1"}"#)

        var refused = ChannelsMachineTests()
        _ = refused.machine.connected(generation: 1, socketID: "1.1", now: Self.start, ids: &refused.ids)
        let second = refused.machine.signin(now: Self.start, ids: &refused.ids).compactMap { if case .authenticate(_, let id) = $0 { id } else { nil } }[0]
        _ = refused.machine.signinAuthenticated(request: second, .success(UserAuthenticationResponse(auth: "k:s", userData: #"{"id":"u1"}"#)), now: Self.start)
        let answer = refused.machine.errorFrame(Self.message("bird:error", data: #"{"code":4009,"message":"bad"}"#), subscription: false)
        #expect(answer?.contains { if case .reportSignin(.refusedByServer(4009, _)) = $0 { true } else { false } } == true)
        #expect(refused.machine.session?.signin == nil)
        #expect(refused.machine.errorFrame(Self.message("bird:error", data: #"{"code":4009,"message":"bad"}"#), subscription: false) == nil,
                "with no signin waiting it is the connection's error")

        var late = ChannelsMachineTests()
        _ = late.machine.connected(generation: 1, socketID: "1.1", now: Self.start, ids: &late.ids)
        let third = late.machine.signin(now: Self.start, ids: &late.ids).compactMap { if case .authenticate(_, let id) = $0 { id } else { nil } }[0]
        let timedOut = late.machine.signinTimedOut(request: third)
        #expect(timedOut.contains { if case .reportSignin(.timedOut) = $0 { true } else { false } } && late.machine.session?.signin == nil)
    }

    @Test("presence: the member list from subscription_succeeded, each member once; unsubscribe sends the frame and forgets the channel")
    mutating func presenceAndUnsubscribe() {
        _ = machine.connected(generation: 1, socketID: "1.1", now: Self.start, ids: &ids)
        let request = Self.authorizations(machine.subscribe("presence-room", now: Self.start, ids: &ids))[0].1
        _ = machine.authorizationAnswered(channel: "presence-room", request: request,
                                          .success(ChannelAuthorizationResponse(auth: "k:s", channelData: #"{"user_id":"a"}"#)))
        _ = machine.subscriptionSucceeded(Self.message("bird:subscription_succeeded", channel: "presence-room",
                                                       data: #"{"presence":{"ids":["a"],"hash":{"a":null},"count":1}}"#))
        let added = Self.message("bird:member_added", channel: "presence-room", data: #"{"user_id":"b"}"#)
        #expect(machine.memberChanged(added, added: true).count == 1)
        #expect(machine.memberChanged(added, added: true).isEmpty, "listed once")
        #expect(machine["presence-room"]?.members.list.map(\.userID).sorted() == ["a", "b"])
        let left = machine.unsubscribe("presence-room")
        #expect(Self.channels(left, "bird:unsubscribe") == ["presence-room"] && machine["presence-room"] == nil)
    }
}
