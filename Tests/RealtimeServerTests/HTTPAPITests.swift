import Foundation
import RealtimeProtocol
import RealtimeServer
import Testing

@Suite struct HTTPAPITests {
    static let now: TimeInterval = 1_800_000_000

    func api(_ fixture: HubFixture) -> HTTPAPI {
        var api = HTTPAPI(hub: fixture.hub)
        api.wallClock = { Self.now }
        return api
    }

    func signed(_ method: String, _ path: String, body: String = "", secret: String = "app-secret", timestamp: Int = Int(now)) -> HTTPRequest {
        let bytes = Array(body.utf8)
        let parameters = RESTSignature.signedParameters(method: method, path: path, body: bytes, key: "app-key", secret: secret, timestamp: timestamp)
        return HTTPRequest(method: method, path: path, query: parameters.map { ($0.key, $0.value) }, body: bytes)
    }

    @Test("the REST signature equals Pusher's documented example")
    func documentedVector() {
        let parameters = ["auth_key": "278d425bdf160c739803", "auth_timestamp": "1353088179", "auth_version": "1.0", "body_md5": "ec365a775a4cd0599faeb73354201b6f"]
        #expect(RESTSignature.sign(method: "POST", path: "/apps/3/events", parameters: parameters, secret: "7ad3773142a6692b25b8")
            == "da454824c97ba181a32ccc17a72625ba02771f50b50e1e7430e47a1f3f457e6c")
        let body = #"{"name":"foo","channels":["project-3"],"data":"{\"some\":\"data\"}"}"#
        #expect(Crypto.hex(Crypto.md5(Array(body.utf8))) == "ec365a775a4cd0599faeb73354201b6f")
    }

    @Test("a signed publish reaches the channel's subscribers")
    func publish() {
        let fixture = HubFixture()
        let (output, id) = fixture.connect()
        fixture.subscribe(id, "news")
        let response = api(fixture).handle(signed("POST", "/apps/1/events", body: #"{"name":"update","channel":"news","data":"{\"n\":1}"}"#))
        #expect(response.status == 200)
        #expect(output.last?.event == "update")
        #expect(output.last?.data == #"{"n":1}"#)
    }

    @Test("send_to_user: a publish to #server-to-user-<id> reaches that user's channel, which only that signed-in user may subscribe to")
    func userChannel() {
        let fixture = HubFixture()
        let (output, id) = fixture.connect()
        // Not signed in yet: refused.
        fixture.hub.receive(text: ##"{"event":"bird:subscribe","data":{"channel":"#server-to-user-ann"}}"##, from: id)
        #expect(output.last?.event == "bird:subscription_error")
        let userData = #"{"id":"ann"}"#
        let auth = ChannelAuthorization(key: "app-key", secret: "app-secret").authorizeSignin(socketID: id, userData: userData)
        let signin = try? RealtimeMessage(event: "bird:signin", payload: ["auth": auth, "user_data": userData]).text
        fixture.hub.receive(text: signin ?? "", from: id)
        #expect(output.last?.event == "bird:signin_success")
        fixture.hub.receive(text: ##"{"event":"bird:subscribe","data":{"channel":"#server-to-user-bob"}}"##, from: id)
        #expect(output.last?.event == "bird:subscription_error", "another user's channel")
        fixture.hub.receive(text: ##"{"event":"bird:subscribe","data":{"channel":"#server-to-user-ann"}}"##, from: id)
        #expect(output.last?.event == "bird_internal:subscription_succeeded")
        let response = api(fixture).handle(signed("POST", "/apps/1/events", body: ##"{"name":"notice","channel":"#server-to-user-ann","data":"{}"}"##))
        #expect(response.status == 200)
        #expect(output.last?.event == "notice")
        #expect(output.last?.channel == "#server-to-user-ann")
        let invalid = api(fixture).handle(signed("POST", "/apps/1/events", body: ##"{"name":"notice","channel":"#server-to-user-a b","data":"{}"}"##))
        #expect(invalid.status == 400)
    }

    @Test("batch events are delivered in order")
    func batch() {
        let fixture = HubFixture()
        let (output, id) = fixture.connect()
        fixture.subscribe(id, "news")
        let body = #"{"batch":[{"name":"a","channel":"news","data":"1"},{"name":"b","channel":"news","data":"2"}]}"#
        #expect(api(fixture).handle(signed("POST", "/apps/1/batch_events", body: body)).status == 200)
        #expect(output.frames.suffix(2).map(\.event) == ["a", "b"])
    }

    @Test("refusals: wrong secret, stale timestamp, tampered body, unknown app, oversize body, bad JSON")
    func refusals() {
        let fixture = HubFixture()
        let api = api(fixture)
        let body = #"{"name":"e","channel":"news","data":"{}"}"#
        #expect(api.handle(signed("POST", "/apps/1/events", body: body, secret: "wrong")).status == 401)
        #expect(api.handle(signed("POST", "/apps/1/events", body: body, timestamp: Int(Self.now) - 601)).status == 401)
        var tampered = signed("POST", "/apps/1/events", body: body)
        tampered.body = Array(#"{"name":"e","channel":"other","data":"{}"}"#.utf8)
        #expect(api.handle(tampered).status == 401)
        let unknown = api.handle(signed("POST", "/apps/9/events", body: body))
        #expect(unknown.status == 404)
        #expect(unknown.body.contains("no app 9 on this server") && unknown.body.contains("--app-id"), "the answer names the app and where ids come from: \(unknown.body)")
        let elsewhere = api.handle(signed("GET", "/nothing/here"))
        #expect(elsewhere.status == 404 && elsewhere.body.contains("no route GET /nothing/here"), "\(elsewhere.body)")
        let huge = #"{"name":"e","channel":"news","data":""# + String(repeating: "x", count: 300 * 1024) + #""}"#
        #expect(api.handle(signed("POST", "/apps/1/events", body: huge)).status == 413)
        let bigData = #"{"name":"e","channel":"news","data":""# + String(repeating: "x", count: 11 * 1024) + #""}"#
        #expect(api.handle(signed("POST", "/apps/1/events", body: bigData)).status == 413)
        #expect(api.handle(signed("POST", "/apps/1/events", body: "not json")).status == 400)
        #expect(api.handle(signed("POST", "/apps/1/events", body: #"{"name":"bird:ping","channel":"news","data":"{}"}"#)).status == 400)
        #expect(api.handle(HTTPRequest(method: "POST", path: "/apps/1/events", body: Array(body.utf8))).status == 401)
    }

    @Test("channel info and termination")
    func channelsAndTerminate() {
        let fixture = HubFixture()
        let (output, id) = fixture.connect()
        fixture.subscribe(id, "news")
        let api = api(fixture)
        #expect(api.handle(signed("GET", "/apps/1/channels")).body == #"{"channels":{"news":{}}}"#)
        #expect(api.handle(signed("GET", "/apps/1/channels/news")).body == #"{"occupied":true}"#)
        #expect(api.handle(signed("POST", "/apps/1/connections/\(id)/terminate")).status == 200)
        #expect(output.closeCode == 4009)
        #expect(api.handle(signed("POST", "/apps/1/connections/\(id)/terminate")).status == 404)
    }

    @Test("Pusher library paths: /users/{id}/terminate_connections and presence users")
    func pusherLibraryPaths() {
        let fixture = HubFixture()
        let (a, idA) = fixture.connect()
        let data = #"{"user_id":"u1"}"#
        fixture.subscribe(idA, "presence-room", auth: fixture.signer.authorizeSubscription(socketID: idA, channel: "presence-room", channelData: data), channelData: data)
        let user = #"{"id":"u1"}"#
        fixture.send(idA, "bird:signin", SigninRequest(auth: fixture.signer.authorizeSignin(socketID: idA, userData: user), userData: user))
        let api = api(fixture)
        #expect(api.handle(signed("GET", "/apps/1/channels/presence-room/users")).body == #"{"users":[{"id":"u1"}]}"#)
        #expect(api.handle(signed("POST", "/users/u1/terminate_connections", secret: "wrong")).status == 401)
        #expect(api.handle(signed("POST", "/users/u1/terminate_connections")).status == 200)
        #expect(a.closeCode == 4009)
    }

    @Test("query strings are percent-decoded")
    func query() {
        let pairs = HTTPRequest.parseQuery("a=1&b=x%20y&c=&d")
        #expect(pairs.map(\.name) == ["a", "b", "c", "d"])
        #expect(pairs.map(\.value) == ["1", "x y", "", ""])
    }
}
