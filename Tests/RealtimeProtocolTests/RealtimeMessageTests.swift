import Foundation
import RealtimeProtocol
import Testing

@Suite struct RealtimeMessageTests {
    @Test("a frame round-trips with data as a JSON-encoded string")
    func roundTrip() throws {
        let message = try RealtimeMessage(event: ProtocolNamespace.bird.event(.connectionEstablished),
                                          payload: ConnectionEstablished(socketID: "123.456", activityTimeout: 30))
        #expect(message.text == #"{"data":"{\"activity_timeout\":30,\"socket_id\":\"123.456\"}","event":"bird:connection_established"}"#)
        let parsed = try RealtimeMessage(parsing: message.text)
        #expect(parsed == message)
        #expect(try parsed.decodeData(ConnectionEstablished.self) == ConnectionEstablished(socketID: "123.456", activityTimeout: 30))
    }

    @Test("data sent as a JSON object is accepted and kept as its JSON text")
    func objectData() throws {
        let parsed = try RealtimeMessage(parsing: #"{"event":"pusher:subscribe","data":{"channel":"news"}}"#)
        #expect(try parsed.decodeData(SubscribeRequest.self).channel == "news")
    }

    @Test("bare numbers and Booleans as data keep their JSON text", arguments: [("true", "true"), ("false", "false"), ("42", "42"), ("1.5", "1.5")])
    func bareData(json: String, text: String) throws {
        #expect(try RealtimeMessage(parsing: #"{"event":"e","data":\#(json)}"#).data == text)
    }

    @Test("bad frames give typed errors", arguments: [
        ("not json", ProtocolError.malformedJSON("not json")),
        ("[1,2]", .notAnObject),
        ("{}", .missingField("event")),
        (#"{"event":42}"#, .invalidField("event", "not a non-empty string")),
        (#"{"event":""}"#, .invalidField("event", "not a non-empty string")),
        (#"{"event":"e","channel":7}"#, .invalidField("channel", "not a string")),
    ])
    func badFrames(text: String, error: ProtocolError) {
        #expect(throws: error) { try RealtimeMessage(parsing: text) }
    }

    @Test("data that does not decode is an invalid field, not a crash")
    func badData() throws {
        let message = try RealtimeMessage(parsing: #"{"event":"bird:subscribe","data":"{\"chan\":1}"}"#)
        #expect(throws: ProtocolError.invalidField("data", "not a valid SubscribeRequest: missing channel")) { try message.decodeData(SubscribeRequest.self) }
        let mistyped = try RealtimeMessage(parsing: #"{"event":"bird:room_join","data":"{\"room\":\"r\",\"token\":\"t\",\"since\":{\"epoch\":\"e\",\"id\":\"1\"}}"}"#)
        #expect(throws: ProtocolError.invalidField("data", "not a valid RoomJoinRequest: since.id is not UInt64")) { try mistyped.decodeData(RoomJoinRequest.self) }
        #expect(throws: ProtocolError.missingField("data")) { try RealtimeMessage(event: "x").decodeData(SubscribeRequest.self) }
    }

    @Test("namespaced event names split into namespace, name and internal flag")
    func namespaces() {
        #expect(ProtocolNamespace.split("bird:ping")?.name == "ping")
        #expect(ProtocolNamespace.split("pusher_internal:subscription_succeeded")?.isInternal == true)
        #expect(ProtocolNamespace.split("pusher_internal:subscription_succeeded")?.namespace == .pusher)
        #expect(ProtocolNamespace.split("client-typing") == nil)
        #expect(ProtocolNamespace.split("other:ping") == nil)
        #expect(ProtocolNamespace.pusher.internalEvent(.memberAdded) == "pusher_internal:member_added")
    }

    @Test("presence members accept numeric user ids")
    func numericUserID() throws {
        let member = try RealtimeMessage(event: "x", data: #"{"user_id":42,"user_info":{"name":"Ana"}}"#).decodeData(PresenceMember.self)
        #expect(member.userID == "42")
        #expect(member.userInfo?["name"]?.string == "Ana")
    }
}

@Suite struct CloseCodeTests {
    @Test("the seed's close-code table, at every range edge", arguments: [
        (UInt16(1000), RealtimeCloseCode.Reaction.backOff), (1006, .backOff), (3999, .backOff),
        (4000, .fail), (4009, .fail), (4099, .fail),
        (4100, .backOff), (4199, .backOff),
        (4200, .reconnectNow), (4201, .reconnectNow), (4299, .reconnectNow),
        (4300, .backOff), (4301, .backOff),
    ])
    func reactions(code: UInt16, reaction: RealtimeCloseCode.Reaction) {
        #expect(RealtimeCloseCode(rawValue: code).reaction == reaction)
    }
}

@Suite struct ChannelAuthorizationTests {
    let pusher = ChannelAuthorization(key: "278d425bdf160c739803", secret: "7ad3773142a6692b25b8")

    @Test("signatures equal Pusher's published vector")
    func publishedVector() {
        #expect(pusher.authorizeSubscription(socketID: "1234.1234", channel: "private-foobar")
            == "278d425bdf160c739803:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4")
    }

    @Test("presence and signin strings follow the scheme")
    func strings() {
        #expect(ChannelAuthorization.subscriptionString(socketID: "1.2", channel: "presence-a", channelData: #"{"user_id":"7"}"#) == #"1.2:presence-a:{"user_id":"7"}"#)
        #expect(ChannelAuthorization.signinString(socketID: "1.2", userData: #"{"id":"7"}"#) == #"1.2::user::{"id":"7"}"#)
    }

    @Test("verification accepts the right signature and refuses forged ones")
    func verify() {
        let signed = ChannelAuthorization.subscriptionString(socketID: "1234.1234", channel: "private-foobar")
        let good = pusher.authorizeSubscription(socketID: "1234.1234", channel: "private-foobar")
        #expect(pusher.verify(good, signs: signed))
        #expect(!pusher.verify(good, signs: "1234.1235:private-foobar"))
        #expect(!pusher.verify("otherkey:" + good.split(separator: ":")[1], signs: signed))
        #expect(!pusher.verify(String(good.dropLast()), signs: signed))
        #expect(!pusher.verify("garbage", signs: signed))
    }

    @Test("digests match known answers (RFC 1321, FIPS 180-4)")
    func digests() {
        #expect(Crypto.hex(Crypto.md5(Array("abc".utf8))) == "900150983cd24fb0d6963f7d28e17f72")
        #expect(Crypto.hex(Crypto.sha256(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }
}

@Suite("PresenceMember(parsing:)")
struct PresenceMemberParsingTests {
    static let inputs = [
        #"{"user_id":"ana","user_info":{"name":"Ana","tags":[1,true,null]}}"#,
        #"{"user_id":"ana"}"#,
        #"{"user_id":"ana","user_info":null}"#,
        #"{"user_id":42,"user_info":"x"}"#,
        #"{"user_id":1e300}"#,
        #"{"user_id":-7.5,"extra":[]}"#,
        #"{"user_info":{}}"#,
        #"{"user_id":true}"#,
        #"{"user_id":null}"#,
        #"["ana"]"#,
        #""ana""#,
        #"{"user_id":"ana""#,
        "",
        #"{"user_id":"a\u00e9\ud83d\ude00"}"#,
    ]

    @Test("gives what JSONDecoder gives, or nil where it throws", arguments: inputs)
    func matchesDecodable(text: String) {
        let decoded = try? JSONDecoder().decode(PresenceMember.self, from: Data(text.utf8))
        #expect(PresenceMember(parsing: text) == decoded)
    }
}
