import Foundation
import RealtimeProtocol
import RealtimeServer
import TestSupport
import Testing

/// Issue 6's acceptance test with a third-party client: `pysher` on a private channel of our
/// server, authorised by the official Python `pusher` library, receiving an event the same
/// library publishes through the HTTP API. pysher 1.0.8 asks for `?protocol=6`; any `protocol=`
/// gets the `pusher` namespace.
@Suite(.enabled(if: PythonPeer.isAvailable, "needs python3 with pysher and pusher (scripts/setup installs them)"))
struct PysherTests {
    struct Line: Decodable {
        struct Received: Decodable {
            var event: String
            var data: String
        }
        var connected: String?
        var subscribed: String?
        var published: Bool?
        var received: Received?
        var subscriptionError: String?
        var error: String?

        enum CodingKeys: String, CodingKey {
            case connected, subscribed, published, received, error
            case subscriptionError = "subscription_error"
        }
    }

    /// Runs pysher_private.py against the fixture's server; its stdout lines and exit status.
    /// Its stderr (pysher's and websocket-client's log) goes to the test log.
    func runPysher(_ fixture: ServerFixture, channel: String, authSecret: String? = nil) throws -> (status: Int32, lines: [Line], output: String) {
        let app = ServerFixture.app
        let arguments = ["127.0.0.1", String(fixture.server.port), app.id, app.key, app.secret, channel, "order-placed", #"{"id":7,"note":"ünïcode"}"#]
        let peer = try PythonPeer.start("pysher_private.py", arguments + (authSecret.map { [$0] } ?? []))
        let status = peer.wait()
        let text = peer.lines(atLeast: authSecret == nil ? 4 : 2)
        let lines = text.compactMap { try? JSONDecoder().decode(Line.self, from: Data($0.utf8)) }
        return (status, lines, "pysher_private.py exited \(status):\n" + text.joined(separator: "\n"))
    }

    @Test("pysher subscribes to a private channel with the pusher library's authorisation and receives an event published through the HTTP API")
    func privateChannel() throws {
        let fixture = try ServerFixture()
        let run = try runPysher(fixture, channel: "private-orders")
        #expect(run.status == 0, "\(run.output)")
        let socketID = try #require(run.lines.compactMap(\.connected).first, "\(run.output)")
        #expect(AuthorizationSigner.isValidSocketID(socketID))
        #expect(run.lines.compactMap(\.subscribed) == ["private-orders"], "\(run.output)")
        let received = try #require(run.lines.compactMap(\.received).first, "\(run.output)")
        #expect(received.event == "order-placed")
        #expect(received.data == #"{"id":7,"note":"ünïcode"}"#)
    }

    @Test("pysher's subscription signed with another secret is refused with pusher:subscription_error 4009")
    func forgedAuthorisation() throws {
        let fixture = try ServerFixture()
        let run = try runPysher(fixture, channel: "private-orders", authSecret: "not-the-secret")
        #expect(run.status == 0, "\(run.output)")
        let refusal = try #require(run.lines.compactMap(\.subscriptionError).first, "\(run.output)")
        #expect(try RealtimeMessage(event: "e", data: refusal).decodeData(ErrorPayload.self).code == 4009)
        #expect(fixture.server.hub.channels(appID: ServerFixture.app.id)["private-orders"] == nil)
    }
}
