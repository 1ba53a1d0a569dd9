import Foundation
import RealtimeProtocol
import Synchronization
import SystemSupport
import WebSocket

/// The console's page and modules (`Clients/console`), embedded at build time by the
/// `EmbedClient` plugin (`ConsolePage+Files.swift`).
public enum ConsolePage {
    /// The content type of a served file, by its extension.
    static func contentType(of name: String) -> String {
        if name.hasSuffix(".html") { return "text/html; charset=utf-8" }
        if name.hasSuffix(".css") { return "text/css; charset=utf-8" }
        return "text/javascript; charset=utf-8"
    }
}

/// The operator's console: `/console` on the server's port, as Pusher's debug console and
/// Centrifugo's admin page: an app's connections, channels, rooms and presence members now, a
/// live log, charts of the node's counters, and a form that publishes through the server's own
/// signed HTTP API.
///
/// - `GET /console`: the page (`text/html`) with a token (`Authorization: Bearer TOKEN`) or
///   the session cookie; without, 401 and a login form, nothing of any app.
/// - `POST /console/login` (form field `token`): sets the session cookie (`HttpOnly`,
///   `SameSite=Strict`, `Path=/console`, `Secure` over HTTPS) and redirects to the page; `POST /console/logout`
///   clears it and ends the session on this node. At most `failedTokensPerSecond` wrong tokens
///   a second are taken from one address, at login or as bearer tokens (429 past, for it alone).
/// - `GET /console/api/apps`, `GET /console/api/app?app=ID`,
///   `GET /console/api/log?app=ID&after=SEQ&epoch=EPOCH` (the last page's `next` and `epoch`):
///   JSON (`ConsoleSnapshot`, `ConsoleLog.Page`); `POST /console/api/publish` (JSON
///   `{app, channel | room, event, data}`): signed with the app's secret and handed to
///   `HTTPAPI` as any backend's request.
/// - `GET /console/NAME`: the page's modules and style (no data in them).
///
/// Every answer is `Cache-Control: no-store` and same-origin only (`Content-Security-Policy:
/// default-src 'self'; frame-ancestors 'none'`, no CORS header); a `POST` whose `Origin` is
/// another site's is refused (403). The console is off (404 for all of it) unless a token is
/// configured (`ConsoleAccess`).
public final class OperatorConsole: Sendable {
    /// The path everything is under.
    public static let prefix = "/console"
    /// Snapshots read a second per app at most: each console's page asks twice a second, so a
    /// connection shows within 750 ms of its handshake plus a request's time.
    public static let snapshotsPerSecond = 4
    /// Most log entries one answer carries (the rest come at the next request).
    public static let maxLogEntries = 200
    /// Wrong tokens (a login's or a bearer's) taken from one address a second; past it, 429
    /// for that address alone.
    public static let failedTokensPerSecond = 10
    /// Addresses whose wrong tokens are counted at once (more: the counts start again).
    public static let maxCountedAddresses = 4096
    /// Most sessions ended by a logout remembered until they expire (more: the oldest go).
    public static let maxEndedSessions = 4096

    private let access: ConsoleAccess
    private let session: ConsoleSession
    private let hub: RealtimeHub
    private let api: HTTPAPI
    /// Wrong tokens by remote address in the current second.
    private let failedTokens = Locked((second: Int64(-1), counts: [String: Int]()))
    /// Session cookies ended by a logout on this node, with their expiry.
    private let endedSessions = Locked([String: Int64]())
    /// The last snapshot of each app, when it was read, and whether a request is reading the
    /// next: at most `snapshotsPerSecond` reads a second per app, one at a time, whatever the
    /// number of consoles and of threads answering them (only an app's first read may be made by
    /// several requests at once: there is nothing to answer the others with yet).
    private let snapshots = Locked([String: (at: ContinuousClock.Instant, snapshot: ConsoleSnapshot, reading: Bool)]())
    private let node: String?
    private let started = ContinuousClock.now

    /// Creates the console of `hub`, publishing through `api`.
    ///
    /// - Parameters:
    ///   - access: the tokens and their apps.
    ///   - hub: the hub shown.
    ///   - api: the HTTP API the publish form goes through.
    ///   - node: the node's name (`--node`), shown, or `nil`.
    public init(access: ConsoleAccess, hub: RealtimeHub, api: HTTPAPI, node: String? = nil) {
        self.access = access
        self.session = ConsoleSession(access: access)
        self.hub = hub
        self.api = api
        self.node = node
    }

    /// The answer to a request under `/console`, or `nil` for another path.
    public func response(to request: HTTPServerRequest) -> HTTPServerResponse? {
        let path = request.path
        guard path == Self.prefix || path.hasPrefix(Self.prefix + "/") else { return nil }
        guard access.isEnabled else { return Self.answer(404, text: "the console is off: start the server with --console-token") }
        let now = hub.wallMilliseconds()
        let rest = String(path.dropFirst(Self.prefix.count))
        switch (request.method, rest) {
        case ("POST", "/login"):
            return login(request, now: now)
        case ("POST", "/logout"):
            guard isSameOrigin(request) else { return Self.answer(403, text: "a console request from another site") }
            if let cookie = sessionCookie(of: request), let expires = session.expiry(ofCookie: cookie, now: now) {
                endedSessions.withLock { ended in
                    ended = ended.filter { $0.value > now }
                    if ended.count >= Self.maxEndedSessions, let oldest = ended.min(by: { $0.value < $1.value }) { ended[oldest.key] = nil }
                    ended[cookie] = expires
                }
            }
            return Self.redirect(cookie: "\(ConsoleSession.cookieName)=; \(Self.cookieAttributes(request)); Max-Age=0")
        case ("GET", ""), ("GET", "/"), ("HEAD", ""), ("HEAD", "/"), ("GET", "/index.html"):
            if givesToken(request), isOverLimit(request, now: now) { return Self.answer(429, text: "too many wrong tokens from this address this second: try again") }
            guard scope(of: request, now: now) != nil else { return Self.loginPage(status: 401, message: nil) }
            return file("index.html")
        case ("GET", "/favicon.ico"):
            // No icon: answered, so a browser's automatic request logs no error.
            return HTTPServerResponse(status: 204, headers: Self.securityHeaders)
        case ("GET", let name) where !name.hasPrefix("/api/"):
            return file(String(name.dropFirst()))
        default:
            guard rest.hasPrefix("/api/") else { return Self.answer(405, text: "not a console request") }
            if givesToken(request), isOverLimit(request, now: now) { return Self.json(429, #"{"error":"too many wrong tokens from this address this second"}"#) }
            guard let scope = scope(of: request, now: now) else { return Self.json(401, #"{"error":"log in to the console"}"#) }
            return api(request, route: String(rest.dropFirst(5)), scope: scope)
        }
    }

    /// Whether the request gives a token (a bearer one; the login form's is checked in `login`):
    /// only those are held back at an address's limit. A session cookie is not guessed (it is
    /// signed), so someone sharing the operator's address (a proxy's) cannot lock them out.
    private func givesToken(_ request: HTTPServerRequest) -> Bool {
        request.header("authorization")?.lowercased().hasPrefix("bearer ") == true
    }

    /// Whether the request's address gave `failedTokensPerSecond` wrong tokens this second.
    private func isOverLimit(_ request: HTTPServerRequest, now: Int64) -> Bool {
        failedTokens.withLock { state in
            if state.second != now / 1000 { state = (now / 1000, [:]) }
            return state.counts[request.remoteAddress, default: 0] >= Self.failedTokensPerSecond
        }
    }

    /// Counts a wrong token from the request's address.
    private func countFailure(_ request: HTTPServerRequest, now: Int64) {
        failedTokens.withLock { state in
            if state.second != now / 1000 || state.counts.count >= Self.maxCountedAddresses { state = (now / 1000, [:]) }
            state.counts[request.remoteAddress, default: 0] += 1
        }
    }

    /// The request's session cookie value, if it sends one.
    private func sessionCookie(of request: HTTPServerRequest) -> String? {
        guard let cookies = request.header("cookie") else { return nil }
        for pair in cookies.split(separator: ";") {
            let parts = pair.split(separator: "=", maxSplits: 1)
            if parts.count == 2, parts[0].trimmingCharacters(in: .whitespaces) == ConsoleSession.cookieName {
                return String(parts[1]).trimmingCharacters(in: .whitespaces)
            }
        }
        return nil
    }

    // MARK: - Access

    /// The scope of the request's bearer token or session cookie, if either is valid (a wrong
    /// bearer token counts toward its address's limit; a session ended by a logout is no
    /// longer valid on this node).
    func scope(of request: HTTPServerRequest, now: Int64) -> ConsoleAccess.Scope? {
        if let authorization = request.header("authorization"), authorization.lowercased().hasPrefix("bearer ") {
            let scope = access.scope(of: String(authorization.dropFirst(7)).trimmingCharacters(in: .whitespaces))
            if scope == nil { countFailure(request, now: now) }
            return scope
        }
        guard let cookie = sessionCookie(of: request), endedSessions.withLock({ $0[cookie] == nil }) else { return nil }
        return session.scope(ofCookie: cookie, now: now)
    }

    /// Whether a state-changing request comes from the console's own page: no `Origin` (not a
    /// browser's cross-site request), or one whose host is the request's `Host`.
    func isSameOrigin(_ request: HTTPServerRequest) -> Bool {
        guard let origin = request.header("origin") else { return true }
        guard let host = request.header("host") else { return false }
        return origin == "http://\(host)" || origin == "https://\(host)"
    }

    private func login(_ request: HTTPServerRequest, now: Int64) -> HTTPServerResponse {
        guard isSameOrigin(request) else { return Self.answer(403, text: "a console request from another site") }
        let fields = Self.formFields(request.body)
        guard let token = fields["token"], !token.isEmpty else { return Self.loginPage(status: 400, message: "Give the console's token.") }
        guard !isOverLimit(request, now: now) else { return Self.answer(429, text: "too many wrong tokens from this address this second: try again") }
        guard let scope = access.scope(of: token) else {
            countFailure(request, now: now)
            return Self.loginPage(status: 401, message: "That token opens nothing here.")
        }
        let cookie = session.cookie(for: scope, now: now)
        return Self.redirect(cookie: "\(ConsoleSession.cookieName)=\(cookie); \(Self.cookieAttributes(request)); Max-Age=\(ConsoleSession.lifetime / 1000)")
    }

    /// The session cookie's attributes: `HttpOnly`, `SameSite=Strict`, the console's path, and
    /// `Secure` when the request came over HTTPS (RFC 6265 §4.1.2.5): its `Origin` is an
    /// `https://` one, or a proxy in front says so (`X-Forwarded-Proto: https`). The server
    /// itself speaks plain HTTP, so a proxy that terminates TLS is how a page is served over it.
    static func cookieAttributes(_ request: HTTPServerRequest) -> String {
        let forwarded = request.header("x-forwarded-proto")?.split(separator: ",").first?.trimmingCharacters(in: .whitespaces).lowercased()
        let secure = request.header("origin")?.lowercased().hasPrefix("https://") == true || forwarded == "https"
        return "Path=\(prefix); HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "")
    }

    // MARK: - The JSON API

    private func api(_ request: HTTPServerRequest, route: String, scope: ConsoleAccess.Scope) -> HTTPServerResponse {
        switch (request.method, route) {
        case ("GET", "apps"):
            struct App: Encodable { var id: String, key: String, connections: Int }
            struct Node: Encodable { var id: String?, uptimeSeconds: Int
                enum CodingKeys: String, CodingKey { case id, uptimeSeconds = "uptime_seconds" }
            }
            struct Apps: Encodable { var node: Node, apps: [App] }
            let counts = hub.connectionCounts()
            let apps = hub.apps.filter { scope.opens($0.id) }.map { App(id: $0.id, key: $0.key, connections: counts[$0.id, default: 0]) }
            return Self.encoded(Apps(node: Node(id: node, uptimeSeconds: Int((ContinuousClock.now - started).components.seconds)), apps: apps))
        case ("GET", "app"):
            guard let app = request.queryValue("app"), scope.opens(app) else { return Self.json(403, #"{"error":"not an app of this console"}"#) }
            guard var snapshot = snapshot(of: app) else { return Self.json(404, #"{"error":"no such app"}"#) }
            // The node's counters carry every app's traffic: not for one app's session on a
            // node that serves others.
            if scope != .all, hub.apps.count > 1 { snapshot.counters = nil }
            return Self.encoded(snapshot)
        case ("GET", "log"):
            guard let app = request.queryValue("app"), scope.opens(app), hub.app(id: app) != nil else { return Self.json(403, #"{"error":"not an app of this console"}"#) }
            hub.console.watch(app: app, now: hub.now())
            let after = request.queryValue("after").flatMap { UInt64($0) } ?? 0
            let page = hub.console.entries(app: app, after: after, epoch: request.queryValue("epoch"), limit: Self.maxLogEntries)
            return Self.json(200, Self.logJSON(page))
        case ("POST", "publish"):
            guard isSameOrigin(request) else { return Self.json(403, #"{"error":"a console request from another site"}"#) }
            return publish(request.body, scope: scope)
        default:
            return Self.json(404, #"{"error":"no such console request"}"#)
        }
    }

    /// The app's snapshot, read at most `snapshotsPerSecond` times a second
    /// (`RealtimeHub.consoleSnapshot` holds the hub's lock), shared by every console; asking for
    /// it keeps the app's log recording.
    private func snapshot(of app: String) -> ConsoleSnapshot? {
        let now = hub.now()
        hub.console.watch(app: app, now: now)
        // The cached one while it is fresh or another request reads the next; else this one reads.
        let cached: ConsoleSnapshot? = snapshots.withLock { cache in
            guard let entry = cache[app] else { return nil }
            if entry.reading || now - entry.at < .milliseconds(1000 / Self.snapshotsPerSecond) { return entry.snapshot }
            cache[app]?.reading = true
            return nil
        }
        if let cached { return cached }
        let snapshot = hub.consoleSnapshot(appID: app)
        snapshots.withLock { $0[app] = snapshot.map { (now, $0, false) } }
        return snapshot
    }

    /// A publish from the console's form: signed with the app's secret and handed to the HTTP
    /// API, as any backend's `POST /apps/ID/events` or `/room_events`.
    private func publish(_ body: [UInt8], scope: ConsoleAccess.Scope) -> HTTPServerResponse {
        struct Form: Decodable { var app: String, channel: String?, room: String?, event: String, data: String }
        guard let form = try? JSONDecoder().decode(Form.self, from: Data(body)) else {
            return Self.json(400, #"{"error":"expected {app, channel or room, event, data}"}"#)
        }
        guard scope.opens(form.app), let app = hub.app(id: form.app) else { return Self.json(403, #"{"error":"not an app of this console"}"#) }
        let path: String
        let payload: [String: String]
        switch (form.channel, form.room) {
        case (let channel?, nil): (path, payload) = ("/apps/\(app.id)/events", ["name": form.event, "channel": channel, "data": form.data])
        case (nil, let room?): (path, payload) = ("/apps/\(app.id)/room_events", ["name": form.event, "room": room, "data": form.data])
        default: return Self.json(400, #"{"error":"give a channel or a room, not both"}"#)
        }
        guard let json = try? JSONSerialization.data(withJSONObject: payload, options: [.sortedKeys]) else {
            return Self.json(400, #"{"error":"cannot encode the event"}"#)
        }
        let bytes = Array(json)
        let signed = RESTSignature.signedParameters(method: "POST", path: path, body: bytes, key: app.key, secret: app.secret,
                                                    timestamp: Int(hub.wallMilliseconds() / 1000))
        let answer = api.handle(HTTPRequest(method: "POST", path: path, query: signed.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, body: bytes))
        struct Result: Encodable { var status: Int, body: String }
        return Self.encoded(Result(status: answer.status, body: answer.body), status: answer.status)
    }

    /// `ConsoleLog.Page` as the page reads it, written by hand: the log is what a console asks
    /// for most, and `JSONEncoder` cost a service loop about a millisecond a page of entries.
    static func logJSON(_ page: ConsoleLog.Page) -> String {
        var output = #"{"entries":["#
        output.reserveCapacity(64 + page.entries.count * 160)
        func member(_ name: String, _ value: String?) {
            output += #","\#(name)":"#
            if let value { RealtimeMessage.appendJSONString(value, to: &output) } else { output += "null" }
        }
        for (index, entry) in page.entries.enumerated() {
            output += index == 0 ? #"{"seq":"# : #",{"seq":"#
            output += String(entry.seq)
            output += #","at":"#
            output += String(entry.at)
            member("kind", entry.kind.rawValue)
            member("socket_id", entry.socketID)
            member("channel", entry.channel)
            member("room", entry.room)
            member("user_id", entry.userID)
            member("event", entry.event)
            member("detail", entry.detail)
            output += "}"
        }
        output += #"],"next":\#(page.next),"skipped":\#(page.skipped),"lost":\#(page.lost),"epoch":"#
        RealtimeMessage.appendJSONString(page.epoch, to: &output)
        output += #","limit_per_second":\#(ConsoleLog.entriesPerSecond)}"#
        return output
    }

    // MARK: - Answers

    /// Headers of every console answer: never cached, never framed, same origin only.
    static let securityHeaders = [
        HTTPHeader(name: "cache-control", value: "no-store"),
        HTTPHeader(name: "content-security-policy", value: "default-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'"),
        HTTPHeader(name: "x-frame-options", value: "DENY"),
        HTTPHeader(name: "x-content-type-options", value: "nosniff"),
        HTTPHeader(name: "referrer-policy", value: "same-origin"),
    ]

    private func file(_ name: String) -> HTTPServerResponse {
        guard let text = ConsolePage.files[name] else { return Self.answer(404, text: "no such file of the console") }
        return HTTPServerResponse(status: 200, headers: [HTTPHeader(name: "content-type", value: ConsolePage.contentType(of: name))] + Self.securityHeaders,
                                  body: Array(text.utf8))
    }

    static func answer(_ status: Int, text: String) -> HTTPServerResponse {
        HTTPServerResponse(status: status, headers: [HTTPHeader(name: "content-type", value: "text/plain; charset=utf-8")] + securityHeaders, body: Array(text.utf8))
    }

    static func json(_ status: Int, _ text: String) -> HTTPServerResponse {
        HTTPServerResponse(status: status, headers: [HTTPHeader(name: "content-type", value: "application/json")] + securityHeaders, body: Array(text.utf8))
    }

    static func encoded(_ value: some Encodable, status: Int = 200) -> HTTPServerResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        guard let data = try? encoder.encode(value) else { return json(500, #"{"error":"cannot encode the answer"}"#) }
        return HTTPServerResponse(status: status, headers: [HTTPHeader(name: "content-type", value: "application/json")] + securityHeaders, body: Array(data))
    }

    static func redirect(cookie: String) -> HTTPServerResponse {
        HTTPServerResponse(status: 303, headers: [
            HTTPHeader(name: "location", value: prefix),
            HTTPHeader(name: "set-cookie", value: cookie),
            HTTPHeader(name: "content-type", value: "text/plain; charset=utf-8"),
        ] + securityHeaders, body: Array("see \(prefix)".utf8))
    }

    /// The login form (nothing of any app in it).
    static func loginPage(status: Int, message: String?) -> HTTPServerResponse {
        let note = message.map { "<p class=\"login-error\">\($0)</p>" } ?? ""
        let html = """
        <!doctype html>
        <html lang="en"><head><meta charset="utf-8"><title>Realtime console: log in</title>
        <link rel="stylesheet" href="\(prefix)/console.css"><link rel="icon" href="\(prefix)/favicon.ico"></head>
        <body class="login"><main><h1>Realtime console</h1>\(note)
        <form method="post" action="\(prefix)/login"><label>Token <input type="password" name="token" autocomplete="current-password" autofocus></label>
        <button type="submit">Log in</button></form></main></body></html>
        """
        return HTTPServerResponse(status: status, headers: [HTTPHeader(name: "content-type", value: "text/html; charset=utf-8")] + securityHeaders, body: Array(html.utf8))
    }

    /// The fields of an `application/x-www-form-urlencoded` body (`+` as space, percent-decoded);
    /// a body over 4 KiB gives none.
    static func formFields(_ body: [UInt8]) -> [String: String] {
        guard body.count <= 4096 else { return [:] }
        var fields: [String: String] = [:]
        for pair in String(decoding: body, as: UTF8.self).split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ text: Substring) -> String? { text.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let name = parts.first.flatMap(decode) else { continue }
            fields[name] = parts.count > 1 ? decode(parts[1]) ?? "" : ""
        }
        return fields
    }
}
