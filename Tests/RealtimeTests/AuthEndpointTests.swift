import Foundation
import SystemSupport
import Realtime
import RealtimeProtocol
import Testing
import WebSocket

/// The client's `authEndpoint` against a real HTTP server on loopback that answers well, badly
/// or slowly: every failure is a channel error and the connection stays up.
@Suite struct AuthEndpointTests {
    /// An HTTP server with one path per behaviour.
    final class Endpoint: Sendable {
        let context: WebSocketContext
        let server: WebSocketServer
        let bodies = Locked<[String]>([])

        init() throws {
            context = try WebSocketContext()
            let bodies = bodies
            let signer = ChannelAuthorization(key: "test-key", secret: "test-secret")
            server = try context.listen(onConnection: { _ in }, onRequest: { request in
                let body = String(decoding: request.body, as: UTF8.self)
                bodies.withLock { $0.append(body) }
                let fields = Dictionary(body.split(separator: "&").map { pair -> (String, String) in
                    let parts = pair.split(separator: "=", maxSplits: 1).map { String($0).removingPercentEncoding ?? "" }
                    return (parts.first ?? "", parts.count > 1 ? parts[1] : "")
                }, uniquingKeysWith: { _, last in last })
                switch request.path {
                case "/ok":
                    guard request.headers.contains(where: { $0.name.lowercased() == "authorization" && $0.value == "Bearer t0ken" }),
                          let socketID = fields["socket_id"], let channel = fields["channel_name"] else {
                        return HTTPServerResponse(status: 401, text: "missing header or fields")
                    }
                    let auth = signer.authorizeSubscription(socketID: socketID, channel: channel)
                    return HTTPServerResponse(status: 200, contentType: "application/json", text: #"{"auth":"\#(auth)"}"#)
                case "/forbidden": return HTTPServerResponse(status: 403, text: "forbidden")
                case "/broken": return HTTPServerResponse(status: 500, text: "internal error")
                case "/garbage": return HTTPServerResponse(status: 200, contentType: "application/json", text: "<html>not json")
                case "/noauth": return HTTPServerResponse(status: 200, contentType: "application/json", text: #"{"token":"x"}"#)
                case "/slow":
                    try? await Task.sleep(for: .seconds(3))
                    return HTTPServerResponse(status: 200, contentType: "application/json", text: #"{"auth":"test-key:late"}"#)
                default: return HTTPServerResponse(status: 404, text: "no such path")
                }
            })
        }

        deinit {
            server.stop()
            context.shutdown()
        }

        func url(_ path: String) -> URL { URL(string: "http://127.0.0.1:\(server.port)\(path)")! }
    }

    @Test("the endpoint gets a form POST of socket_id and channel_name with the configured headers")
    func granted() async throws {
        let endpoint = try Endpoint()
        let fixture = ClientFixture {
            $0.authEndpoint = endpoint.url("/ok")
            $0.authHeaders = ["Authorization": "Bearer t0ken"]
        }
        _ = fixture.bird.subscribe("private-orders")
        fixture.connected("123.456")
        await eventually("the subscribe") { fixture.subscribeRequests().count == 1 }
        #expect(endpoint.bodies.withLock { $0 } == ["socket_id=123.456&channel_name=private-orders"])
        #expect(fixture.subscribeRequests().first?.auth == ChannelAuthorization(key: "test-key", secret: "test-secret")
            .authorizeSubscription(socketID: "123.456", channel: "private-orders"))
    }

    static let failures: [(String, String)] = [
        ("/forbidden", #""status":403"#),
        ("/broken", #""status":500"#),
        ("/garbage", "not a JSON object"),
        ("/noauth", "not a JSON object"),
        ("/slow", "within"),
        ("/missing", #""status":404"#),
    ]

    @Test("403, 500, garbage, no auth, too slow, 404: a channel error, the connection stays up", arguments: failures)
    func refused(path: String, expected: String) async throws {
        let endpoint = try Endpoint()
        let fixture = ClientFixture {
            $0.authEndpoint = endpoint.url(path)
            $0.authTimeout = .milliseconds(500)
        }
        let deliveries = Deliveries()
        fixture.bird.subscribe("private-orders").bindAll { deliveries.record($0) }
        _ = fixture.bird.subscribe("news")
        fixture.connected()
        await eventually("the channel error") { fixture.drain(); return !deliveries.all.isEmpty }
        #expect(deliveries.all.map(\.event) == ["bird:subscription_error"])
        #expect(deliveries.all.first?.data?.contains(expected) == true, "\(deliveries.all.first?.data ?? "no data")")
        #expect(fixture.state == .connected)
        #expect(fixture.errors.isEmpty)
        #expect(fixture.subscribes() == ["news"], "the public channel is unaffected")
    }

    @Test("an unreachable endpoint is a channel error too")
    func unreachable() async throws {
        let fixture = ClientFixture { $0.authEndpoint = URL(string: "http://127.0.0.1:9/auth")! }
        let deliveries = Deliveries()
        fixture.bird.subscribe("private-orders").bindAll { deliveries.record($0) }
        fixture.connected()
        await eventually("the channel error") { fixture.drain(); return !deliveries.all.isEmpty }
        #expect(deliveries.all.first?.data?.contains("cannot be reached") == true)
        #expect(fixture.state == .connected)
    }
}
