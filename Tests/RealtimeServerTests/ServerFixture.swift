import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import SystemSupport
import TestSupport
import RealtimeProtocol
import RealtimeServer
import WebSocket

/// A real server on a loopback port, and WebSocket clients from the `WebSocket` module.
final class ServerFixture: Sendable {
    static let app = RealtimeApp(id: "1", key: "app-key", secret: "app-secret", maxConnections: 50, activityTimeout: 120)
    let server: RealtimeServer
    let clients: WebSocketContext

    /// - Parameter threads: the server's service loops (one per core when `nil`).
    /// - Parameter consoleToken: the token opening the operator's console for every app.
    init(apps: [RealtimeApp] = [ServerFixture.app], maxMessageSize: Int = 64 * 1024, threads: Int? = nil, consoleToken: String? = nil,
         configure: (inout RealtimeHub.Configuration) -> Void = { _ in }) throws {
        var options = RealtimeServerOptions(port: 0, apps: apps)
        options.maxMessageSize = maxMessageSize
        options.consoleToken = consoleToken
        if let threads { options.threads = threads }
        server = try RealtimeServer(options: options, configure: configure)
        clients = try WebSocketContext()
    }

    deinit {
        clients.shutdown()
        server.shutdown(grace: .zero)
    }

    var base: String { "ws://127.0.0.1:\(server.port)" }

    /// Connects a client to `/app/{key}` and waits for its first frame.
    func connect(key: String = ServerFixture.app.key, query: String = "") throws -> TestClient {
        let client = TestClient()
        client.connection = try clients.connect(url: "\(base)/app/\(key)\(query)") { client.record($0) }
        return client
    }

    /// A signed HTTP API request over real HTTP; `signing` is the path the signature covers
    /// when it is not `path` as sent (a decoded form, which the server accepts too).
    func api(_ method: String, _ path: String, body: String = "", secret: String = ServerFixture.app.secret, signing: String? = nil) async throws -> (Int, String) {
        let bytes = Array(body.utf8)
        // Query parameters in `path` (`?limit=100`) are signed with the auth ones, as Pusher signs them.
        let parts = path.split(separator: "?", maxSplits: 1).map(String.init)
        let path = parts[0]
        var parameters = Dictionary(uniqueKeysWithValues: HTTPRequest.parseQuery(parts.count > 1 ? parts[1] : "").map { ($0.name, $0.value) })
        parameters["auth_key"] = ServerFixture.app.key
        parameters["auth_timestamp"] = String(Int(Date().timeIntervalSince1970))
        parameters["auth_version"] = "1.0"
        if !bytes.isEmpty { parameters["body_md5"] = Crypto.hex(Crypto.md5(bytes)) }
        parameters["auth_signature"] = RESTSignature.sign(method: method, path: signing ?? path, parameters: parameters, secret: secret)
        var components = URLComponents(string: "http://127.0.0.1:\(server.port)\(path)")!
        components.queryItems = parameters.map { URLQueryItem(name: $0.key, value: $0.value) }
        var request = URLRequest(url: components.url!)
        request.httpMethod = method
        if !bytes.isEmpty {
            request.httpBody = Data(bytes)
            request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        }
        return try await HTTPRequests.send(request)
    }
}

/// A WebSocket client that records what it receives and can wait for it.
final class TestClient: Sendable {
    private let state = Locked((events: [WebSocketEvent](), connection: WebSocketConnection?.none))
    private let arrived = DispatchSemaphore(value: 0)

    var connection: WebSocketConnection? {
        get { state.withLock { $0.connection } }
        set { state.withLock { $0.connection = newValue } }
    }

    func record(_ event: WebSocketEvent) {
        state.withLock { $0.events.append(event) }
        arrived.signal()
    }

    var events: [WebSocketEvent] { state.withLock { $0.events } }

    /// Text frames parsed as protocol messages.
    var messages: [RealtimeMessage] {
        events.compactMap { if case .text(let text) = $0 { try? RealtimeMessage(parsing: text) } else { nil } }
    }

    /// Waits until `condition` holds on the events, for at most `timeout`.
    @discardableResult
    func wait(timeout: Duration = .seconds(5), _ condition: ([WebSocketEvent]) -> Bool) -> Bool {
        let deadline = DispatchTime.now() + .milliseconds(Int(timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000))
        while !condition(events) {
            if arrived.wait(timeout: deadline) == .timedOut { return condition(events) }
        }
        return true
    }

    /// Waits for a message with this event name; returns it.
    func message(_ event: String, count: Int = 1, timeout: Duration = .seconds(5)) -> RealtimeMessage? {
        wait(timeout: timeout) { _ in messages.filter { $0.event == event }.count >= count }
        return messages.filter { $0.event == event }.dropFirst(count - 1).first
    }

    /// Waits for the close and returns its code.
    func closeCode(timeout: Duration = .seconds(5)) -> UInt16? {
        wait(timeout: timeout) { $0.contains { if case .closed = $0 { true } else { false } } }
        for event in events { if case .closed(let code, _) = event { return code.rawValue } }
        return nil
    }

    var socketID: String? { try? message("bird:connection_established")?.decodeData(ConnectionEstablished.self).socketID }

    func send(_ text: String) { try? connection?.send(text: text) }
}
