import Foundation
@testable import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport
import Testing

/// The bus's message format: what the append script publishes decodes to the kept record, a
/// channel event survives the round trip byte for byte, and anything else is a typed refusal.
@Suite("Fan-out messages")
struct FanoutCodecTests {
    let room = FanoutTopic.room(app: "1", room: "r")
    let channel = FanoutTopic.channel(app: "1", channel: "c")

    @Test("a channel event round-trips, newlines, multi-byte text and absent parts included")
    func channelRoundTrip() throws {
        for event in [
            ChannelFanoutEvent(app: "1", channel: "c", event: "e", data: "{\"a\":\"x\ny é\"}", userID: "ü", excluding: "1.2"),
            ChannelFanoutEvent(app: "1", channel: "c", event: "client-x", data: nil),
            ChannelFanoutEvent(app: "1", channel: "c", event: "e", data: ""),
        ] {
            let decoded = try FanoutCodec.decode(Array(FanoutCodec.encode(event, origin: "n1").utf8), topic: channel)
            #expect(decoded.message == .channel(event))
            #expect(decoded.origin == "n1")
        }
    }

    @Test("a kick round-trips on an app's channel, a reason with newlines or none; on another channel it is refused")
    func kickRoundTrip() throws {
        for reason in [nil, "spam\nand é", ""] {
            let text = FanoutCodec.encodeKick(room: "chat:1", user: "a/b %41", reason: reason, origin: "n1")
            let decoded = try FanoutCodec.decode(Array(text.utf8), topic: .app("1"))
            #expect(decoded.message == .kickRoomUser(app: "1", room: "chat:1", user: "a/b %41", reason: reason))
            #expect(decoded.origin == "n1")
            #expect(throws: FanoutCodec.Malformed.self) { try FanoutCodec.decode(Array(text.utf8), topic: room) }
        }
        #expect(throws: FanoutCodec.Malformed.self) { try FanoutCodec.decode(Array("k n1 6 3 -1\nchat:1ab".utf8), topic: .app("1")) }
    }

    @Test("what the append script publishes is the kept record", arguments: [nil, "bob\nsmith"])
    func roomFromTheScript(from: String?) throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        let messages = Locked<[[UInt8]]>([])
        let subscriber = RedisSubscriber(endpoint: redis.endpoint) { event in
            if case .message(_, let payload) = event { messages.withLock { $0.append(payload) } }
        }
        subscriber.subscribe(RedisFanout.channel(of: room))
        subscriber.start()
        defer { subscriber.stop() }
        let store = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
        // The subscription is confirmed by the first message at the latest: publish until one comes.
        var kept: [(epoch: String, record: RoomEventRecord)] = []
        for _ in 0..<200 where messages.withLock({ $0.isEmpty }) {
            kept.append(try store.append(app: "1", room: "r", event: "updated", data: "{\"t\":\"a\nb\"}", from: from, rule: RoomRule(history: 10), at: 1_764_579_200_123))
            usleep(10_000)
        }
        let first = try #require(messages.withLock { $0.first })
        let decoded = try FanoutCodec.decode(first, topic: room).message
        let match = kept.first { .room(app: "1", room: "r", epoch: $0.epoch, record: $0.record) == decoded }
        #expect(match != nil, "\(decoded)")
    }

    @Test("malformed messages are refused with a reason, never trusted", arguments: [
        "", "r", "r e 1 2 3 4 -1", "r e 1 2 3 4 -1\nabc", "r e 1 2 1 1 -1\nabc", "r e x 2 1 1 -1\nab",
        "r e 1 2 -1 1 -1\na", "c n 1 99 -1 -1\nab", "c n -2 1 -1 -1\nab", "c 1 1 -1 -1\nab", "q 1\nx",
    ])
    func malformed(_ text: String) {
        let topic = text.hasPrefix("c") ? channel : room
        #expect(throws: FanoutCodec.Malformed.self) { try FanoutCodec.decode(Array(text.utf8), topic: topic) }
    }

    @Test("a message of the other kind than its channel's, or over the size limit, is refused")
    func wrongKindAndSize() {
        let event = Array(FanoutCodec.encode(ChannelFanoutEvent(app: "1", channel: "c", event: "e", data: "{}"), origin: "n").utf8)
        #expect(throws: FanoutCodec.Malformed.self) { try FanoutCodec.decode(event, topic: room) }
        let huge = Array("c n 1 \(FanoutCodec.maxMessageSize) -1 -1\ne".utf8) + [UInt8](repeating: 0x20, count: FanoutCodec.maxMessageSize)
        #expect(throws: FanoutCodec.Malformed.self) { try FanoutCodec.decode(huge, topic: channel) }
    }
}
