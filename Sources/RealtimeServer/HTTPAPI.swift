import Foundation
import Synchronization
import RealtimeProtocol

/// A plain HTTP request as the transport hands it over.
public struct HTTPRequest: Sendable {
    /// `GET`, `POST` …
    public var method: String
    /// The path without the query (`/apps/1/events`).
    public var path: String
    /// Query parameters, percent-decoded, in order.
    public var query: [(name: String, value: String)]
    /// The body bytes.
    public var body: [UInt8]

    /// Creates a request.
    public init(method: String, path: String, query: [(name: String, value: String)] = [], body: [UInt8] = []) {
        self.method = method
        self.path = path
        self.query = query
        self.body = body
    }

    /// Splits a raw query string (`a=1&b=2`) into percent-decoded pairs.
    public static func parseQuery(_ text: String) -> [(name: String, value: String)] {
        text.split(separator: "&").map { pair in
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String {
                String(part).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String(part)
            }
            return (decode(parts[0]), parts.count > 1 ? decode(parts[1]) : "")
        }
    }
}

/// A plain HTTP response.
public struct HTTPResponse: Sendable, Equatable {
    /// The status code.
    public var status: Int
    /// The body text (JSON, or Prometheus' text format for `/metrics`).
    public var body: String
    /// The body's media type (`application/json` unless said otherwise).
    public var contentType: String

    /// Creates a response.
    public init(status: Int, body: String, contentType: String = "application/json") {
        self.status = status
        self.body = body
        self.contentType = contentType
    }

    static func error(_ status: Int, _ message: String) -> HTTPResponse {
        HTTPResponse(status: status, body: (try? RealtimeMessage.jsonText(["error": message])) ?? "{}")
    }
}

/// The server's HTTP API, signed like Pusher's REST API (auth_version 1.0) so the official
/// server libraries (the Python `pusher` package) can publish to it:
///
/// - `POST /apps/{id}/events` `{name, data, channel | channels, socket_id?}`
/// - `POST /apps/{id}/batch_events` `{batch: [{name, data, channel, socket_id?}]}`
/// - `GET /apps/{id}/channels[?filter_by_prefix=P][&info=user_count,subscription_count]` →
///   `{channels: {name: {…the attributes asked for}}}`; `user_count` only with
///   `filter_by_prefix=presence-` (else 400), as Pusher answers
/// - `GET /apps/{id}/channels/{name}[?info=…]` → `{occupied, …the attributes asked for}`;
///   `user_count` only for a presence channel (else 400)
/// - `GET /apps/{id}/channels/{name}/users` → `{users: [{id}]}` (presence channels)
/// - `POST /apps/{id}/users/{user_id}/terminate_connections`, or `/users/{user_id}/…` as
///   Pusher's libraries send it (close 4009)
/// - `POST /apps/{id}/connections/{socket_id}/terminate` (close 4009; this server's own)
/// - `GET /health` (unsigned; this server's own) → 200 `{status: "ok", connections}`, or 503
///   `{status: "cluster bus lost or Redis not answering"}` while a cluster node's bus to Redis
///   is down or Redis has not answered its pings for `RedisFanout.maxSilence` (750 ms); on a
///   Redis Cluster, 200 `{status: "degraded", shards_down: ["redis://host:port (slots 0-5460)", …]}` while
///   some shards are down but not all (their rooms and channels wait; the others go on); 200
///   `{status: "degraded", store_shards_stalled: ["redis://host:port (not answering for 0.6 s)"]}`
///   while a room request has waited on its history store shard (`the history store` when
///   reached whole) for `RealtimeHub.storeStallThreshold` (500 ms) or longer
/// - `GET /metrics` (unsigned; this server's own) → Prometheus' text format, version 0.0.4
///   (`RealtimeHub.metricsText()`); keep it off the public side of a proxy
/// - rooms (this server's own, docs/rooms-protocol.md "HTTP API"): `POST …/room_events`,
///   `POST …/batch_room_events`, `GET …/rooms/{room}/history`, `GET …/rooms/{room}/users`,
///   `POST …/rooms/{room}/users/{user_id}/kick`
///
/// Every request carries `auth_key`, `auth_timestamp`, `auth_version=1.0`, `body_md5` (with a
/// body) and `auth_signature` = hex HMAC-SHA256(secret, "METHOD\nPATH\nsorted query without
/// auth_signature"). Answers: 401 for a bad key, signature, body_md5 or a timestamp more than
/// `timestampTolerance` away; 413 for a body over `maxBodySize`; 400 for malformed JSON;
/// 404 for unknown paths or apps.
public struct HTTPAPI: Sendable {
    /// The hub the API acts on.
    public let hub: RealtimeHub
    /// Largest body accepted, in bytes (default 256 KiB).
    public var maxBodySize = 256 * 1024
    /// Largest event `data`, in bytes (default 10 KiB, Pusher's limit).
    public var maxDataSize = 10 * 1024
    /// How far `auth_timestamp` may be from now (default 600 s, Pusher's value).
    public var timestampTolerance: TimeInterval = 600
    /// The wall clock for timestamp checks (seconds since 1970).
    public var wallClock: @Sendable () -> TimeInterval = { Date().timeIntervalSince1970 }

    /// Creates the API for a hub.
    public init(hub: RealtimeHub) { self.hub = hub }

    struct Event: Decodable {
        var name: String
        var data: String
        var channel: String?
        var channels: [String]?
        var socketID: String?

        enum CodingKeys: String, CodingKey {
            case name, data, channel, channels
            case socketID = "socket_id"
        }
    }

    struct Batch: Decodable { var batch: [Event] }

    /// Answers one request.
    ///
    /// - Parameter request: the request.
    /// - Returns: the response (never throws: every failure is a status code).
    public func handle(_ request: HTTPRequest) -> HTTPResponse {
        guard request.body.count <= maxBodySize else { return .error(413, "body larger than \(maxBodySize) bytes") }
        let parts = request.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        // Unsigned, for load balancers and monitors: 503 while a cluster node's bus is lost.
        if request.method == "GET", parts == ["health"] {
            // Nothing here waits for the hub's lock: a node whose hub is stuck must still answer.
            let healthy = hub.isFanoutHealthy
            let connections = hub.metrics.connectionsOpened.load(ordering: .relaxed) - hub.metrics.connectionsClosed.load(ordering: .relaxed)
            let down = hub.fanoutShards.filter { !$0.up }.map { "\($0.name) (slots \($0.slots))" }
            let stalled = hub.stalledStoreShards
            guard healthy, !down.isEmpty || !stalled.isEmpty else {
                return HTTPResponse(status: healthy ? 200 : 503, body: #"{"status":"\#(healthy ? "ok" : "cluster bus lost or Redis not answering")","connections":\#(connections)}"#)
            }
            var body: [String: JSONValue] = ["status": .string("degraded"), "connections": .number(Double(connections))]
            if !down.isEmpty { body["shards_down"] = .array(down.map { .string($0) }) }
            if !stalled.isEmpty { body["store_shards_stalled"] = .array(stalled.map { .string($0) }) }
            return HTTPResponse(status: 200, body: (try? RealtimeMessage.jsonText(body)) ?? #"{"status":"degraded"}"#)
        }
        if request.method == "GET", parts == ["metrics"] {
            return HTTPResponse(status: 200, body: hub.metricsText(), contentType: "text/plain; version=0.0.4; charset=utf-8")
        }
        // Pusher's libraries address terminate_connections as /users/{id}/…, without /apps/{id}:
        // the app is then the one whose key signed the request.
        if parts.count == 3, parts[0] == "users", parts[2] == "terminate_connections" {
            let key = request.query.last { $0.name.lowercased() == "auth_key" }?.value
            guard let app = key.flatMap(hub.app(key:)) else { return .error(401, "unknown auth_key") }
            if let failure = authenticate(request, app: app) { return failure }
            hub.terminateUser(appID: app.id, userID: parts[1])
            return HTTPResponse(status: 200, body: "{}")
        }
        guard parts.count >= 3, parts[0] == "apps" else { return Self.noRoute(request) }
        guard let app = hub.app(id: parts[1]) else {
            return .error(404, "no app \(parts[1].prefix(64)) on this server: the app id is realtime-server's --app-id (or an id of its --config file)")
        }
        if let failure = authenticate(request, app: app) { return failure }
        switch (request.method, Array(parts.dropFirst(2))) {
        case ("POST", ["events"]):
            guard let event = try? StrictJSON.decode(Event.self, from: request.body) else { return .error(400, "malformed event JSON") }
            return publish([event], app: app)
        case ("POST", ["batch_events"]):
            guard let batch = try? StrictJSON.decode(Batch.self, from: request.body) else { return .error(400, "malformed batch JSON") }
            return publish(batch.batch, app: app)
        case ("GET", ["channels"]):
            let prefix = request.query.last { $0.name == "filter_by_prefix" }?.value ?? ""
            guard let info = Self.infoAttributes(request) else { return .error(400, "info takes user_count and subscription_count") }
            if info.users, !prefix.hasPrefix("presence-") { return .error(400, "user_count needs filter_by_prefix=presence-") }
            let channels = hub.channelCounts(appID: app.id).filter { $0.key.hasPrefix(prefix) }.mapValues { counts in
                ChannelInfo(userCount: info.users ? counts.users : nil, subscriptionCount: info.subscriptions ? counts.subscriptions : nil)
            }
            return HTTPResponse(status: 200, body: (try? RealtimeMessage.jsonText(["channels": channels])) ?? "{}")
        case ("GET", let rest) where rest.count == 3 && rest[0] == "channels" && rest[2] == "users":
            let users = hub.presenceMembers(appID: app.id, channel: rest[1]).map { ["id": $0] }
            return HTTPResponse(status: 200, body: (try? RealtimeMessage.jsonText(["users": users])) ?? "{}")
        case ("GET", let rest) where rest.count == 2 && rest[0] == "channels":
            guard let info = Self.infoAttributes(request) else { return .error(400, "info takes user_count and subscription_count") }
            if info.users, ChannelKind(channelName: rest[1]) != .presence { return .error(400, "user_count is for presence channels") }
            let counts = hub.channelCounts(appID: app.id)[rest[1]]
            let answer = ChannelInfo(
                occupied: counts != nil, userCount: info.users ? counts?.users ?? 0 : nil,
                subscriptionCount: info.subscriptions ? counts?.subscriptions ?? 0 : nil
            )
            return HTTPResponse(status: 200, body: (try? RealtimeMessage.jsonText(answer)) ?? "{}")
        case ("POST", let rest) where rest.count == 3 && rest[0] == "users" && rest[2] == "terminate_connections":
            hub.terminateUser(appID: app.id, userID: rest[1])
            return HTTPResponse(status: 200, body: "{}")
        case (_, let rest) where rest.first == "rooms" || rest == ["room_events"] || rest == ["batch_room_events"]:
            return handleRooms(request, rest, app: app)
        case ("POST", let rest) where rest.count == 3 && rest[0] == "connections" && rest[2] == "terminate":
            return hub.terminate(appID: app.id, socketID: rest[1]) ? HTTPResponse(status: 200, body: "{}") : .error(404, "no such connection")
        default:
            return Self.noRoute(request)
        }
    }

    /// The 404 for a path the API does not serve, naming it and where the API is.
    static func noRoute(_ request: HTTPRequest) -> HTTPResponse {
        .error(404, "no route \(request.method) \(request.path.prefix(200)): the HTTP API's routes are under /apps/APP_ID/ (events, batch_events, channels, room_events, rooms/…: RunningTheServer in the server's documentation)")
    }

    /// One channel in `GET …/channels` answers: only the attributes asked for.
    struct ChannelInfo: Encodable {
        var occupied: Bool?
        var userCount: Int?
        var subscriptionCount: Int?

        enum CodingKeys: String, CodingKey {
            case occupied
            case userCount = "user_count"
            case subscriptionCount = "subscription_count"
        }
    }

    /// The `info` parameter's attributes (comma-separated), or nil for one this API lacks.
    static func infoAttributes(_ request: HTTPRequest) -> (users: Bool, subscriptions: Bool)? {
        let asked = (request.query.last { $0.name == "info" }?.value ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        guard asked.allSatisfy({ $0 == "user_count" || $0 == "subscription_count" }) else { return nil }
        return (asked.contains("user_count"), asked.contains("subscription_count"))
    }

    private func publish(_ events: [Event], app: RealtimeApp) -> HTTPResponse {
        for event in events {
            let channels = event.channels ?? event.channel.map { [$0] } ?? []
            guard !channels.isEmpty, channels.count <= 100, channels.allSatisfy(RealtimeHub.isValidChannelName) else {
                return .error(400, "an event needs 1 to 100 valid channel names")
            }
            guard !event.name.isEmpty, event.name.utf8.count <= 200, ProtocolNamespace.split(event.name) == nil else {
                return .error(400, "invalid event name")
            }
            guard event.data.utf8.count <= maxDataSize else { return .error(413, "event data larger than \(maxDataSize) bytes") }
        }
        for event in events {
            hub.publish(appID: app.id, channels: event.channels ?? event.channel.map { [$0] } ?? [], event: event.name, data: event.data, excluding: event.socketID)
        }
        return HTTPResponse(status: 200, body: "{}")
    }

    /// The forms of a path a request may have been signed over: the decoded path; the path
    /// with every byte outside RFC 3986's unreserved set and `/` percent-encoded (as Python's
    /// `urllib.parse.quote` and most HTTP clients encode a path); and, for a kick whose user id
    /// holds `/`, that form with the id encoded as one segment (`/` as `%2F`, as the id was
    /// sent: docs/rooms-protocol.md "HTTP API").
    static func signedPathForms(_ path: String) -> [String] {
        let unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
        let allowed = unreserved.union(CharacterSet(charactersIn: "/"))
        let encoded = path.addingPercentEncoding(withAllowedCharacters: allowed) ?? path
        var forms = encoded == path ? [path] : [path, encoded]
        // `/apps/{id}/rooms/{room}/users/{user}/kick`: a room name holds no `/`, so the user id is
        // everything between the first `/users/` after `/rooms/` and the final `/kick`.
        if path.hasSuffix("/kick"), let rooms = path.range(of: "/rooms/"),
           let users = path.range(of: "/users/", range: rooms.upperBound..<path.endIndex),
           users.upperBound < path.index(path.endIndex, offsetBy: -"/kick".count) {
            let user = path[users.upperBound..<path.index(path.endIndex, offsetBy: -"/kick".count)]
            if user.contains("/"), let prefix = path[..<users.upperBound].addingPercentEncoding(withAllowedCharacters: allowed),
               let segment = user.addingPercentEncoding(withAllowedCharacters: unreserved) {
                forms.append(prefix + segment + "/kick")
            }
        }
        return forms
    }

    /// Checks the Pusher REST signature; returns the failure response, or `nil` when valid.
    private func authenticate(_ request: HTTPRequest, app: RealtimeApp) -> HTTPResponse? {
        var parameters: [String: String] = [:]
        for (name, value) in request.query { parameters[name.lowercased()] = value }
        guard parameters["auth_key"] == app.key else { return .error(401, "unknown auth_key") }
        guard let signature = parameters["auth_signature"] else { return .error(401, "missing auth_signature") }
        guard let timestamp = parameters["auth_timestamp"].flatMap(TimeInterval.init),
              abs(wallClock() - timestamp) <= timestampTolerance else {
            return .error(401, "auth_timestamp missing or more than \(Int(timestampTolerance)) s off")
        }
        if !request.body.isEmpty {
            guard parameters["body_md5"] == Crypto.hex(Crypto.md5(request.body)) else { return .error(401, "body_md5 does not match the body") }
        }
        // libwebsockets hands over the path percent-decoded; a client may have signed it as it
        // sent it, percent-encoded (a room name with `:` or `;`): either form is accepted.
        for path in Self.signedPathForms(request.path) {
            let expected = RESTSignature.sign(method: request.method, path: path, parameters: parameters, secret: app.secret)
            if Crypto.constantTimeEqual(Array(signature.utf8), Array(expected.utf8)) { return nil }
        }
        return .error(401, "invalid auth_signature")
    }
}
