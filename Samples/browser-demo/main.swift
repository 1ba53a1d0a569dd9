// browser-demo: the browser client's demo page (issue 32). A reference server in process on
// loopback (serving the client module at /client/realtime.js), an app's server beside it (the
// page, the rooms' auth route, and two buttons' routes), and a room fed with a numbered event
// every 500 ms. The page shows the connection's state and the room's events as they arrive,
// with a `replayed` badge on those that came back after a drop; "Drop the connection" cuts
// the page's socket without a close frame and "Restart the server" stops the server for 1.5 s
// (its room store is kept, as a node finds Redis again): in both, the app publishes three
// events while the page is away, and the page gets them replayed, in order, none twice.
import Dispatch
import Foundation
import RealtimeBackend
import RealtimeProtocol
import SampleSupport
import RealtimeServer
import SystemSupport
import WebSocket

let usage = """
    usage: browser-demo [--port P] [--realtime-port P]

    Serves the browser client's demo page on http://127.0.0.1:P/ (8000; 0 for a free port) and
    a reference server on 127.0.0.1 (a free port unless --realtime-port is given), and prints
    "page URL" and "realtime URL" on stdout. Open the page's URL in a browser.
    """

var pagePort: UInt16 = 8000
var realtimePort: UInt16 = 0
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--port", "--realtime-port":
        guard let text = arguments.popFirst(), let port = UInt16(text) else {
            FileHandle.standardError.write(Data("browser-demo: \(argument) needs a number 0–65535\n".utf8))
            exit(2)
        }
        if argument == "--port" { pagePort = port } else { realtimePort = port }
    case "-h", "--help":
        print(usage)
        exit(0)
    default:
        FileHandle.standardError.write(Data("browser-demo: unknown argument \(argument)\n\(usage)\n".utf8))
        exit(2)
    }
}

let app = RealtimeApp(id: "demo", key: "demo-key", secret: "demo-secret")
let roomName = "demo:lobby"
/// The app's backend: the room's rule and the batched auth answer (every visitor may join).
let backend = RealtimeBackend(appKey: app.key, appSecret: app.secret)
try backend.room("demo:{id}", history: 200)
let declaredRule = backend.rule(for: roomName)?.rule.rule
/// Kept across restarts, as a node of a cluster finds its shared store (Redis) again.
let roomStore = InMemoryRoomStore()

func startServer(port: UInt16, restart: Bool) throws -> RealtimeServer {
    var options = RealtimeServerOptions(host: "127.0.0.1", port: port, apps: [app])
    options.quiet = true
    // A restarted server may find its port still held for a moment: retry briefly then only.
    var attempt = 0
    while true {
        do {
            return try RealtimeServer(options: options) { $0.roomStore = roomStore }
        } catch {
            attempt += 1
            guard restart, attempt < 50 else { throw error }
            usleep(100_000)
        }
    }
}

/// The server while it is up (`nil` while it restarts), and the next event's number.
struct Demo {
    var server: RealtimeServer?
    var sequence = 0
    var restarting = false
}

let demo: Locked<Demo>
let port: Int
do {
    let server = try startServer(port: realtimePort, restart: false)
    port = server.port
    demo = Locked(Demo(server: server))
} catch {
    FileHandle.standardError.write(Data("browser-demo: \(error)\n".utf8))
    exit(1)
}

/// Publishes the room's next event, numbered, unless the server is down (the app cannot
/// publish then). The hub is called outside the demo's lock.
@Sendable func publishNext() {
    let next: (RealtimeServer, Int)? = demo.withLock { state in
        guard let server = state.server else { return nil }
        state.sequence += 1
        return (server, state.sequence)
    }
    guard let (server, n) = next else { return }
    _ = try? server.hub.publishRoom(appID: app.id, room: roomName, event: "tick", data: #"{"n":\#(n)}"#, rule: declaredRule)
}

let publisher = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "browser-demo.publisher"))
publisher.schedule(deadline: .now() + .milliseconds(500), repeating: .milliseconds(500))
publisher.setEventHandler(handler: publishNext)
publisher.resume()

let restarts = DispatchQueue(label: "browser-demo.restart")

@Sendable func answer(_ request: HTTPServerRequest) async -> HTTPServerResponse {
    func json(_ status: Int, _ value: some Encodable) -> HTTPServerResponse {
        HTTPServerResponse(status: status, contentType: "application/json", text: (try? RealtimeMessage.jsonText(value)) ?? "{}")
    }
    let takesJSON = (request.header("content-type") ?? "").hasPrefix("application/json")
    switch (request.method, request.path) {
    case ("GET", "/"):
        return HTTPServerResponse(status: 200, contentType: "text/html; charset=utf-8",
                                  text: DemoPage.html(realtimePort: port, appKey: app.key, room: roomName))
    case ("POST", "/rooms/auth"):
        guard let body = try? JSONDecoder().decode(RoomAuthorizationRequest.self, from: Data(request.body)),
              body.rooms.count <= RoomAuthorizationRequest.maxRooms else {
            return json(400, ["error": "expected {\"rooms\": [names]}"])
        }
        return json(200, await backend.authorizeRooms(body.rooms, user: "visitor", info: .object(["name": .string("Visitor")])))
    // The buttons' routes take JSON only: a page of another site cannot send that without a
    // CORS preflight, which this server does not answer, so it cannot press them.
    case ("POST", "/drop") where !takesJSON, ("POST", "/restart") where !takesJSON:
        return json(415, ["error": "Content-Type: application/json"])
    case ("POST", "/drop"):
        // The page's own socket, cut without a close frame (as a network drop looks to the
        // server); then three events the page can only get by replay.
        guard let body = try? JSONDecoder().decode([String: String].self, from: Data(request.body)), let socketID = body["socket_id"] else {
            return json(400, ["error": "expected {\"socket_id\"}"])
        }
        guard let server = demo.withLock({ $0.server }) else { return json(409, ["error": "the server is restarting"]) }
        guard server.hub.drop(appID: app.id, socketID: socketID) else { return json(404, ["error": "no such connection"]) }
        for _ in 0..<3 { publishNext() }
        return json(200, ["dropped": socketID])
    case ("POST", "/restart"):
        let server: RealtimeServer? = demo.withLock { state in
            guard !state.restarting, let server = state.server else { return nil }
            state.restarting = true
            state.server = nil
            return server
        }
        guard let server else { return json(409, ["error": "already restarting"]) }
        restarts.async {
            server.shutdown(grace: .milliseconds(200))
            usleep(1_500_000)
            do {
                let restarted = try startServer(port: UInt16(port), restart: true)
                demo.withLock { $0.server = restarted }
                for _ in 0..<3 { publishNext() }
            } catch {
                FileHandle.standardError.write(Data("browser-demo: the server did not restart: \(error)\n".utf8))
                exit(1)
            }
            demo.withLock { $0.restarting = false }
        }
        return json(202, ["restarting": "1.5 s down, the room store kept"])
    default:
        return json(404, ["error": "GET /, POST /rooms/auth, POST /drop, POST /restart"])
    }
}

let context: WebSocketContext
let listener: WebSocketServer
do {
    context = try WebSocketContext()
    listener = try context.listen(host: "127.0.0.1", port: Int(pagePort),
                                  onConnection: { try? $0.close(code: .policyViolation, reason: "HTTP only") },
                                  onRequest: answer)
} catch {
    FileHandle.standardError.write(Data("browser-demo: \(error)\n".utf8))
    exit(1)
}
// Both addresses on stdout at once (unbuffered), so a parent process can read the ports it asked 0 for.
FileHandle.standardOutput.write(Data("realtime ws://127.0.0.1:\(port)/app/\(app.key)\npage http://127.0.0.1:\(listener.port)/\n".utf8))

let signalSources = exitOnTermination()
dispatchMain()
