import Foundation
import RealtimeProtocol
import RealtimeServer
import TestSupport
import Testing

/// `GET /metrics` over real HTTP, parsed by the official Prometheus Python client's parser
/// (`prometheus_client`), after real WebSocket clients did known things.
@Suite(.enabled(if: PythonPeer.isAvailable, "needs python3 with prometheus_client (scripts/setup installs it)"))
struct MetricsTests {
    struct Scrape: Decodable {
        var contentType: String
        var samples: [Sample]
        var types: [String: String]

        enum CodingKeys: String, CodingKey {
            case contentType = "content_type"
            case samples, types
        }

        /// `[name, {labels}, value]`.
        struct Sample: Decodable {
            var name: String
            var labels: [String: String]
            var value: Double

            init(from decoder: any Decoder) throws {
                var container = try decoder.unkeyedContainer()
                name = try container.decode(String.self)
                labels = try container.decode([String: String].self)
                value = try container.decode(Double.self)
            }
        }

        func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
            samples.first { $0.name == name && $0.labels == labels }?.value
        }
    }

    private func scrape(_ fixture: ServerFixture) throws -> Scrape {
        let output = try PythonPeer.run("prometheus_scrape.py", ["http://127.0.0.1:\(fixture.server.port)/metrics"])
        return try JSONDecoder().decode(Scrape.self, from: Data(output.utf8))
    }

    @Test("connections, channels, refusals, protocol errors, frames and HTTP answers are counted and parse as Prometheus text")
    func counters() async throws {
        let fixture = try ServerFixture()
        let subscriber = try fixture.connect()
        let idle = try fixture.connect()
        #expect(subscriber.message("bird:connection_established") != nil)
        #expect(idle.message("bird:connection_established") != nil)
        #expect(try fixture.connect(key: "nope").closeCode() == 4001)
        subscriber.send(#"{"event":"bird:subscribe","data":{"channel":"news"}}"#)
        #expect(subscriber.message("bird_internal:subscription_succeeded") != nil)
        subscriber.send(#"{"event":"bird:subscribe","data":{"channel":"private-x","auth":"app-key:forged"}}"#)
        #expect(subscriber.message("bird:subscription_error") != nil)
        idle.send("not json")
        #expect(idle.message("bird:error") != nil)
        let (status, _) = try await fixture.api("POST", "/apps/1/events", body: #"{"name":"update","channel":"news","data":"1"}"#)
        #expect(status == 200)
        #expect(subscriber.message("update") != nil)

        let first = try scrape(fixture)
        #expect(first.contentType.hasPrefix("text/plain; version=0.0.4"))
        #expect(first.types["realtime_connections"] == "gauge")
        #expect(first.types["realtime_connections_opened"] == "counter", "the parser names a counter family without _total")
        #expect(first.value("realtime_connections", ["app": "1"]) == 2)
        #expect(first.value("realtime_channels", ["app": "1"]) == 1)
        #expect(first.value("realtime_connections_opened_total") == 2)
        #expect(first.value("realtime_connections_refused_total", ["reason": "unknown_app"]) == 1)
        #expect(first.value("realtime_connections_refused_total", ["reason": "over_capacity"]) == 0)
        #expect(first.value("realtime_subscriptions_refused_total") == 1)
        #expect(first.value("realtime_protocol_errors_total") == 1)
        // subscribe twice, one garbage frame.
        #expect(first.value("realtime_messages_received_total") == 3)
        #expect(first.value("realtime_received_bytes_total") == Double(
            #"{"event":"bird:subscribe","data":{"channel":"news"}}"#.utf8.count
                + #"{"event":"bird:subscribe","data":{"channel":"private-x","auth":"app-key:forged"}}"#.utf8.count + "not json".utf8.count))
        // two handshakes, subscription_succeeded, subscription_error, error, the event.
        #expect(first.value("realtime_messages_sent_total") == 6)
        #expect((first.value("realtime_sent_bytes_total") ?? 0) > 0)
        #expect(first.value("realtime_http_responses_total", ["status": "200"]) == 1)
        #expect(first.value("realtime_cluster_bus_up") == nil, "a single node has no bus")
        #expect(first.value("realtime_send_queue_bytes") == 0, "every client reads")
        #expect(first.types["realtime_service_loop_lag_seconds"] == "gauge")
        // The server probes its service thread every second.
        try await waitUntil { (try scrape(fixture).value("realtime_service_loop_lag_seconds") ?? 0) > 0 }

        try? idle.connection?.close(code: .normalClosure, reason: "")
        #expect(idle.closeCode() != nil)
        try await waitUntil { try scrape(fixture).value("realtime_connections", ["app": "1"]) == 1 }
        let second = try scrape(fixture)
        #expect(second.value("realtime_connections_closed_total") == 1)
        // The first scrape's 200 is counted by the time the second is answered.
        #expect(second.value("realtime_http_responses_total", ["status": "200"]) ?? 0 >= 2)
    }

    @Test("server closes are counted by close code: a terminated connection is 4009")
    func closesByCode() async throws {
        let fixture = try ServerFixture()
        let client = try fixture.connect()
        let socketID = try #require(client.socketID)
        let (status, _) = try await fixture.api("POST", "/apps/1/connections/\(socketID)/terminate")
        #expect(status == 200)
        #expect(client.closeCode() == 4009)
        let scraped = try scrape(fixture)
        #expect(scraped.value("realtime_server_closes_total", ["code": "4009"]) == 1)
        #expect(scraped.value("realtime_connections", ["app": "1"]) == 0)
    }

    private func waitUntil(_ condition: () throws -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(5)
        while try !condition() {
            guard ContinuousClock.now < deadline else {
                Issue.record("condition not met within 5 s")
                return
            }
            try await Task.sleep(for: .milliseconds(20))
        }
    }
}
