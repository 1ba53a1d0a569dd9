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
}
