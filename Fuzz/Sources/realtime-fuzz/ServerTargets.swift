import Foundation
@testable import RealtimeProtocol
@testable import RealtimeServer
import Synchronization

/// A value behind a lock, shared by reference (the hub's closures hold it).
final class Shared<Value: Sendable>: Sendable {
    private let mutex: Mutex<Value>
    init(_ value: Value) { mutex = Mutex(value) }
    func withLock<T>(_ body: (inout Value) -> T) -> T { mutex.withLock { body(&$0) } }
}

/// A connection's transport as the hub sees it: checks each frame the hub sends.
final class CheckedOutput: ConnectionOutput {
    private let closedCode = Shared<UInt16?>(nil)

    func send(text: String) {
        let message = try? RealtimeMessage(parsing: text)
        require(message != nil, "the server sent a frame that is not a protocol message: \(text.debugDescription)")
        if let message, message.event == "bird:room_event" {
            require(message.data.flatMap(StrictJSON.roomEvent) != nil, "the server sent a room_event that is not {event, data, meta?}: \(text.debugDescription)")
        }
    }

    func close(code: UInt16, reason: String) {
        require(reason.utf8.count <= 123, "a close reason of \(reason.utf8.count) bytes (RFC 6455 §5.5: 123 at most)")
        closedCode.withLock { $0 = $0 ?? code }
    }

    func abort() { closedCode.withLock { $0 = $0 ?? 1006 } }

    var queuedBytes: Int { 0 }
}

/// The server's hub as hostile clients drive it: frames from two connections (one with rooms
/// joined), signed subscriptions with the peer's own `channel_data`, joins with tokens carrying
/// the peer's `info`, app-server publishes, time passing, drops and reconnects. Invariants:
/// - every frame the hub sends is a protocol message, and every room event is readable;
/// - every webhook body it would post is JSON (RFC 8259), whatever the clients sent;
/// - once every connection is closed, no channel, member or room member is left.
let serverFramesTarget = FuzzTarget(name: "server-frames", summary: "everything a client sends the server: RealtimeHub.receive, webhooks") { bytes in
    let harness = ServerHarness()
    var reader = FuzzReader(bytes)
    while !reader.isAtEnd { harness.step(&reader) }
    harness.finish()
}

/// One input's hub, its two connections and what it told the webhooks (`serverFramesTarget`).
final class ServerHarness: Sendable {
    static let app = RealtimeApp(id: "1", key: "app-key", secret: "app-secret", maxConnections: 8, activityTimeout: 30,
                                 webhookURL: "http://127.0.0.1:9/webhook")
    static let wallClock: Int64 = 1_800_000_000_000
    static let signer = ChannelAuthorization(key: app.key, secret: app.secret)

    let time = Shared(ContinuousClock.now)
    let webhooks = Shared<[WebhookEvent]>([])
    let hub: RealtimeHub
    let sockets = Shared<[String?]>([nil, nil])

    init() {
        var configuration = RealtimeHub.Configuration(apps: [Self.app])
        configuration.wallClock = { Self.wallClock }
        let webhooks = webhooks
        configuration.webhooks = { _, event in webhooks.withLock { $0.append(event) } }
        let time = time
        hub = RealtimeHub(configuration: configuration, now: { time.withLock { $0 } })
        for index in 0..<2 { reopen(index) }
        for (index, token) in Self.setupTokens.enumerated() {
            send(index, .roomJoin, RoomJoinRequest(room: "order:1", token: token))
        }
    }

    /// The tokens of the two joins every input starts with (signed once: most of a run's time
    /// would go to signing them again).
    static let setupTokens = (0..<2).compactMap { index in
        let rule = RoomRule(history: 100, presence: true, membersSend: true, webhook: true)
        return try? JSONWebToken.sign(RoomClaims(subject: "u\(index)", room: "order:1", expiresAt: Int(wallClock / 1000) + 3600,
                                                 info: index == 0 ? .string("u0") : nil, rule: rule), secret: app.secret)
    }

    func reopen(_ index: Int) {
        if let old = sockets.withLock({ $0[index] }) { hub.closed(old) }
        let socketID = hub.open(appKey: Self.app.key, namespace: .bird, output: CheckedOutput())
        sockets.withLock { $0[index] = socketID }
    }

    func socket(_ index: Int) -> String { sockets.withLock { $0[index % 2] } ?? "" }

    func send(_ index: Int, _ event: ProtocolEventName, _ payload: some Encodable) {
        guard let text = try? RealtimeMessage(event: ProtocolNamespace.bird.event(event), payload: payload).text else { return }
        hub.receive(text: text, from: socket(index))
    }

    func join(_ index: Int, room: String, rule: RoomRule, info: JSONValue?, since: RoomPosition? = nil) {
        let claims = RoomClaims(subject: "u\(index)", room: room, expiresAt: Int(Self.wallClock / 1000) + 3600, info: info, rule: rule)
        guard let token = try? JSONWebToken.sign(claims, secret: Self.app.secret) else { return }
        send(index, .roomJoin, RoomJoinRequest(room: room, token: token, since: since))
    }

    /// One step: a control byte 0x01–0x07 and its operand, or a text frame from connection 0.
    func step(_ reader: inout FuzzReader) {
        let chunk = reader.chunk()
        guard let first = chunk.first else { return }
        let operand = Int(chunk.dropFirst().first ?? 0)
        let text = String(decoding: chunk.dropFirst(2), as: UTF8.self)
        switch first {
        case 0x01:
            time.withLock { $0 += .milliseconds(operand * operand * 50) }
            hub.sweep()
        case 0x02: reopen(operand % 2)
        case 0x03:
            // A subscription signed as the app's backend signs it, with the peer's channel_data.
            let channel = ["private-x", "presence-y", "private-encrypted-z", "presence-\(text.prefix(8))"][operand % 4]
            let data = channel.hasPrefix("presence-") ? text : nil
            let auth = Self.signer.authorizeSubscription(socketID: socket(operand >> 2), channel: channel, channelData: data)
            send(operand >> 2, .subscribe, SubscribeRequest(channel: channel, auth: auth, channelData: data))
        case 0x04:
            // A join with a valid token whose info and rule come from the peer.
            let rule = RoomRule(history: (operand & 1) * 100, presence: operand & 2 != 0, maxMembers: operand & 4 != 0 ? 1 : nil,
                                membersSend: operand & 8 != 0, webhook: operand & 16 != 0, sealed: operand & 32 != 0)
            let since = operand & 64 != 0 ? RoomPosition(epoch: String(text.prefix(16)), id: UInt64(operand)) : nil
            join(operand >> 7, room: "order:\(operand % 3)", rule: rule, info: StrictJSON.parse(text), since: since)
        case 0x05: _ = try? hub.publishRoom(appID: Self.app.id, room: "order:\(operand % 3)", event: "e", data: text)
        case 0x06: _ = hub.publish(appID: Self.app.id, channels: ["presence-y", "c"], event: "e", data: text)
        case 0x07: hub.receive(text: text, from: socket(1))
        default: hub.receive(text: String(decoding: chunk, as: UTF8.self), from: socket(0))
        }
    }

    func finish() {
        for event in webhooks.withLock({ $0 }) {
            let body = WebhookDispatcher.body(timeMS: Self.wallClock, events: [event])
            require(StrictJSON.isValid(body) && body != "{}", "a webhook body that is not JSON: \(body.debugDescription)")
        }
        for index in 0..<2 { if let socketID = sockets.withLock({ $0[index] }) { hub.closed(socketID) } }
        require(hub.connectionCount == 0, "\(hub.connectionCount) connections left after every one closed")
        require(hub.channels(appID: Self.app.id).isEmpty, "channels left after every connection closed: \(hub.channels(appID: Self.app.id))")
        for room in 0..<3 {
            let members = hub.roomMembers(appID: Self.app.id, room: "order:\(room)")
            require(members.connections == 0 && members.users.isEmpty, "order:\(room) keeps members after every connection closed: \(members)")
        }
    }
}

/// The HTTP API (Pusher's REST API and the rooms API) with the request signed as a backend
/// signs it, so the body and query parsers are reached: method, path, query and body from the
/// input. Invariants: every answer is JSON (or Prometheus text for `/metrics`) with a status
/// the API documents, and `parseQuery` reads any query string.
let httpAPITarget = FuzzTarget(name: "http-api", summary: "HTTP API requests, signed: query and body parsing") { bytes in
    var reader = FuzzReader(bytes)
    let methods = ["GET", "POST", "DELETE", "PUT"]
    let method = methods[Int(reader.byte()) % methods.count]
    let signed = reader.byte() & 1 == 0
    let path = reader.text()
    let queryText = reader.text()
    let body = Array(reader.chunk())
    var query = HTTPRequest.parseQuery(queryText)
    if signed {
        var parameters: [String: String] = [:]
        for (name, value) in query { parameters[name.lowercased()] = value }
        parameters["auth_key"] = ServerHarness.app.key
        parameters["auth_timestamp"] = String(ServerHarness.wallClock / 1000)
        parameters["auth_version"] = "1.0"
        if !body.isEmpty { parameters["body_md5"] = Crypto.hex(Crypto.md5(body)) }
        parameters["auth_signature"] = nil
        let signature = RESTSignature.sign(method: method, path: path, parameters: parameters, secret: ServerHarness.app.secret)
        query = parameters.map { ($0.key, $0.value) } + [("auth_signature", signature)]
    }
    let hub = RealtimeHub(configuration: RealtimeHub.Configuration(apps: [ServerHarness.app]))
    var api = HTTPAPI(hub: hub)
    api.wallClock = { TimeInterval(ServerHarness.wallClock / 1000) }
    let response = api.handle(HTTPRequest(method: method, path: path, query: query, body: body))
    require((200...599).contains(response.status), "status \(response.status)")
    if response.contentType.hasPrefix("application/json") {
        require(StrictJSON.isValid(response.body), "a \(response.status) answer that is not JSON: \(response.body.debugDescription)")
    }
}
