import Foundation
import RealtimeServer
import TestSupport
import Testing

@Suite("Webhook dispatcher")
struct WebhookDispatcherTests {
    @Test("with the backend down the queue stays at its limit, drops are counted, and batches are given up after their tries")
    func boundedWhenDown() throws {
        // A port nobody listens on: every request fails at once.
        var configuration = WebhookDispatcher.Configuration()
        configuration.maxQueued = 10
        configuration.maxBatch = 5
        configuration.maxAttempts = 2
        configuration.firstRetryDelay = .milliseconds(50)
        let dispatcher = WebhookDispatcher(configuration: configuration)
        let app = RealtimeApp(id: "1", key: "k", secret: "s", webhookURL: "http://127.0.0.1:1/hook")
        for index in 0..<50 { dispatcher.enqueue(WebhookEvent(name: "channel_occupied", channel: "c\(index)"), for: app) }
        #expect(dispatcher.queued == 10)
        #expect(dispatcher.counts.dropped == 40)
        let deadline = ContinuousClock.now + .seconds(10)
        while dispatcher.queued > 0, ContinuousClock.now < deadline { usleep(20_000) }
        #expect(dispatcher.queued == 0)
        #expect(dispatcher.counts.failed == 10 && dispatcher.counts.delivered == 0)
        #expect(dispatcher.counts.requests == 4, "two batches of five, two tries each")
    }

    @Test("an app without a webhook URL queues nothing")
    func noURL() {
        let dispatcher = WebhookDispatcher()
        dispatcher.enqueue(WebhookEvent(name: "channel_occupied", channel: "c"), for: RealtimeApp(id: "1", key: "k", secret: "s"))
        #expect(dispatcher.queued == 0 && dispatcher.counts == WebhookDispatcher.Counts())
    }

    @Test("membership churn filling its queue does not drop message events: the two classes queue apart")
    func queuesByClass() {
        var configuration = WebhookDispatcher.Configuration()
        configuration.maxQueued = 10
        configuration.maxAttempts = 1
        let dispatcher = WebhookDispatcher(configuration: configuration)
        let app = RealtimeApp(id: "1", key: "k", secret: "s", webhookURL: "http://127.0.0.1:1/hook")
        for index in 0..<50 { dispatcher.enqueue(WebhookEvent(name: "room_member_added", room: "r", userID: "u\(index)"), for: app) }
        for index in 0..<5 { dispatcher.enqueue(WebhookEvent(name: "room_event", room: "r", event: "e", data: "{}", id: UInt64(index)), for: app) }
        #expect(dispatcher.counts.dropped == 40)
        #expect(dispatcher.queued == 15)
    }

    @Test(
        "an endpoint that never answers, or streams an endless body, gets one request at a time, each ended at the deadline",
        .enabled(if: PythonPeer.isAvailable, "needs python3"),
        arguments: ["hang", "drip"])
    func hangingEndpoint(mode: String) throws {
        let endpoint = try PythonPeer.start("webhook_hang.py", [mode])
        let port = try #require(endpoint.lines(atLeast: 1).first?.split(separator: " ").last.map(String.init))
        var configuration = WebhookDispatcher.Configuration()
        configuration.timeout = .milliseconds(700)
        configuration.firstRetryDelay = .milliseconds(100)
        configuration.maxAttempts = 3
        let dispatcher = WebhookDispatcher(configuration: configuration)
        let app = RealtimeApp(id: "1", key: "k", secret: "s", webhookURL: "http://127.0.0.1:\(port)/hook")
        dispatcher.enqueue(WebhookEvent(name: "channel_occupied", channel: "c"), for: app)
        let started = ContinuousClock.now
        while dispatcher.counts.failed == 0, ContinuousClock.now - started < .seconds(15) { usleep(50_000) }
        #expect(dispatcher.counts.failed == 1 && dispatcher.counts.requests == 3)
        let counts = endpoint.lines(atLeast: 2).dropFirst().compactMap { try? JSONDecoder().decode([String: Int].self, from: Data($0.utf8)) }
        #expect(counts.map { $0["open"] ?? 0 }.max() == 1, "never two requests at once: \(counts)")
        #expect(ContinuousClock.now - started < .seconds(6), "each request ended at its 0.7 s deadline")
    }
}
