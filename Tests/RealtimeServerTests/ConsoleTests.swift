import Foundation
import Spawn
import SystemSupport
import Testing
import RealtimeProtocol
@testable import RealtimeServer

/// The hub's way: an entry built and recorded only when the log admits it.
private func offer(_ log: ConsoleLog, _ entry: ConsoleEntry) {
    if log.admits(app: entry.app) { log.record(entry) }
}

/// The console's log, sessions and access, as values.
@Suite("The operator's console: log, sessions, access")
struct ConsoleLogTests {
    /// A log on a wall clock the test moves.
    static func log(at clock: Locked<Int64>) -> ConsoleLog {
        ConsoleLog(apps: ["1", "2"], wallMilliseconds: { clock.withLock { $0 } })
    }

    @Test("nothing is recorded until a console watches, and recording stops once the window after its last look has passed")
    func recordsOnlyWhileWatched() {
        let clock = Locked<Int64>(1_000_000)
        let log = Self.log(at: clock)
        offer(log, ConsoleEntry(app: "1", kind: .connect, socketID: "1.1"))
        #expect(!log.isWatched)
        #expect(log.entries(app: "1", after: 0).entries.isEmpty)
        let start = ContinuousClock.now
        log.watch(app: "1", now: start)
        #expect(log.isWatched)
        offer(log, ConsoleEntry(app: "1", kind: .connect, socketID: "1.2"))
        offer(log, ConsoleEntry(app: "2", kind: .connect, socketID: "2.1"))
        let page = log.entries(app: "1", after: 0)
        #expect(page.entries.map { $0.socketID } == ["1.2"])
        #expect(page.entries.first?.seq == 1 && page.entries.first?.at == 1_000_000 && page.next == 1)
        log.sweep(now: start + .seconds(9))
        #expect(log.isWatched)
        log.sweep(now: start + ConsoleLog.watchWindow)
        #expect(!log.isWatched)
        offer(log, ConsoleEntry(app: "1", kind: .disconnect, socketID: "1.2"))
        #expect(log.entries(app: "1", after: 1).entries.isEmpty)
        #expect(log.entries(app: "1", after: 0).entries.count == 1, "what was kept stays for the next console")
        log.watch(app: "1", now: start + .seconds(11))
        #expect(!log.admits(app: "3"), "an app not served is never admitted")
        #expect(!log.admits(app: "2"), "an app no console looks at records nothing")
        log.sweep(now: start + .seconds(21))
        log.sweep(now: start + .seconds(20) + ConsoleLog.keptUnwatched)
        #expect(log.entries(app: "1", after: 0).entries.count == 1, "kept a while after the last look")
        log.sweep(now: start + .seconds(21) + ConsoleLog.keptUnwatched)
        #expect(log.entries(app: "1", after: 0).entries.isEmpty, "then freed")
    }

    @Test("past entriesPerSecond in one second of the wall clock entries are counted as skipped, and the next second records again")
    func samplesABusyApp() {
        let clock = Locked<Int64>(5_000)
        let log = Self.log(at: clock)
        log.watch(app: "1", now: ContinuousClock.now)
        for index in 0..<(ConsoleLog.entriesPerSecond + 50) {
            offer(log, ConsoleEntry(app: "1", kind: .event, channel: "c", event: "e\(index)"))
        }
        let first = log.entries(app: "1", after: 0)
        #expect(first.entries.count == ConsoleLog.entriesPerSecond)
        // The 50 were skipped after the last kept entry: they come with the next entry's page,
        // not on every request before it.
        #expect(log.entries(app: "1", after: first.next).skipped == 0)
        #expect(log.entries(app: "1", after: first.next).skipped == 0)
        clock.withLock { $0 += 1000 }
        offer(log, ConsoleEntry(app: "1", kind: .event, channel: "c", event: "next second"))
        let second = log.entries(app: "1", after: first.next)
        #expect(second.entries.map { $0.event } == ["next second"])
        #expect(second.skipped == 50, "the 50 left out between the two pages, once")
        #expect(log.entries(app: "1", after: first.next).skipped == 50, "the same page asked again says the same")
        let idle = log.entries(app: "1", after: second.next)
        #expect(idle.skipped == 0 && idle.entries.isEmpty && idle.next == second.next)
    }

    @Test("an app keeps its last `capacity` entries; a console paging from an evicted seq resumes at the oldest kept, a seq from another run from the start")
    func boundedRing() {
        let clock = Locked<Int64>(0)
        let log = Self.log(at: clock)
        log.watch(app: "1", now: ContinuousClock.now)
        let total = ConsoleLog.capacity + 300
        for index in 0..<total {
            if index % ConsoleLog.entriesPerSecond == 0 { clock.withLock { $0 += 1000 } }
            offer(log, ConsoleEntry(app: "1", kind: .event, detail: "\(index)"))
        }
        let all = log.entries(app: "1", after: 0)
        #expect(all.entries.count == ConsoleLog.capacity)
        let oldest = UInt64(total - ConsoleLog.capacity + 1)
        let seqs: [UInt64] = all.entries.map { $0.seq }
        #expect(seqs == Array(oldest...UInt64(total)), "oldest first, in order across the wrap")
        let page = log.entries(app: "1", after: 10, limit: 5)
        #expect(page.entries.map { $0.seq } == Array(oldest...(oldest + 4)))
        #expect(page.lost == oldest - 11, "the entries after 10 the ring no longer holds")
        #expect(log.entries(app: "1", after: oldest, limit: 5).lost == 0)
        #expect(log.entries(app: "1", after: UInt64(total + 99)).entries.count == ConsoleLog.capacity)
        let first: [UInt64] = log.entries(app: "1", after: 0, limit: 3).entries.map { $0.seq }
        #expect(first == [UInt64(total - 2), UInt64(total - 1), UInt64(total)], "a console's first request gets the newest")
    }

    @Test("a cursor of an earlier log (another epoch: the log freed and started again, or the node restarted) gets the new log from its start, even when the new log has passed its seq; what the ring no longer holds is counted lost")
    func epochs() {
        let clock = Locked<Int64>(1_000_000)
        let log = Self.log(at: clock)
        let start = ContinuousClock.now
        log.watch(app: "1", now: start)
        for index in 0..<5 { offer(log, ConsoleEntry(app: "1", kind: .event, detail: "old \(index)")) }
        let old = log.entries(app: "1", after: 0)
        #expect(old.next == 5 && !old.epoch.isEmpty)
        #expect(log.entries(app: "1", after: 2, epoch: old.epoch).entries.map(\.seq) == [3, 4, 5], "the same epoch pages on")
        // Nobody looks: the log is freed, and the next one starts again at seq 1.
        log.sweep(now: start + ConsoleLog.watchWindow)
        log.sweep(now: start + ConsoleLog.watchWindow + ConsoleLog.keptUnwatched)
        clock.withLock { $0 += 1000 }
        log.watch(app: "1", now: start + ConsoleLog.watchWindow + ConsoleLog.keptUnwatched)
        for index in 0..<8 { offer(log, ConsoleEntry(app: "1", kind: .event, detail: "new \(index)")) }
        // The old cursor (5) is within the new log's seqs: without the epoch it would skip 1...5.
        let page = log.entries(app: "1", after: old.next, epoch: old.epoch)
        #expect(page.epoch != old.epoch && !page.epoch.isEmpty)
        #expect(page.entries.map(\.detail) == (0..<8).map { "new \($0)" }, "the new log from its start, nothing skipped")
        #expect(page.next == 8 && page.lost == 0)
        #expect(log.entries(app: "1", after: page.next, epoch: page.epoch).entries.isEmpty, "and nothing twice")
        #expect(log.entries(app: "1", after: 5).entries.map(\.seq) == [6, 7, 8], "a console with no epoch pages by seq alone")

        // Once more, with more entries than the ring holds before the console asks again.
        log.sweep(now: start + .seconds(400))
        log.sweep(now: start + .seconds(400) + ConsoleLog.keptUnwatched)
        log.watch(app: "1", now: start + .seconds(400) + ConsoleLog.keptUnwatched)
        let total = ConsoleLog.capacity + 25
        for index in 0..<total {
            if index % ConsoleLog.entriesPerSecond == 0 { clock.withLock { $0 += 1000 } }
            offer(log, ConsoleEntry(app: "1", kind: .event, detail: "third \(index)"))
        }
        let third = log.entries(app: "1", after: page.next, epoch: page.epoch, limit: 200)
        #expect(third.epoch != page.epoch)
        #expect(third.entries.first?.seq == 26 && third.entries.count == 200 && third.next == 225, "from the oldest kept, a page at a time")
        #expect(third.lost == 25, "the 25 the ring let go before the console asked")
        let rest = log.entries(app: "1", after: third.next, epoch: third.epoch)
        #expect(rest.entries.first?.seq == 226 && rest.entries.last?.seq == UInt64(total) && rest.lost == 0)
    }

    @Test("a log page's JSON carries hostile names as they were: quotes, backslashes, control characters, emoji; absent fields as null")
    func logJSON() throws {
        var entry = ConsoleEntry(app: "1", kind: .error, socketID: "1.2", channel: "a\"b\\c\n\u{1}d😀", detail: "</script><b>x</b>")
        entry.seq = 7
        entry.at = 1_764_579_200_000
        let text = OperatorConsole.logJSON(ConsoleLog.Page(entries: [entry, entry], next: 7, skipped: 3))
        let page = try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
        let entries = try #require(page["entries"] as? [[String: Any]])
        #expect(entries.count == 2)
        #expect(entries[0]["channel"] as? String == #"a"b\c\u{a}\u{1}d😀"# && entries[0]["detail"] as? String == "</script><b>x</b>")
        #expect(entries[0]["room"] is NSNull && entries[0]["kind"] as? String == "error" && entries[0]["seq"] as? Int == 7)
        #expect(entries[0]["at"] as? Int == 1_764_579_200_000)
        #expect(page["next"] as? Int == 7 && page["skipped"] as? Int == 3 && page["limit_per_second"] as? Int == ConsoleLog.entriesPerSecond)
        #expect(OperatorConsole.logJSON(ConsoleLog.Page(entries: [], next: 0, skipped: 0)) == #"{"entries":[],"next":0,"skipped":0,"lost":0,"epoch":"","limit_per_second":200}"#)
    }

    @Test("names and texts are cut to maxFieldBytes at a character boundary; control characters are shown as escapes, so no name forges a line")
    func boundedFields() {
        let long = String(repeating: "é", count: 300)
        let entry = ConsoleEntry(app: "1", kind: .error, channel: long, detail: long)
        #expect(entry.channel!.utf8.count <= ConsoleLog.maxFieldBytes && entry.channel!.utf8.count >= ConsoleLog.maxFieldBytes - 1)
        #expect(entry.detail.allSatisfy { $0 == "é" })
        let forged = ConsoleEntry(app: "1", kind: .error, channel: "x\n12:00:00.000 connect\r\u{7F}", userID: "plain")
        #expect(forged.channel == "x\\u{a}12:00:00.000 connect\\u{d}\\u{7f}" && forged.userID == "plain")
    }

    @Test("a session cookie names its scope until it expires; an altered one, another server's, or an expired one names none")
    func sessions() {
        let access = ConsoleAccess(serverToken: "server-token-0123456789", apps: [])
        let session = ConsoleSession(access: access)
        let all = session.cookie(for: .all, now: 1_000)
        #expect(session.scope(ofCookie: all, now: 2_000) == .all)
        let app = session.cookie(for: .app("orders.eu"), now: 1_000)
        #expect(session.scope(ofCookie: app, now: 2_000) == .app("orders.eu"))
        #expect(session.scope(ofCookie: app, now: 1_000 + ConsoleSession.lifetime) == nil, "expired")
        #expect(ConsoleSession(access: ConsoleAccess(serverToken: "other-token-0123456789", apps: [])).scope(ofCookie: all, now: 2_000) == nil,
                "another token, another key")
        #expect(ConsoleSession(access: access).scope(ofCookie: all, now: 2_000) == .all, "another node with the same token takes it")
        #expect(session.expiry(ofCookie: all, now: 2_000) == 1_000 + ConsoleSession.lifetime)
        // The key holds the apps' secrets: an app's token alone cannot sign any session.
        let withApp = ConsoleAccess(serverToken: nil, apps: [RealtimeApp(id: "1", key: "k", secret: "secret-a", consoleToken: "app-token-0123456789")])
        let sameTokenOtherSecret = ConsoleAccess(serverToken: nil, apps: [RealtimeApp(id: "1", key: "k", secret: "secret-b", consoleToken: "app-token-0123456789")])
        let cookie = ConsoleSession(access: withApp).cookie(for: .app("1"), now: 1_000)
        #expect(ConsoleSession(access: sameTokenOtherSecret).scope(ofCookie: cookie, now: 2_000) == nil)
        var parts = app.split(separator: ".").map(String.init)
        parts[1] = Crypto.hex(Array("*".utf8))
        #expect(session.scope(ofCookie: parts.joined(separator: "."), now: 2_000) == nil, "a scope widened by hand")
        parts = all.split(separator: ".").map(String.init)
        parts[2] = String(Int64.max)
        #expect(session.scope(ofCookie: parts.joined(separator: "."), now: 2_000) == nil, "a lifetime lengthened by hand")
        #expect(session.scope(ofCookie: "v1.2a", now: 0) == nil && session.scope(ofCookie: "", now: 0) == nil)
    }

    @Test("the server token opens every app, an app's token that app alone, another token nothing")
    func access() {
        let apps = [RealtimeApp(id: "1", key: "k1", secret: "s1", consoleToken: "app-one-token-0123456"), RealtimeApp(id: "2", key: "k2", secret: "s2")]
        let access = ConsoleAccess(serverToken: "server-token-0123456789", apps: apps)
        #expect(access.isEnabled)
        #expect(access.scope(of: "server-token-0123456789") == .all)
        #expect(access.scope(of: "app-one-token-0123456") == .app("1"))
        #expect(access.scope(of: "app-one-token-012345") == nil && access.scope(of: "") == nil)
        #expect(ConsoleAccess.Scope.app("1").opens("1") && !ConsoleAccess.Scope.app("1").opens("2") && ConsoleAccess.Scope.all.opens("2"))
        #expect(!ConsoleAccess(serverToken: nil, apps: [apps[1]]).isEnabled)
    }

    @Test("a console token shorter than 16 characters, or one given twice, is refused at start; $BIRD_CONSOLE_TOKEN stands for --console-token")
    func options() throws {
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("console-\(getpid()).json")
        try Data(#"{"apps":[{"id":"1","key":"k1","secret":"s1","console_token":"the-same-token-0123456"},{"id":"2","key":"k2","secret":"s2","console_token":"the-same-token-0123456"}]}"#.utf8).write(to: config)
        defer { try? FileManager.default.removeItem(at: config) }
        #expect(throws: RealtimeServerOptions.ParseError.self) { try RealtimeServerOptions(arguments: ["--memory", "--config", config.path]) }
        #expect(throws: RealtimeServerOptions.ParseError.self) {
            try RealtimeServerOptions(arguments: ["--memory", "--app-id", "1", "--app-key", "k", "--app-secret", "s", "--console-token", "short"])
        }
        let options = try RealtimeServerOptions(arguments: ["--memory", "--app-id", "1", "--app-key", "k", "--app-secret", "s"],
                                                environment: ["BIRD_CONSOLE_TOKEN": "from-the-environment-0123"])
        #expect(options.consoleToken == "from-the-environment-0123")
    }
}

/// The console's snapshot of a hub past its list limits.
@Suite("The operator's console: the snapshot's bounds")
struct ConsoleSnapshotTests {
    @Test("past its limits a snapshot lists the first 200 connections, the 200 busiest channels and 50 users of a presence channel, says each list was cut, and keeps the counts whole")
    func limits() throws {
        let app = RealtimeApp(id: "1", key: HubFixture.app.key, secret: HubFixture.app.secret, maxConnections: 1_000, activityTimeout: 30)
        let fixture = HubFixture { $0.apps = [app] }
        let limit = RealtimeHub.consoleListLimit
        let total = limit + 50
        let sockets = (0..<total).map { _ in fixture.connect().1 }
        // 201 channels of one subscriber each, channel-0 with a second; a presence channel of 60 users.
        for (index, socket) in sockets.prefix(limit + 1).enumerated() { fixture.subscribe(socket, "channel-\(index)") }
        fixture.subscribe(sockets[total - 1], "channel-0")
        let users = RealtimeHub.consoleMembersLimit + 10
        for (index, socket) in sockets.suffix(users).enumerated() {
            let data = #"{"user_id":"u\#(index)"}"#
            fixture.subscribe(socket, "presence-crowd", auth: fixture.signer.authorizeSubscription(socketID: socket, channel: "presence-crowd", channelData: data),
                              channelData: data)
        }
        let snapshot = try #require(fixture.hub.consoleSnapshot(appID: app.id))
        #expect(snapshot.connections.count == total && snapshot.connections.list.count == limit && snapshot.connections.truncated)
        #expect(Set(snapshot.connections.list.map(\.socketID)).isSubset(of: Set(sockets)))
        #expect(snapshot.channels.list.count == limit && snapshot.channels.truncated)
        #expect(snapshot.channels.list.prefix(2).map(\.name) == ["presence-crowd", "channel-0"], "busiest first")
        #expect(snapshot.channels.list.prefix(2).map(\.subscribers) == [users, 2])
        let crowd = try #require(snapshot.presence.list.first { $0.channel == "presence-crowd" })
        #expect(crowd.members.count == RealtimeHub.consoleMembersLimit && Set(crowd.members).isSubset(of: Set((0..<users).map { "u\($0)" })))
        #expect(!snapshot.rooms.truncated && snapshot.rooms.list.isEmpty)

        // Within the limits nothing is cut.
        let small = HubFixture()
        let (_, socket) = small.connect()
        small.subscribe(socket, "news")
        let whole = try #require(small.hub.consoleSnapshot(appID: HubFixture.app.id))
        #expect(whole.connections.count == 1 && !whole.connections.truncated && !whole.channels.truncated && !whole.presence.truncated)
        #expect(whole.channels.list.map(\.name) == ["news"])
        #expect(small.hub.consoleSnapshot(appID: "no-such-app") == nil)
    }
}

/// The console on a real server, over real HTTP (curl) and real WebSocket clients.
@Suite("The operator's console on a real server")
struct ConsoleServerTests {
    static let token = "console-token-0123456789"
    static let appToken = "app-two-token-0123456789"
    static let apps = [ServerFixture.app, RealtimeApp(id: "2", key: "app-two", secret: "secret-two", consoleToken: appToken)]

    /// `curl` with `arguments`; the status line, the header fields (names lower-cased) and the body.
    static func curl(_ arguments: [String]) throws -> (status: Int, headers: [String: String], body: String) {
        let result = try ChildProcess.run("/usr/bin/curl", ["-s", "-i"] + arguments, timeout: .seconds(10))
        let (head, body) = ClientModuleTests.split(result.standardOutput)
        let status = head.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        var headers: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (status, headers, body)
    }

    @Test("GET /console: 401 and a login form with nothing of any app without a token; the page, text/html, with the bearer token or the cookie the login sets", .timeLimit(.minutes(1)))
    func access() throws {
        let fixture = try ServerFixture(apps: Self.apps, consoleToken: Self.token)
        let base = "http://127.0.0.1:\(fixture.server.port)/console"
        let refused = try Self.curl([base])
        #expect(refused.status == 401)
        #expect(refused.body.contains("<form") && !refused.body.contains(ServerFixture.app.key) && !refused.body.contains("app-two"))
        #expect(refused.headers["cache-control"] == "no-store" && refused.headers["x-frame-options"] == "DENY")
        #expect(refused.headers["access-control-allow-origin"] == nil)
        let wrong = try Self.curl(["-H", "Authorization: Bearer not-the-token-0123456789", base])
        #expect(wrong.status == 401)
        let page = try Self.curl(["-H", "Authorization: Bearer \(Self.token)", base])
        #expect(page.status == 200 && page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(page.body == ConsolePage.files["index.html"])
        #expect(page.headers["content-security-policy"]?.contains("default-src 'self'") == true)
        let apiRefused = try Self.curl([base + "/api/apps"])
        #expect(apiRefused.status == 401 && !apiRefused.body.contains("app-key"))

        let login = try Self.curl(["--data-urlencode", "token=\(Self.token)", base + "/login"])
        #expect(login.status == 303 && login.headers["location"] == "/console")
        let cookie = try #require(login.headers["set-cookie"])
        #expect(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict") && cookie.contains("Path=/console") && !cookie.contains("Secure"))
        // Over HTTPS (a page served through a proxy that terminates TLS), the cookie is Secure.
        let host = "127.0.0.1:\(fixture.server.port)"
        for header in ["Origin: https://\(host)", "X-Forwarded-Proto: https"] {
            let secure = try Self.curl(["-H", header, "--data-urlencode", "token=\(Self.token)", base + "/login"])
            #expect(secure.status == 303 && secure.headers["set-cookie"]?.hasSuffix("; Secure; Max-Age=\(ConsoleSession.lifetime / 1000)") == true,
                    "\(header): \(secure.headers)")
        }
        let pair = String(cookie.split(separator: ";")[0])
        #expect(try Self.curl(["-H", "Cookie: \(pair)", base]).status == 200)
        let apps = try Self.curl(["-H", "Cookie: other=1; \(pair)", base + "/api/apps"])
        #expect(apps.status == 200 && apps.body.contains(#""key":"app-key""#) && apps.body.contains(#""key":"app-two""#))
        let tampered = pair.replacingOccurrences(of: "v1.2a.", with: "v1.2b.")
        #expect(try Self.curl(["-H", "Cookie: \(tampered)", base]).status == 401)
        let badLogin = try Self.curl(["--data-urlencode", "token=guess-0123456789012345", base + "/login"])
        #expect(badLogin.status == 401 && badLogin.headers["set-cookie"] == nil)
        #expect(try Self.curl([base + "/index.html"]).status == 401, "the page by its file name too")
        let logout = try Self.curl(["-H", "Cookie: \(pair)", "-X", "POST", base + "/logout"])
        #expect(logout.status == 303 && logout.headers["set-cookie"]?.contains("Max-Age=0") == true)
        #expect(try Self.curl(["-H", "Cookie: \(pair)", base + "/api/apps"]).status == 401, "the session ended by the logout is refused after it")
    }

    @Test("an app's own token opens that app alone: its snapshot, log and publish; another app's are 403", .timeLimit(.minutes(1)))
    func appScope() throws {
        let fixture = try ServerFixture(apps: Self.apps, consoleToken: Self.token)
        let base = "http://127.0.0.1:\(fixture.server.port)/console/api"
        let bearer = ["-H", "Authorization: Bearer \(Self.appToken)"]
        let apps = try Self.curl(bearer + [base + "/apps"])
        #expect(apps.status == 200 && apps.body.contains(#""id":"2""#) && !apps.body.contains(#""id":"1""#))
        let own = try Self.curl(bearer + [base + "/app?app=2"])
        #expect(own.status == 200 && !own.body.contains("counters"), "the node's counters carry the other app's traffic")
        #expect(try Self.curl(["-H", "Authorization: Bearer \(Self.token)", base + "/app?app=2"]).body.contains("counters"))
        #expect(try Self.curl(bearer + [base + "/app?app=1"]).status == 403)
        #expect(try Self.curl(bearer + [base + "/log?app=1&after=0"]).status == 403)
        let publish = try Self.curl(bearer + ["-H", "content-type: application/json", "-d", #"{"app":"1","channel":"c","event":"e","data":"{}"}"#, base + "/publish"])
        #expect(publish.status == 403)
    }

    @Test("a client's connection, subscription and a published event show in the log and the snapshot; the form's publish reaches the subscriber through the signed API", .timeLimit(.minutes(1)))
    func liveLogAndPublish() throws {
        let fixture = try ServerFixture(apps: Self.apps, consoleToken: Self.token)
        let base = "http://127.0.0.1:\(fixture.server.port)/console/api"
        let bearer = ["-H", "Authorization: Bearer \(Self.token)"]
        // The log records once a console looks.
        #expect(try Self.curl(bearer + [base + "/log?app=1&after=0"]).status == 200)
        let client = try fixture.connect()
        let established = try #require(client.message("bird:connection_established"))
        let socketID = try #require(try established.decodeData([String: JSONValue].self)["socket_id"]?.string)
        client.send(#"{"event":"bird:subscribe","data":{"channel":"orders"}}"#)
        #expect(client.message("bird_internal:subscription_succeeded") != nil)

        let form = #"{"app":"1","channel":"orders","event":"paid","data":"{\"id\":7}"}"#
        let published = try Self.curl(bearer + ["-H", "content-type: application/json", "-d", form, base + "/publish"])
        #expect(published.status == 200 && published.body.contains(#""status":200"#))
        let event = try #require(client.message("paid"))
        #expect(event.channel == "orders" && event.data == #"{"id":7}"#)
        let room = #"{"app":"1","room":"chat:1","event":"said","data":"{\"text\":\"hi\"}"}"#
        #expect(try Self.curl(bearer + ["-H", "content-type: application/json", "-d", room, base + "/publish"]).status == 200)

        let log = try Self.curl(bearer + [base + "/log?app=1&after=0"])
        let page = try #require(try JSONSerialization.jsonObject(with: Data(log.body.utf8)) as? [String: Any])
        let entries = try #require(page["entries"] as? [[String: Any]])
        let kinds = entries.map { $0["kind"] as? String ?? "" }
        #expect(kinds == ["connect", "subscribe", "event", "room_event"], "\(log.body)")
        #expect(entries[0]["socket_id"] as? String == socketID)
        #expect(entries[1]["channel"] as? String == "orders")
        #expect(entries[2]["event"] as? String == "paid" && (entries[2]["detail"] as? String)?.hasPrefix("1 delivery,") == true)
        #expect(entries[3]["room"] as? String == "chat:1" && entries[3]["event"] as? String == "said")
        #expect(entries.allSatisfy { $0.keys.sorted() == ["at", "channel", "detail", "event", "kind", "room", "seq", "socket_id", "user_id"] })
        #expect(page["next"] as? Int == 4 && page["skipped"] as? Int == 0)
        let epoch = try #require(page["epoch"] as? String)
        let same = try Self.curl(bearer + [base + "/log?app=1&after=2&epoch=\(epoch)"])
        #expect(same.body.contains(#""next":4"#) && same.body.contains(#""kind":"event""#) && !same.body.contains(#""kind":"connect""#), "\(same.body)")
        // A cursor of another epoch (an earlier log): this log from its start, seq 1.
        let other = try Self.curl(bearer + [base + "/log?app=1&after=2&epoch=0"])
        #expect(other.body.contains(#""kind":"connect""#) && other.body.contains(#""epoch":"\#(epoch)""#), "\(other.body)")

        let snapshot = try Self.curl(bearer + [base + "/app?app=1"])
        let value = try #require(try JSONSerialization.jsonObject(with: Data(snapshot.body.utf8)) as? [String: Any])
        let connections = try #require(value["connections"] as? [String: Any])
        #expect(connections["count"] as? Int == 1)
        #expect(((connections["list"] as? [[String: Any]])?.first?["socket_id"] as? String) == socketID)
        let channels = try #require((value["channels"] as? [String: Any])?["list"] as? [[String: Any]])
        #expect(channels.count == 1 && channels[0]["name"] as? String == "orders" && channels[0]["subscribers"] as? Int == 1)
        let counters = try #require(value["counters"] as? [String: Int])
        #expect(counters["events_in"] == 2 && counters["deliveries"].map { $0 >= 3 } == true && counters["connections_opened"] == 1)
    }

    @Test("a POST from another site's page is refused (403); wrong tokens past 10 a second get 429 (30 tried: some second holds 11 of them), a session cookie from that address still opens the page and the API; with no token configured the console is 404", .timeLimit(.minutes(1)))
    func hostileRequests() throws {
        let fixture = try ServerFixture(apps: Self.apps, consoleToken: Self.token)
        let base = "http://127.0.0.1:\(fixture.server.port)/console"
        // Logged in before any guess (a login from a held-back address is refused too).
        let login = try Self.curl(["--data-urlencode", "token=\(Self.token)", base + "/login"])
        let pair = try #require(login.headers["set-cookie"].map { String($0.split(separator: ";")[0]) })
        let crossSite = try Self.curl(["-H", "Authorization: Bearer \(Self.token)", "-H", "Origin: http://attacker.example", "-H", "content-type: application/json",
                                       "-d", #"{"app":"1","channel":"c","event":"e","data":"{}"}"#, base + "/api/publish"])
        #expect(crossSite.status == 403)
        #expect(try Self.curl(["-H", "Origin: http://attacker.example", "--data-urlencode", "token=\(Self.token)", base + "/login"]).status == 403)
        #expect(try Self.curl(bearer(Self.token) + ["-d", "not json", "-H", "content-type: application/json", base + "/api/publish"]).status == 400)
        #expect(try Self.curl(bearer(Self.token) + [base + "/api/nothing"]).status == 404)
        #expect(try Self.curl([base + "/nothing.js"]).status == 404)
        let statuses = try (0..<30).map { index in try Self.curl(["--data-urlencode", "token=wrong-guess-\(index)-0123456789", base + "/login"]).status }
        #expect(statuses.contains(429), "\(statuses)")
        // Wrong bearer tokens count too, per address: another address is not locked out.
        let guesses = try (0..<30).map { index in try Self.curl(bearer("wrong-bearer-\(index)-0123456789") + [base + "/api/apps"]).status }
        #expect(guesses.contains(429), "\(guesses)")
        let other = try Self.curl(["--interface", "127.0.0.2", "--data-urlencode", "token=\(Self.token)", base + "/login"])
        #expect(other.status == 303, "another address logs in meanwhile")
        // A session cookie is no token: from an address held back for its guesses, the page and
        // the API still open with it (each guess followed at once by a request with the cookie).
        let rounds = try (0..<30).map { index in
            (guess: try Self.curl(bearer("wrong-again-\(index)-0123456789") + [base + "/api/apps"]).status,
             page: try Self.curl(["-H", "Cookie: \(pair)", base]).status,
             api: try Self.curl(["-H", "Cookie: \(pair)", base + "/api/apps"]).status)
        }
        #expect(rounds.contains { $0.guess == 429 }, "\(rounds)")
        #expect(rounds.allSatisfy { $0.page == 200 && $0.api == 200 }, "\(rounds)")

        let off = try ServerFixture()
        #expect(try Self.curl(["http://127.0.0.1:\(off.server.port)/console"]).status == 404)
    }

    @Test("the snapshot is read at most 4 times a second per app however many ask: 40 requests at once and 40 one after another share a few reads", .timeLimit(.minutes(1)))
    func snapshotReads() throws {
        let fixture = try ServerFixture(apps: Self.apps, consoleToken: Self.token)
        let url = "http://127.0.0.1:\(fixture.server.port)/console/api/app?app=1"
        func reads(_ answers: String) -> [Int64] {
            answers.split(separator: "\n").compactMap { line in
                (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["at"] as? Int64
            }
        }
        let started = ContinuousClock.now
        var seen = reads(try Self.curl(bearer(Self.token) + [url]).body + "\n")
        try #require(seen.count == 1, "the first answer: \(seen)")
        Thread.sleep(forTimeInterval: 0.3) // the cached one is stale: the next request reads
        let together = try ChildProcess.run("/usr/bin/curl", ["-s", "-Z", "--parallel-max", "40", "-w", "\\n"] + bearer(Self.token)
                                            + Array(repeating: url, count: 40), timeout: .seconds(20))
        seen += reads(together.standardOutput)
        for _ in 0..<40 { seen += reads(try Self.curl(bearer(Self.token) + [url]).body + "\n") }
        let elapsed = ContinuousClock.now - started
        #expect(seen.count == 81, "every request answered with a snapshot")
        let distinct = Set(seen).count
        let allowed = Int(elapsed / .milliseconds(1000 / OperatorConsole.snapshotsPerSecond)) + 1
        #expect(distinct >= 2 && distinct <= allowed, "\(distinct) reads in \(elapsed) (at most \(allowed))")
    }

    func bearer(_ token: String) -> [String] { ["-H", "Authorization: Bearer \(token)"] }
}

/// The console's page and modules as embedded, and their own tests.
@Suite("The operator's console: its files")
struct ConsoleFilesTests {
    static let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Clients/console").standardizedFileURL

    @Test("the embedded files are Clients/console's html, css and js as they are (the EmbedClient plugin), each served with its type")
    func embedded() throws {
        let names = try FileManager.default.contentsOfDirectory(atPath: Self.sources.path)
            .filter { $0.hasSuffix(".html") || $0.hasSuffix(".css") || $0.hasSuffix(".js") }.sorted()
        #expect(names.contains("index.html") && names.contains("console.js"))
        #expect(ConsolePage.files.keys.sorted() == names)
        for name in names {
            #expect(ConsolePage.files[name] == (try String(contentsOf: Self.sources.appendingPathComponent(name), encoding: .utf8)), "\(name) differs")
        }
        #expect(ConsolePage.contentType(of: "index.html") == "text/html; charset=utf-8")
        #expect(ConsolePage.contentType(of: "console.css") == "text/css; charset=utf-8")
        #expect(ConsolePage.contentType(of: "model.js") == "text/javascript; charset=utf-8")
    }

    @Test("its Node tests pass (rates, chart points, the log's bounds and filters, polling under a fake clock)", .enabled(if: BrowserClientTools.available), .timeLimit(.minutes(1)))
    func nodeTests() throws {
        let run = try ChildProcess.run("/usr/bin/node", ["--test", "test/"], workingDirectory: Self.sources.path, timeout: .seconds(50))
        let output = run.standardOutput + run.standardError
        #expect(run.status == 0, "\(output.suffix(3000))")
        let passed = output.split(separator: "\n").first { $0.hasPrefix("# pass ") }.flatMap { Int($0.split(separator: " ").last ?? "") }
        #expect((passed ?? 0) >= 20, "\(output.suffix(2000))")
    }
}
