import Dispatch
import Foundation
import SystemSupport
import Realtime
import RealtimeProtocol
import RealtimeServer
import Synchronization
import WebSocket

/// Counts the events one consumer took, with the instants of the first and of the last one.
final class ReceiveCounter: Sendable {
    /// How many events make the run complete.
    let target: Int
    /// Events counted.
    private let count = Atomic<Int>(0)
    /// When the first and the last event were counted.
    private let window = Locked<(first: ContinuousClock.Instant?, last: ContinuousClock.Instant?)>((nil, nil))
    /// The process's CPU time (all threads, the in-process peer's too) at the first and the
    /// last event.
    private let cpu = Locked<(first: Duration?, last: Duration?)>((nil, nil))
    /// Signalled at the last event.
    private let done = DispatchSemaphore(value: 0)

    /// Creates a counter that completes at `target` events.
    ///
    /// - Parameter target: the number of events published.
    init(target: Int) { self.target = target }

    /// Counts one event; called by the consumer for every event, in order.
    func record() {
        let reached = count.wrappingAdd(1, ordering: .relaxed).newValue
        if reached == 1 {
            window.withLock { $0.first = .now }
            cpu.withLock { $0.first = processCPUTime() }
        }
        if reached == target {
            window.withLock { $0.last = .now }
            cpu.withLock { $0.last = processCPUTime() }
            done.signal()
        }
    }

    /// Events counted so far.
    var received: Int { count.load(ordering: .relaxed) }

    /// Waits until `target` events were counted.
    ///
    /// - Parameter timeout: the longest wait, in seconds.
    /// - Returns: whether all events arrived in time.
    func wait(seconds timeout: Int) -> Bool { done.wait(timeout: .now() + .seconds(timeout)) == .success }

    /// Events per second from the first event to the last (the receive window only, so
    /// connecting and subscribing are not counted).
    /// The process's CPU time per event from the first event to the last, in µs: steadier than
    /// the rate on a shared machine, and the peer's share is the same for every consumer.
    var cpuPerEvent: Double {
        let (first, last) = cpu.withLock { $0 }
        guard let first, let last, target > 1 else { return 0 }
        return (last - first).milliseconds * 1000 / Double(target - 1)
    }

    var rate: Double {
        let (first, last) = window.withLock { $0 }
        guard let first, let last, last > first else { return 0 }
        return Double(target - 1) / ((last - first).milliseconds / 1000)
    }
}

/// What the publisher saw while feeding one consumer.
struct PublishReport {
    /// Publish calls per second over the whole run, waits for credit included.
    var rate: Double
    /// The share of the run the publisher spent waiting for credit: near 1 means the consumer
    /// set the pace, near 0 means the publisher did.
    var waitingShare: Double
}

/// Publishes `{"seq":N,"p":1.5}` events to one channel from a dedicated thread, as fast as the
/// consumer takes them, with at most `credit` events outstanding (published, not yet counted):
/// the server's per-connection queue stays far below its 4 MiB slow-consumer limit, and the
/// consumer is never starved.
struct Publisher {
    /// The hub to publish through (in-process, no HTTP).
    var hub: RealtimeHub
    /// The app id.
    var appID: String
    /// The channel published to.
    var channel: String
    /// The event name.
    var event: String
    /// Most events outstanding at once.
    var credit: Int

    /// Publishes `count` events to the consumer counted by `counter` and returns when the last
    /// one is published.
    ///
    /// - Parameters:
    ///   - count: events to publish.
    ///   - counter: the consumer's counter, read for credit.
    /// - Returns: the publisher's rate and how much of the run it waited for credit.
    func run(count: Int, counter: ReceiveCounter) -> PublishReport {
        let finished = DispatchSemaphore(value: 0)
        let report = Locked(PublishReport(rate: 0, waitingShare: 0))
        let publisher = self
        let thread = Thread {
            let start = ContinuousClock.now
            var waiting = Duration.zero
            for seq in 0..<count {
                if seq - counter.received >= publisher.credit {
                    let waitStart = ContinuousClock.now
                    while seq - counter.received >= publisher.credit { usleep(50) }
                    waiting += ContinuousClock.now - waitStart
                }
                publisher.hub.publish(appID: publisher.appID, channels: [publisher.channel], event: publisher.event,
                                      data: "{\"seq\":\(seq),\"p\":1.5}")
            }
            let elapsed = ContinuousClock.now - start
            report.withLock {
                $0 = PublishReport(rate: Double(count) / (elapsed.milliseconds / 1000), waitingShare: waiting.milliseconds / elapsed.milliseconds)
            }
            finished.signal()
        }
        thread.name = "bench publisher"
        thread.start()
        finished.wait()
        return report.withLock { $0 }
    }
}

/// A consumer of the benchmark channel: connected and subscribed when made, closed by `close()`.
protocol BenchConsumer {
    /// Disconnects and frees the consumer's resources.
    func close()
}

/// The baseline: a bare `WebSocket` module client that sends the subscribe frame itself and
/// counts every text frame after the subscription is confirmed, parsing nothing (or, with
/// `parses`, parsing each frame with `RealtimeMessage(parsing:)` first, to show what the
/// protocol's JSON costs on its own).
final class RawConsumer: BenchConsumer, Sendable {
    /// The consumer's own libwebsockets context (its own service thread, as `BirdRealtime` has).
    private let context: WebSocketContext
    /// The connection.
    private let connection: WebSocketConnection

    /// Connects to `url`, waits for the handshake, subscribes to `channel` and waits for the
    /// confirmation.
    ///
    /// - Parameters:
    ///   - url: the app endpoint (`ws://127.0.0.1:PORT/app/KEY?namespace=bird…`).
    ///   - channel: the channel to subscribe to.
    ///   - counter: counts the frames after the confirmation.
    ///   - parses: parse each counted frame as a protocol message (a frame that does not parse
    ///     is not counted).
    /// - Throws: `WebSocketError` when the context cannot start; `BenchFailure` when the
    ///   handshake or the confirmation does not come within 10 s.
    init(url: String, channel: String, counter: ReceiveCounter, parses: Bool) throws {
        context = try WebSocketContext(options: rawClientContextOptions)
        // 0: waiting for the handshake, 1: for the confirmation, 2: counting.
        let phase = Atomic<Int>(0)
        let handshaken = DispatchSemaphore(value: 0)
        let subscribed = DispatchSemaphore(value: 0)
        connection = try context.connect(url: url) { event in
            guard case .text(let text) = event else { return }
            switch phase.load(ordering: .acquiring) {
            case 2:
                if !parses || (try? RealtimeMessage(parsing: text)) != nil { counter.record() }
            case 0 where text.contains("connection_established"):
                phase.store(1, ordering: .releasing)
                handshaken.signal()
            case 1 where text.contains("subscription_succeeded"):
                phase.store(2, ordering: .releasing)
                subscribed.signal()
            default:
                break
            }
        }
        guard handshaken.wait(timeout: .now() + .seconds(10)) == .success else { throw BenchFailure("raw client: no handshake") }
        let subscribe = try RealtimeMessage(event: ProtocolNamespace.bird.event(.subscribe), payload: SubscribeRequest(channel: channel))
        try connection.send(text: subscribe.text)
        guard subscribed.wait(timeout: .now() + .seconds(10)) == .success else { throw BenchFailure("raw client: no subscription") }
    }

    /// Closes the connection and the context.
    func close() {
        try? connection.close()
        context.shutdown()
    }
}

/// The client measured: `BirdRealtime` with a handler bound to the event on a private delivery
/// queue; an event counts when that handler runs.
final class BirdConsumer: BenchConsumer, Sendable {
    /// The client.
    private let bird: BirdRealtime
    /// The client's delivery queue.
    private let queue = DispatchQueue(label: "bench.delivery")

    /// Connects, subscribes to `channel`, binds `event`, and waits for the confirmation.
    ///
    /// - Parameters:
    ///   - options: the client's options (delivery queue replaced by a private one).
    ///   - channel: the channel to subscribe to.
    ///   - event: the event bound.
    ///   - counter: counts each event the handler gets.
    /// - Throws: `BenchFailure` when the client is not subscribed within 10 s.
    init(options: BirdRealtime.Options, channel: String, event: String, counter: ReceiveCounter) throws {
        var options = options
        options.deliveryQueue = queue
        bird = BirdRealtime(options: options)
        let subscription = bird.subscribe(channel)
        subscription.bind(event) { _ in counter.record() }
        bird.connect()
        let deadline = ContinuousClock.now + .seconds(10)
        while !subscription.subscribed {
            guard ContinuousClock.now < deadline else { throw BenchFailure("BirdRealtime: not subscribed (\(bird.connectionState))") }
            usleep(1000)
        }
    }

    /// Disconnects and waits for the handlers already queued.
    func close() {
        bird.disconnect()
        queue.sync {}
    }
}

/// The clients compared.
enum ConsumerKind: CaseIterable {
    /// `RawConsumer`, counting frames.
    case raw
    /// `RawConsumer`, parsing each frame before counting it.
    case rawParsing
    /// `BirdConsumer`.
    case bird

    /// The name used in progress lines and errors.
    var label: String {
        switch self {
        case .raw: "raw client"
        case .rawParsing: "raw client + parse"
        case .bird: "BirdRealtime"
        }
    }
}

/// One consumer's receive rate, and the publisher's view of the same run (reference server
/// runs only).
struct ThroughputSample {
    /// Events per second received and handled, first to last event.
    var rate: Double
    /// How much the process's resident memory grew from before the consumer connected to its
    /// last event, in KiB.
    var memoryGrowth: Int
    /// The publisher during that run, when the stream came from `RealtimeHub.publish`.
    var publisher: PublishReport?
}

/// The samples of one stream source, per client, in run order.
struct ThroughputResults {
    /// The runs of each client measured.
    var samples: [ConsumerKind: [ThroughputSample]] = [:]

    /// The median rate of `kind`'s runs, or `nil` when it was not measured.
    ///
    /// - Parameter kind: the client.
    func medianRate(_ kind: ConsumerKind) -> Double? {
        guard let runs = samples[kind], !runs.isEmpty else { return nil }
        return median(runs.map(\.rate).sorted())
    }
}

/// Part (a): the same stream of `events` events to a raw WebSocket client and to
/// `BirdRealtime` (and, from the firehose, to a raw client that parses), in turn, `rounds`
/// times each after one short warm-up each, from two sources on loopback: the `FirehosePeer`
/// (the client is the bottleneck) and an in-process `RealtimeServer` fed by
/// `RealtimeHub.publish` from another thread (end to end).
struct ThroughputBenchmark {
    /// Events per run.
    var events: Int
    /// Measured runs per client and source.
    var rounds: Int
    /// Most events outstanding between the hub's publisher and the consumer.
    var credit = 20_000

    /// The app every source serves.
    private static let app = RealtimeApp(id: "bench", key: "bench-key", secret: "bench-secret")
    /// The channel every run streams to.
    private static let channel = "bench"

    /// Runs both sources.
    ///
    /// - Returns: the firehose's samples and the reference server's.
    /// - Throws: `WebSocketError` when the server cannot start; `BenchFailure` when a
    ///   consumer does not connect or does not get every event within 120 s.
    func run() throws -> (firehose: ThroughputResults, server: ThroughputResults) {
        (try runFirehose(), try runReferenceServer())
    }

    /// Makes a consumer of `port`'s `bench` channel that counts into `counter`.
    private func consumer(_ kind: ConsumerKind, port: Int, counter: ReceiveCounter) throws -> any BenchConsumer {
        var options = BirdRealtime.Options(appKey: Self.app.key, host: "127.0.0.1", port: port)
        options.deliveryQueue = DispatchQueue(label: "bench.unused")
        switch kind {
        case .raw, .rawParsing:
            return try RawConsumer(url: options.endpoint, channel: Self.channel, counter: counter, parses: kind == .rawParsing)
        case .bird:
            return try BirdConsumer(options: options, channel: Self.channel, event: "tick", counter: counter)
        }
    }

    /// One warm-up run of each of `kinds`, then `rounds` rounds of one run of each, in turn.
    private func alternate(_ kinds: [ConsumerKind], label: String,
                           _ once: (_ kind: ConsumerKind, _ count: Int) throws -> ThroughputSample) throws -> ThroughputResults {
        for kind in kinds { _ = try once(kind, min(events, 20_000)) }
        var results = ThroughputResults()
        for round in 1...rounds {
            for kind in kinds {
                progress("throughput (\(label)) round \(round)/\(rounds): \(kind.label), \(events) events…")
                results.samples[kind, default: []].append(try once(kind, events))
            }
        }
        return results
    }

    /// Every client against the firehose, one new connection per run.
    private func runFirehose() throws -> ThroughputResults {
        let peer = try FirehosePeer()
        let full = FirehosePeer.frames(count: events, channel: Self.channel)
        let warmUp = FirehosePeer.frames(count: min(events, 20_000), channel: Self.channel)
        return try alternate(ConsumerKind.allCases, label: "firehose") { kind, count in
            let counter = ReceiveCounter(target: count)
            let served = DispatchSemaphore(value: 0)
            let failure = Locked<(any Error)?>(nil)
            let stream = count == events ? full : warmUp
            let memoryBefore = residentKiB()
            let thread = Thread {
                do { try peer.serve(stream) } catch { failure.withLock { $0 = error } }
                served.signal()
            }
            thread.name = "bench firehose"
            thread.start()
            let consumer = try consumer(kind, port: peer.port, counter: counter)
            let complete = counter.wait(seconds: 120)
            let memoryGrowth = residentKiB() - memoryBefore
            consumer.close()
            guard served.wait(timeout: .now() + .seconds(10)) == .success else { throw BenchFailure("firehose: the client did not close") }
            if let error = failure.withLock({ $0 }) { throw error }
            guard complete else { throw BenchFailure("\(kind.label): \(counter.received) of \(count) events after 120 s") }
            return ThroughputSample(rate: counter.rate, memoryGrowth: memoryGrowth, publisher: nil)
        }
    }

    /// The raw client and `BirdRealtime` against one in-process `RealtimeServer`, one new
    /// connection per run.
    private func runReferenceServer() throws -> ThroughputResults {
        let server = try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: [Self.app]))
        defer { server.shutdown(grace: .zero) }
        let publisher = Publisher(hub: server.hub, appID: Self.app.id, channel: Self.channel, event: "tick", credit: credit)
        return try alternate([.raw, .bird], label: "RealtimeServer") { kind, count in
            let counter = ReceiveCounter(target: count)
            let memoryBefore = residentKiB()
            let consumer = try consumer(kind, port: server.port, counter: counter)
            defer { consumer.close() }
            let report = publisher.run(count: count, counter: counter)
            guard counter.wait(seconds: 120) else {
                throw BenchFailure("\(kind.label): \(counter.received) of \(count) events after 120 s")
            }
            return ThroughputSample(rate: counter.rate, memoryGrowth: residentKiB() - memoryBefore, publisher: report)
        }
    }
}

/// The process's resident set size (`VmRSS` in `/proc/self/status`), in KiB; 0 if unreadable.
func residentKiB() -> Int {
    guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
          let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
    else { return 0 }
    return line.split(separator: " ").dropFirst().first.flatMap { Int($0) } ?? 0
}

/// CPU time used by every thread of this process so far (`CLOCK_PROCESS_CPUTIME_ID`).
func processCPUTime() -> Duration {
    var spec = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &spec)
    return .seconds(spec.tv_sec) + .nanoseconds(spec.tv_nsec)
}
