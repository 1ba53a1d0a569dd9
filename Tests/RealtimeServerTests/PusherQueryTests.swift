import Foundation
import RealtimeProtocol
import RealtimeServer
import TestSupport
import Testing

/// The HTTP API's channel queries and batch publishing as Pusher's official Python server
/// library (`pusher`) calls them and reads their answers.
@Suite(.enabled(if: PythonPeer.isAvailable, "needs python3 with pusher (scripts/setup installs it)"))
struct PusherQueryTests {
    @Test("channels_info, channel_info, users_info and trigger_batch answer as Pusher does: attributes only when asked, user_count only for presence, 400 otherwise")
    func queries() throws {
        let fixture = try ServerFixture()
        let signer = ChannelAuthorization(key: ServerFixture.app.key, secret: ServerFixture.app.secret)
        func client(_ channel: String, user: String? = nil) throws -> TestClient {
            let client = try fixture.connect()
            let socketID = try #require(client.socketID)
            var data: [String: String] = ["channel": channel]
            if channel.hasPrefix("private-") { data["auth"] = signer.authorizeSubscription(socketID: socketID, channel: channel) }
            if let user {
                let channelData = #"{"user_id":"\#(user)"}"#
                data["auth"] = signer.authorizeSubscription(socketID: socketID, channel: channel, channelData: channelData)
                data["channel_data"] = channelData
            }
            client.send(try RealtimeMessage(event: "bird:subscribe", payload: data).text)
            #expect(client.message("bird_internal:subscription_succeeded") != nil, "\(channel)")
            return client
        }
        let news = [try client("news"), try client("news")]
        let room = [try client("presence-room", user: "ana"), try client("presence-room", user: "ana"), try client("presence-room", user: "bo")]
        let secret = try client("private-x")

        let output = try PythonPeer.run("pusher_query.py", [String(fixture.server.port), ServerFixture.app.id, ServerFixture.app.key, ServerFixture.app.secret])
        let answers = try #require(try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [String: Any])
        func json(_ key: String) -> String {
            guard let value = answers[key], let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]) else { return "missing" }
            return String(decoding: data, as: UTF8.self)
        }
        #expect(json("all") == #"{"channels":{"news":{},"presence-room":{},"private-x":{}}}"#)
        #expect(json("presence_users") == #"{"channels":{"presence-room":{"user_count":2}}}"#)
        #expect(json("subscriptions") == #"{"channels":{"news":{"subscription_count":2},"presence-room":{"subscription_count":3},"private-x":{"subscription_count":1}}}"#)
        #expect(json("users_without_prefix") == #"{"error":400}"#)
        #expect(json("presence_channel") == #"{"occupied":true,"subscription_count":3,"user_count":2}"#)
        #expect(json("public_user_count") == #"{"error":400}"#)
        #expect(json("empty") == #"{"occupied":false}"#)
        #expect(json("users") == #"{"users":[{"id":"ana"},{"id":"bo"}]}"#)
        #expect(json("batch") == "{}")
        for client in news { #expect(client.message("first")?.data == #"{"n": 1}"# || client.message("first")?.data == #"{"n":1}"#) }
        #expect(secret.message("second")?.data == "two")
        _ = room
    }
}
