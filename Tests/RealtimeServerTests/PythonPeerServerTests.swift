import Foundation
import RealtimeProtocol
import RealtimeServer
import TestSupport
import Testing

/// Third-party peers against the server: the Python `websockets` client and Pusher's official
/// Python server library.
@Suite(.enabled(if: PythonPeer.isAvailable, "needs python3 with websockets and pusher (scripts/setup installs them)"))
struct PythonPeerServerTests {
    struct Line: Decodable {
        struct Frame: Decodable {
            var event: String
            var channel: String?
            var data: String?
        }
        var handshake: Frame?
        var frame: Frame?
    }

    @Test("the websockets client subscribes and gets events the pusher library publishes; a wrong secret is refused")
    func websocketsAndPusher() throws {
        let fixture = try ServerFixture()
        let port = String(fixture.server.port)
        let subscriber = try PythonPeer.start("ws_subscriber.py", ["ws://127.0.0.1:\(port)/app/\(ServerFixture.app.key)?protocol=7", "news", "2"])
        // handshake, then subscription_succeeded: subscribed before anything is published.
        let first = subscriber.lines(atLeast: 2)
        #expect(first.count >= 2)
        let handshake = try JSONDecoder().decode(Line.self, from: Data(first[0].utf8)).handshake
        #expect(handshake?.event == "pusher:connection_established")
        #expect(try handshake.flatMap { try RealtimeMessage(event: $0.event, data: $0.data).decodeData(ConnectionEstablished.self) }?.activityTimeout == 120)

        let published = try PythonPeer.run("pusher_publish.py", [port, "1", ServerFixture.app.key, ServerFixture.app.secret, "news", "greeting", #"{"text":"hi"}"#])
        #expect(published.contains(#""ok": true"#))
        try PythonPeer.run("pusher_publish.py", [port, "1", ServerFixture.app.key, ServerFixture.app.secret, "news", "greeting", "plain"])
        let refused = try PythonPeer.run("pusher_publish.py", [port, "1", ServerFixture.app.key, "wrong-secret", "news", "greeting", "x"])
        #expect(refused.contains(#""status": 401"#))

        #expect(subscriber.wait() == 0)
        let frames = subscriber.lines(atLeast: 4).compactMap { try? JSONDecoder().decode(Line.self, from: Data($0.utf8)).frame }
        #expect(frames.filter { $0.event == "greeting" }.map(\.data) == [#"{"text":"hi"}"#, "plain"])
    }
}

/// `permessage-deflate` from the realtime server: each app's switch, as a browser-like third
/// party (Python `websockets`, which offers it by default) sees it in the handshake.
@Suite(.enabled(if: PythonPeer.isAvailable, "needs python3 with websockets (scripts/setup installs it)"), .timeLimit(.minutes(1)))
struct ServerCompressionTests {
    @Test("an app with compression on answers the offer; one with it off (the default) does not; --compression turns it on for every app")
    func perApp() throws {
        var compressing = ServerFixture.app
        compressing.compression = true
        let plain = RealtimeApp(id: "2", key: "plain-key", secret: "plain-secret")
        let fixture = try ServerFixture(apps: [compressing, plain])
        let script = """
            import asyncio, sys, websockets
            async def main():
                async with websockets.connect(sys.argv[1], open_timeout=10) as socket:
                    await asyncio.wait_for(socket.recv(), 10)
                    print(socket.response.headers.get("Sec-WebSocket-Extensions", "-"))
            asyncio.run(main())
            """
        let port = fixture.server.port
        let on = try PythonPeer.run(nil, ["-c", script, "ws://127.0.0.1:\(port)/app/\(ServerFixture.app.key)"])
        let off = try PythonPeer.run(nil, ["-c", script, "ws://127.0.0.1:\(port)/app/plain-key"])
        #expect(on.trimmingCharacters(in: .whitespacesAndNewlines) == "permessage-deflate")
        #expect(off.trimmingCharacters(in: .whitespacesAndNewlines) == "-")
        let flags = try RealtimeServerOptions(arguments: ["--app-id", "1", "--app-key", "k", "--app-secret", "s", "--memory", "--compression"])
        #expect(flags.apps.map(\.compression) == [true])
        #expect(try RealtimeServerOptions(arguments: ["--app-id", "1", "--app-key", "k", "--app-secret", "s", "--memory"]).apps.map(\.compression) == [false])
    }
}
