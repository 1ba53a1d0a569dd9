import Foundation
import RealtimeCluster
import Redis
import SystemSupport
import TestSupport
import Testing

/// `RedisSubscriber` against a real private `redis-server`: the set of channels survives every
/// reconnect, and every outage is reported.
@Suite("Redis pub/sub subscriber")
struct RedisSubscriberTests {
    final class Recorder: Sendable {
        let events = Locked<[String]>([])
        func record(_ event: RedisSubscriber.Event) {
            let line: String
            switch event {
            case .message(let channel, let payload): line = "message \(channel) \(String(decoding: payload, as: UTF8.self))"
            case .subscribed(let channel): line = "subscribed \(channel)"
            case .ready: line = "ready"
            case .lost: line = "lost"
            case .slotMoved(let slot): line = "slot moved \(slot)"
            case .refused(let channel, let message): line = "refused \(channel): \(message)"
            }
            events.withLock { $0.append(line) }
        }
        func count(_ line: String) -> Int { events.withLock { $0.filter { $0 == line }.count } }
    }

    @Test("messages after each ready arrive; two restarts of Redis are two losses and two readies; an unsubscribed channel is quiet")
    func reconnects() async throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let recorder = Recorder()
        let subscriber = RedisSubscriber(endpoint: redis.endpoint, timeout: 500, pingInterval: 200) { recorder.record($0) }
        subscriber.subscribe("a")
        #expect(subscriber.start())
        defer { subscriber.stop() }
        #expect(await eventually { recorder.count("ready") == 1 })
        subscriber.subscribe("b")
        #expect(await eventually { recorder.count("subscribed b") == 1 }, "a channel added while connected is confirmed")
        let publisher = RedisConnection(endpoint: redis.endpoint)
        for round in 1...3 {
            _ = try publisher.command("PUBLISH", "a", "x\(round)")
            _ = try publisher.command("PUBLISH", "b", "y\(round)")
            #expect(await eventually { recorder.count("message a x\(round)") == 1 && recorder.count("message b y\(round)") == 1 }, "round \(round)")
            guard round < 3 else { break }
            try redis.restart()
            #expect(await eventually { recorder.count("lost") == round && recorder.count("ready") == round + 1 }, "outage \(round) reported and over")
        }
        subscriber.unsubscribe("a")
        #expect(await eventually { (try? publisher.command("PUBSUB", "NUMSUB", "a"))?.array?.last?.integer == 0 })
        _ = try publisher.command("PUBLISH", "a", "after")
        _ = try publisher.command("PUBLISH", "b", "fence")
        #expect(await eventually { recorder.count("message b fence") == 1 })
        #expect(recorder.count("message a after") == 0)
        #expect(subscriber.channels == ["b"])
    }
}
