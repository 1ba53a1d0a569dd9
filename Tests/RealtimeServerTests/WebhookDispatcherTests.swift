import Foundation
import Glibc
@testable import RealtimeServer
import TestSupport
import Testing

/// A loopback port that takes connections into its backlog and never answers: a request to it
/// stays in flight until the dispatcher's deadline, so the queue's content is known meanwhile.
final class SilentListener {
    let fd: Int32
    let port: Int

    init() throws {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(descriptor, 64) == 0 else {
            close(descriptor)
            throw POSIXError(.EADDRINUSE)
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
        fd = descriptor
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { close(fd) }
}

@Suite("Webhook dispatcher")
struct WebhookDispatcherTests {
    @Test("with the backend down the queue stays at its limit, drops are counted, and batches are given up after their tries")
    func boundedWhenDown() throws {
        // A backend that never answers: every try ends at the 300 ms deadline.
        let silent = try SilentListener()
        var configuration = WebhookDispatcher.Configuration()
        configuration.maxQueued = 10
        configuration.maxBatch = 5
        configuration.maxAttempts = 2
        configuration.firstRetryDelay = .milliseconds(50)
        configuration.timeout = .milliseconds(300)
        let dispatcher = WebhookDispatcher(configuration: configuration)
        let app = RealtimeApp(id: "1", key: "k", secret: "s", webhookURL: "http://127.0.0.1:\(silent.port)/hook")
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
    func queuesByClass() throws {
        let silent = try SilentListener()
        var configuration = WebhookDispatcher.Configuration()
        configuration.maxQueued = 10
        configuration.maxAttempts = 1
        let dispatcher = WebhookDispatcher(configuration: configuration)
        let app = RealtimeApp(id: "1", key: "k", secret: "s", webhookURL: "http://127.0.0.1:\(silent.port)/hook")
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

extension WebhookDispatcherTests {
    @Test("with the backend silent, 10,000 room events of 10 KB hold at most maxQueuedBytes: the rest are dropped and counted (issue 30, finding 11)")
    func boundedInBytes() throws {
        let silent = try SilentListener()
        var configuration = WebhookDispatcher.Configuration()
        configuration.timeout = .seconds(30)
        let dispatcher = WebhookDispatcher(configuration: configuration)
        defer { dispatcher.stop() }
        let app = RealtimeApp(id: "1", key: "k", secret: "s", webhookURL: "http://127.0.0.1:\(silent.port)/hook")
        let data = #"{"text":"\#(String(repeating: "x", count: 10_000))"}"#
        for index in 0..<10_000 {
            dispatcher.enqueue(WebhookEvent(name: "room_event", room: "chat:1", event: "m", data: data, id: UInt64(index + 1), at: 0), for: app)
        }
        #expect(dispatcher.queuedBytes <= configuration.maxQueuedBytes)
        #expect(dispatcher.queuedBytes > configuration.maxQueuedBytes - 11_000, "filled to the bound")
        #expect(dispatcher.queued + dispatcher.counts.dropped == 10_000)
        #expect(dispatcher.counts.dropped > 9_000)
    }

    @Test(
        "200,000 events queued behind a silent backend cost each one the same: the queue is never copied per event (issue 47, item 2: quadratic before, hours for this many)",
        .timeLimit(.minutes(1)))
    func constantCostPerEvent() throws {
        let silent = try SilentListener()
        var configuration = WebhookDispatcher.Configuration()
        configuration.maxQueued = 200_000
        configuration.maxQueuedBytes = 1 << 30
        configuration.timeout = .seconds(30)
        let dispatcher = WebhookDispatcher(configuration: configuration)
        defer { dispatcher.stop() }
        let app = RealtimeApp(id: "1", key: "k", secret: "s", webhookURL: "http://127.0.0.1:\(silent.port)/hook")
        for index in 0..<200_000 {
            dispatcher.enqueue(WebhookEvent(name: "channel_occupied", channel: "fresh-\(index)"), for: app)
        }
        #expect(dispatcher.queued == 200_000 && dispatcher.counts.dropped == 0)
    }
}

@Suite("Webhook queue")
struct WebhookQueueTests {
    static let app = RealtimeApp(id: "1", key: "k", secret: "s", webhookURL: "http://127.0.0.1:1/hook")

    @Test("events leave in the order they came, through batches taken and the storage compacted, and the byte count follows them")
    func orderThroughCompaction() {
        var queue = WebhookQueue(app: Self.app)
        var next = 0, taken: [String] = []
        for round in 0..<50 {
            for _ in 0..<(round % 7 == 0 ? 500 : 120) {
                let admitted = queue.admit(WebhookEvent(name: "channel_occupied", channel: "c\(next)"), maxEvents: 10_000, maxBytes: 1 << 30)
                #expect(admitted)
                next += 1
            }
            let batch = queue.head(100)
            taken += batch.compactMap(\.channel)
            queue.removeHead(batch.count)
            let waiting = queue.head(.max)
            #expect(queue.bytes == waiting.reduce(0) { $0 + $1.size } && queue.count == waiting.count)
        }
        while queue.count > 0 {
            let batch = queue.head(100)
            taken += batch.compactMap(\.channel)
            queue.removeHead(batch.count)
        }
        #expect(taken == (0..<next).map { "c\($0)" })
        #expect(queue.bytes == 0)
    }

    @Test("a full queue refuses the newest event, by count and by bytes, and keeps what it holds")
    func refusesNewest() {
        var queue = WebhookQueue(app: Self.app)
        let event = WebhookEvent(name: "channel_occupied", channel: "c")
        let first = queue.admit(event, maxEvents: 2, maxBytes: 1000), second = queue.admit(event, maxEvents: 2, maxBytes: 1000)
        let third = queue.admit(event, maxEvents: 2, maxBytes: 1000)
        let large = queue.admit(WebhookEvent(name: "channel_occupied", channel: String(repeating: "x", count: 900)), maxEvents: 10, maxBytes: 1000)
        #expect(first && second && !third && !large)
        #expect(queue.count == 2 && queue.bytes == 2 * event.size)
        queue.removeHead(5)
        #expect(queue.count == 0 && queue.bytes == 0)
    }
}
