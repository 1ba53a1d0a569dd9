import Foundation
import RealtimeProtocol
import RealtimeServer
import Testing
import WebSocket

/// The server over real sockets on loopback.
@Suite struct RealtimeServerEndToEndTests {
    @Test("handshake with socket id and activity timeout; ping gets pong")
    func handshakeAndPing() throws {
        let fixture = try ServerFixture()
        let client = try fixture.connect()
        let handshake = try #require(client.message("bird:connection_established"))
        let data = try handshake.decodeData(ConnectionEstablished.self)
        #expect(data.activityTimeout == 120)
        #expect(data.socketID.split(separator: ".").count == 2)
        client.send(#"{"event":"bird:ping","data":{}}"#)
        #expect(client.message("bird:pong") != nil)
    }

    @Test("Pusher clients (protocol= in the URL) get the pusher namespace")
    func pusherNamespace() throws {
        let fixture = try ServerFixture()
        let client = try fixture.connect(query: "?protocol=7&client=js")
        #expect(client.message("pusher:connection_established") != nil)
    }

    @Test("unknown app key is closed with 4001; over capacity with 4100")
    func refusals() throws {
        let limited = RealtimeApp(id: "2", key: "tiny", secret: "s", maxConnections: 1)
        let fixture = try ServerFixture(apps: [ServerFixture.app, limited])
        #expect(try fixture.connect(key: "nope").closeCode() == 4001)
        let first = try fixture.connect(key: "tiny")
        #expect(first.message("bird:connection_established") != nil)
        #expect(try fixture.connect(key: "tiny").closeCode() == 4100)
    }

    @Test("a silent connection is pinged, then pruned with 4201")
    func pruning() throws {
        let quick = RealtimeApp(id: "3", key: "quick", secret: "s", activityTimeout: 1)
        let fixture = try ServerFixture(apps: [quick]) { $0.pongTimeout = .seconds(1) }
        let client = try fixture.connect(key: "quick")
        #expect(client.message("bird:ping", timeout: .seconds(5)) != nil)
        #expect(client.closeCode(timeout: .seconds(5)) == 4201)
    }

    @Test("subscribe, publish through the HTTP API, receive in order; unsubscribe stops delivery")
    func publishAndReceive() async throws {
        let fixture = try ServerFixture()
        let client = try fixture.connect()
        #expect(client.message("bird:connection_established") != nil)
        client.send(#"{"event":"bird:subscribe","data":{"channel":"news"}}"#)
        #expect(client.message("bird_internal:subscription_succeeded") != nil)
        for index in 0..<20 {
            let (status, _) = try await fixture.api("POST", "/apps/1/events", body: #"{"name":"update","channel":"news","data":"\#(index)"}"#)
            #expect(status == 200)
        }
        #expect(client.message("update", count: 20) != nil)
        #expect(client.messages.filter { $0.event == "update" }.map(\.data) == (0..<20).map { "\($0)" })
        client.send(#"{"event":"bird:unsubscribe","data":{"channel":"news"}}"#)
        client.send(#"{"event":"bird:ping"}"#)
        #expect(client.message("bird:pong") != nil)
        _ = try await fixture.api("POST", "/apps/1/events", body: #"{"name":"update","channel":"news","data":"late"}"#)
        client.send(#"{"event":"bird:ping"}"#)
        #expect(client.message("bird:pong", count: 2) != nil)
        #expect(client.messages.filter { $0.event == "update" }.count == 20)
        let (wrong, _) = try await fixture.api("POST", "/apps/1/events", body: #"{"name":"x","channel":"news","data":"1"}"#, secret: "nope")
        #expect(wrong == 401)
    }

    @Test("bad input gets its documented answer and the server keeps serving others")
    func badInput() throws {
        let fixture = try ServerFixture(maxMessageSize: 4096)
        let good = try fixture.connect()
        #expect(good.message("bird:connection_established") != nil)
        good.send(#"{"event":"bird:subscribe","data":{"channel":"news"}}"#)
        let bad = try fixture.connect()
        #expect(bad.message("bird:connection_established") != nil)
        for frame in ["not json", #"{"event":"bird:nonsense"}"#, #"{"event":"bird:subscribe","data":{}}"#, #"{"data":"{}"}"#] {
            bad.send(frame)
        }
        #expect(bad.message("bird:error", count: 4) != nil)
        try bad.connection?.send(binary: [1, 2, 3])
        #expect(bad.message("bird:error", count: 5) != nil)
        try bad.connection?.send(text: String(repeating: "x", count: 8192))
        #expect(bad.closeCode() == 1009)
        // A TCP client that never completes the upgrade does not stop the server.
        let stalled = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(stalled) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(fixture.server.port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(stalled, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        _ = "GET /app/app-key HTTP/1.1\r\nHost: x\r\n".withCString { write(stalled, $0, strlen($0)) }
        fixture.server.hub.publish(appID: "1", channels: ["news"], event: "still", data: "{}")
        #expect(good.message("still") != nil)
        #expect(try fixture.connect().message("bird:connection_established") != nil)
    }

    @Test("graceful shutdown closes clients with 4200")
    func shutdown() throws {
        let fixture = try ServerFixture()
        let client = try fixture.connect()
        #expect(client.message("bird:connection_established") != nil)
        fixture.server.shutdown()
        #expect(client.closeCode() == 4200)
    }
}
