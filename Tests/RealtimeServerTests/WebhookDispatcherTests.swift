import Foundation
import RealtimeServer
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
}
