import Foundation
import Realtime
import Reachability
import Reconnect
import Testing

/// The shared transcripts (`Clients/conformance`, issue 49): the same scripted server and clock
/// as the browser and Kotlin clients run, against this client's fakes (`ClientFixture`).
@Suite("Conformance transcripts shared by the three clients")
struct ConformanceTranscriptTests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../Clients/conformance").standardizedFileURL

    static var files: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: root.appendingPathComponent("transcripts").path)) ?? []
        return names.filter { $0.hasSuffix(".json") }.sorted()
    }

    static func json(_ path: String) throws -> [String: Any] {
        let data = try Data(contentsOf: root.appendingPathComponent(path))
        return try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    }

    /// Every jitter draw at `draw` of its range (1: the ceiling), as the other clients' fakes.
    struct FixedDraw: RandomNumberGenerator, Sendable {
        let value: UInt64
        init(_ draw: Double) { value = draw >= 1 ? .max : UInt64(max(0, draw) * Double(UInt64.max)) }
        mutating func next() -> UInt64 { value }
    }

    /// A JSON value as text with sorted keys: what two parses of the same value compare by.
    static func canonical(_ value: Any) throws -> String {
        String(decoding: try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed]), as: UTF8.self)
    }

    static func milliseconds(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    @Test("the defaults are the shared table's (constants.json)")
    func constants() throws {
        let constants = try Self.json("constants.json")
        let options = BirdRealtime.Options(appKey: "key")
        let ours: [String: Int64] = [
            "backoff_base_ms": Self.milliseconds(options.backoff.base), "backoff_cap_ms": Self.milliseconds(options.backoff.cap),
            "stable_connection_ms": Self.milliseconds(options.stableConnectionDuration),
            "short_connection_allowance": Int64(options.shortConnectionAllowance),
            "minimum_attempt_interval_ms": Self.milliseconds(ReconnectConfiguration().minimumAttemptInterval),
            "activity_timeout_ms": Self.milliseconds(options.activityTimeout), "pong_timeout_ms": Self.milliseconds(options.pongTimeout),
            "verify_pong_timeout_ms": Self.milliseconds(options.pathChangePongTimeout), "connect_timeout_ms": Self.milliseconds(options.connectTimeout),
        ]
        #expect(Set(constants.keys.filter { $0 != "source" }) == Set(ours.keys), "every shared constant is checked")
        #expect(Self.files.count >= 10, "the transcripts are found: \(Self.root.path)")
        for (key, value) in ours { #expect((constants[key] as? NSNumber)?.int64Value == value, "\(key)") }
    }

    @Test("a transcript", arguments: files)
    func transcript(_ file: String) throws {
        let transcript = try Self.json("transcripts/\(file)")
        let fixture = ClientFixture(random: FixedDraw((transcript["draw"] as? NSNumber)?.doubleValue ?? 0.5))
        var delivered: [String: Deliveries] = [:]
        var tokens: [ObservationToken] = []
        defer { tokens.forEach { $0.cancel() } }
        let steps = try #require(transcript["steps"] as? [[String: Any]])
        for (index, step) in steps.enumerated() {
            let kind = step["step"] as? String ?? ""
            let comment = Comment(rawValue: "\(file) step \(index + 1) (\(kind))")
            switch kind {
            case "connect": fixture.bird.connect()
            case "disconnect": fixture.bird.disconnect()
            case "handshake": fixture.handshake(step["socket_id"] as? String ?? "1.1", activityTimeout: (step["activity_timeout"] as? NSNumber)?.intValue ?? 120)
            case "close": fixture.socket.serverClose(code: UInt16((step["code"] as? NSNumber)?.intValue ?? 0), reason: step["reason"] as? String ?? "")
            case "drop": fixture.socket.drop()
            case "refuse": fixture.socket.fail("connection refused")
            case "subscribe":
                let channel = step["channel"] as? String ?? ""
                let seen = Deliveries()
                delivered[channel] = seen
                tokens.append(fixture.bird.subscribe(channel).bindAll { event in if !event.event.hasPrefix("bird") { seen.record(event) } })
            case "confirm": fixture.confirm(step["channel"] as? String ?? "")
            case "server_event":
                fixture.publish(step["event"] as? String ?? "", on: step["channel"] as? String ?? "", data: try Self.canonical(step["data"] ?? NSNull()))
            case "expect_sent_count":
                #expect(fixture.socket.sentMessages.count { $0.event == step["event"] as? String } == (step["count"] as? NSNumber)?.intValue, comment)
            case "expect_subscribes": #expect(fixture.subscribes() == step["channels"] as? [String], comment)
            case "expect_delivered":
                fixture.drain()
                let seen = try (delivered[step["channel"] as? String ?? ""]?.all ?? []).map { event in
                    [event.event, try Self.canonical(JSONSerialization.jsonObject(with: Data((event.data ?? "null").utf8), options: .fragmentsAllowed))]
                }
                let expected = try (step["events"] as? [[String: Any]] ?? []).map { [$0["event"] as? String ?? "", try Self.canonical($0["data"] ?? NSNull())] }
                #expect(seen == expected, comment)
            case "advance": fixture.clock.advance(by: .milliseconds((step["ms"] as? NSNumber)?.int64Value ?? 0))
            case "expect_state": #expect(fixture.state.rawValue == step["state"] as? String, comment)
            case "expect_sockets": #expect(fixture.socketCount == (step["count"] as? NSNumber)?.intValue, comment)
            case "expect_next_timer":
                let next = fixture.clock.nextDeadline.map { Self.milliseconds($0 - fixture.clock.now) }
                let low = (step["min_ms"] as? NSNumber)?.int64Value ?? 0, high = (step["max_ms"] as? NSNumber)?.int64Value ?? 0
                #expect(next.map { $0 >= low && $0 <= high } == true, "\(comment.rawValue): next timer in \(String(describing: next)) ms")
            case "expect_no_timer": #expect(fixture.clock.nextDeadline == nil, comment)
            case "expect_last_error": #expect(fixture.errors.last?.code == (step["code"] as? NSNumber)?.intValue, "\(comment.rawValue): \(String(describing: fixture.errors.last))")
            default: Issue.record("\(comment.rawValue): unknown step")
            }
        }
    }
}
