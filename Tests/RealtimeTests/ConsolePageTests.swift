import Dispatch
import Foundation
import Realtime
import RealtimeProtocol
import RealtimeServer
import Spawn
import SystemSupport
import TestSupport
import Testing

/// The operator's console in real headless Chromium (`Tests/peers/console_page.py`, selenium):
/// logged in through its form, it shows a connection made by the Swift client and a room event
/// published through the HTTP API within 1 s, and its publish form reaches the subscribed
/// client. With `CI=true` nothing here is skipped: a missing tool fails.
@Suite(.enabled(if: ChromiumTools.available, "needs chromium, chromedriver and selenium (scripts/setup --test-peers)"))
struct ConsolePageTests {
    static let app = RealtimeApp(id: "1", key: "console-key", secret: "console-secret")
    static let token = "console-page-token-0123456789"

    @Test("Chromium shows the Swift client's connection and an HTTP API room event within 1 s; the page's form reaches the client; the page logs no error", .timeLimit(.minutes(2)))
    func page() throws {
        var options = RealtimeServerOptions(port: 0, apps: [Self.app])
        options.consoleToken = Self.token
        let server = try RealtimeServer(options: options)
        defer { server.shutdown(grace: .zero) }
        let base = "http://127.0.0.1:\(server.port)"
        let screenshot = ProcessInfo.processInfo.environment["CONSOLE_SCREENSHOT"]
            ?? FileManager.default.temporaryDirectory.appendingPathComponent("console-\(getpid()).png").path
        let page = try ChildProcess(
            "/usr/bin/env", ["python3", PythonPeer.directory.appendingPathComponent("console_page.py").path,
                             "--url", base, "--token", Self.token, "--screenshot", screenshot],
            standardInput: .pipe, standardError: .inherit)
        defer { page.signal(SIGKILL) }
        var answered = 0
        /// Sends a command and returns the page's answer line.
        func ask(_ command: String) throws -> String {
            try page.write(command + "\n")
            answered += 1
            return try page.waitForLine(startingAt: answered, timeout: .seconds(20)) { _ in true }
        }
        let ready = try page.waitForLine(timeout: .seconds(60)) { _ in true }
        #expect(ready == "ready")
        guard ready == "ready" else { return }

        var clientOptions = try BirdRealtime.Options(url: server.url(appKey: Self.app.key))
        clientOptions.watchesReachability = false
        clientOptions.deliveryQueue = DispatchQueue(label: "ConsolePageTests.delivery")
        let bird = BirdRealtime(options: clientOptions)
        defer { bird.disconnect() }
        let received = Locked<[String]>([])
        let channel = bird.subscribe("orders")
        channel.bind("from-console") { event in received.withLock { $0.append(event.data ?? "") } }
        bird.connect()
        let deadline = ContinuousClock.now + .seconds(10)
        while !(bird.connectionState == .connected && channel.subscribed), ContinuousClock.now < deadline { usleep(10_000) }
        let socketID = try #require(bird.connection.connectionId)

        let seenConnection = try ask("connection \(socketID)")
        #expect(Self.milliseconds(seenConnection, "seen-connection").map { $0 <= 1000 } == true, "\(seenConnection)")

        let body = Array(#"{"name":"said","room":"chat:1","data":"{\"text\":\"hello\"}"}"#.utf8)
        let signed = RESTSignature.signedParameters(method: "POST", path: "/apps/1/room_events", body: body, key: Self.app.key, secret: Self.app.secret,
                                                    timestamp: Int(Date().timeIntervalSince1970))
        let published = server.api.handle(HTTPRequest(method: "POST", path: "/apps/1/room_events", query: signed.map { ($0.key, $0.value) }, body: body))
        #expect(published.status == 200, "\(published.body)")
        let seenRoomEvent = try ask("room_event chat:1 said")
        #expect(Self.milliseconds(seenRoomEvent, "seen-room-event").map { $0 <= 1000 } == true, "\(seenRoomEvent)")

        let sent = try ask(#"publish orders from-console {"n":1}"#)
        #expect(sent.hasPrefix("published Sent (200)"), "\(sent)")
        let arrived = ContinuousClock.now + .seconds(5)
        while received.withLock({ $0.isEmpty }), ContinuousClock.now < arrived { usleep(10_000) }
        #expect(received.withLock { $0 } == [#"{"n":1}"#])

        #expect(try ask("screenshot") == "screenshot \(screenshot)")
        #expect(FileManager.default.fileExists(atPath: screenshot))
        #expect(try ask("quit") == "errors 0")
    }

    /// The milliseconds of an answer `label MS`, or `nil` (a `timeout …` answer).
    static func milliseconds(_ line: String, _ label: String) -> Int? {
        guard line.hasPrefix(label + " ") else { return nil }
        return Int(line.dropFirst(label.count + 1))
    }
}

/// Whether headless Chromium and its driver are here: always true with `CI=true` (a missing one fails).
enum ChromiumTools {
    static let available: Bool = {
        if ProcessInfo.processInfo.environment["CI"] == "true" { return true }
        return ["/usr/bin/chromium", "/usr/bin/chromedriver"].allSatisfy(FileManager.default.isExecutableFile(atPath:))
    }()
}
