import Foundation
import RealtimeProtocol
import TestSupport
import Testing

/// Our signatures against the official Python `pusher` library's, for the same inputs.
@Suite(.enabled(if: PythonPeer.isAvailable, "needs python3 with the pusher package (scripts/setup installs it)"))
struct PusherLibraryTests {
    let signer = ChannelAuthorization(key: "278d425bdf160c739803", secret: "7ad3773142a6692b25b8")

    struct Answer: Decodable {
        var auth: String
        var channelData: String?
        var userData: String?
        enum CodingKeys: String, CodingKey {
            case auth
            case channelData = "channel_data"
            case userData = "user_data"
        }
    }

    func python(_ arguments: [String]) throws -> Answer {
        try JSONDecoder().decode(Answer.self, from: Data(try PythonPeer.run("pusher_sign.py", arguments).utf8))
    }

    @Test("private channel signatures match the Python pusher library")
    func privateChannel() throws {
        let answer = try python([signer.key, signer.secret, "1234.1234", "private-foobar"])
        #expect(answer.auth == signer.authorizeSubscription(socketID: "1234.1234", channel: "private-foobar"))
    }

    @Test("presence channel signatures over channel_data match the Python pusher library")
    func presenceChannel() throws {
        let answer = try python([signer.key, signer.secret, "1234.1234", "presence-foobar", #"{"user_id":"10","user_info":{"name":"Mr. Pusher"}}"#])
        let channelData = try #require(answer.channelData)
        #expect(answer.auth == signer.authorizeSubscription(socketID: "1234.1234", channel: "presence-foobar", channelData: channelData))
    }

    @Test("user signin signatures match the Python pusher library")
    func signin() throws {
        let answer = try python(["--user", signer.key, signer.secret, "1234.1234", #"{"id":"10"}"#])
        let userData = try #require(answer.userData)
        #expect(answer.auth == signer.authorizeSignin(socketID: "1234.1234", userData: userData))
    }

    // MARK: - AuthorizationSigner against the library

    func pythonResponse<T: Decodable>(_ type: T.Type, _ script: String, _ arguments: [String]) throws -> T {
        try JSONDecoder().decode(T.self, from: Data(try PythonPeer.run(script, arguments).utf8))
    }

    var authorizer: AuthorizationSigner { AuthorizationSigner(key: signer.key, secret: signer.secret) }

    @Test("AuthorizationSigner answers a private channel exactly as the Python pusher library")
    func signerPrivateChannel() throws {
        let python = try pythonResponse(ChannelAuthorizationResponse.self, "pusher_sign.py", [signer.key, signer.secret, "1234.1234", "private-foobar"])
        #expect(try authorizer.authorizeChannel(socketID: "1234.1234", channel: "private-foobar") == python)
    }

    @Test("AuthorizationSigner answers a presence channel exactly as the Python pusher library with a compact JSON encoder")
    func signerPresenceChannel() throws {
        let member = PresenceMember(userID: "10", userInfo: .object([
            "name": .string("Mr. Pusher ü \"quoted\" / slash"), "age": .number(42), "ratio": .number(1.5),
            "tags": .array([.string("a"), .bool(true), .null]),
        ]))
        let json = try RealtimeMessage.jsonText(member)
        let python = try pythonResponse(ChannelAuthorizationResponse.self, "pusher_sign.py", ["--compact", signer.key, signer.secret, "1234.1234", "presence-foobar", json])
        let ours = try authorizer.authorizeChannel(socketID: "1234.1234", channel: "presence-foobar", member: member)
        #expect(ours == python)
        #expect(ours.channelData == json)
    }

    @Test("AuthorizationSigner signs a signin exactly as the Python pusher library, over the library's own user_data text")
    func signerSignin() throws {
        let python = try pythonResponse(UserAuthenticationResponse.self, "pusher_sign.py", ["--user", signer.key, signer.secret, "1234.1234", #"{"id":"10","user_info":{"name":"Mr. Pusher"}}"#])
        #expect(python.userData == #"{"id": "10", "user_info": {"name": "Mr. Pusher"}}"#)
        #expect(try authorizer.authenticateUser(socketID: "1234.1234", userData: python.userData) == python)
    }
}
