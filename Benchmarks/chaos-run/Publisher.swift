import CurlHTTP
import Foundation
import RealtimeBackend
import RealtimeProtocol
import RealtimeServer
import SystemSupport

/// The app's server: publishes through the cluster's HTTP API (nginx in front of both nodes)
/// at a steady rate, one room event to every room per tick and a channel event every fifth
/// tick, signed as Pusher's REST API is, with libcurl. It records the id each room kept for
/// every event the API answered 200 for.
///
/// It runs on a thread of its own started inside the lab's remote namespace (threads inherit
/// the namespace of the thread that starts them), where nginx listens.
final class Publisher: Sendable {
    /// What was published and kept.
    struct Tally: Sendable {
        /// Room events sent.
        var roomAttempts = 0
        /// Room events the API answered with the id it kept.
        var roomKept = 0
        /// Room events refused or unanswered (the node or Redis down, nginx with no node).
        var roomFailed = 0
        /// The highest id each room answered.
        var keptUpTo: [String: UInt64] = [:]
        /// Channel events the API accepted.
        var channelSent = 0
        /// Channel events refused or unanswered.
        var channelFailed = 0
    }

    /// The interval between ticks.
    static let tick: Duration = .milliseconds(100)
    /// The longest one request may take.
    static let requestTimeout: Duration = .seconds(2)

    private let tally = Locked(Tally())
    private let running = Locked(true)
    private let finished = DispatchSemaphore(value: 0)
    private let api: String
    private let app: RealtimeApp
    private let backend: RealtimeBackend
    private let rooms: [String]
    private let channel: String

    /// - Parameters:
    ///   - api: the HTTP API's base URL (`http://127.0.0.1:PORT`, nginx).
    ///   - app: the app published for.
    ///   - backend: the app's backend, which declares the rooms' rule and signs room events.
    ///   - rooms: the rooms, each published to on every tick.
    ///   - channel: the public channel published to every fifth tick.
    init(api: String, app: RealtimeApp, backend: RealtimeBackend, rooms: [String], channel: String) {
        self.api = api
        self.app = app
        self.backend = backend
        self.rooms = rooms
        self.channel = channel
    }

    /// A copy of the tally.
    var snapshot: Tally { tally.withLock { $0 } }

    /// Publishes until `stop()`, on a new thread (call it from inside the namespace).
    func start() {
        Thread.detachNewThread { [self] in
            var number = 0
            var next = ContinuousClock.now
            while running.withLock({ $0 }) {
                number += 1
                for room in rooms { publish(room: room, number: number) }
                if number % 5 == 0 { publishToChannel(number: number) }
                next += Self.tick
                let wait = next - .now
                if wait > .zero { Thread.sleep(forTimeInterval: wait.seconds) } else { next = .now }
            }
            finished.signal()
        }
    }

    /// Stops the publishing thread and waits for its last request (once; later calls return).
    func stop() {
        let wasRunning = running.withLock { running in
            defer { running = false }
            return running
        }
        if wasRunning { finished.wait() }
    }

    /// Publishes one room event; returns the id the room kept, or nil when the API refused.
    @discardableResult
    func publish(room: String, number: Int) -> UInt64? {
        tally.withLock { $0.roomAttempts += 1 }
        guard let server = URL(string: api),
              let request = try? backend.roomEventRequest(server: server, appID: app.id, room: room, event: "tick", data: .object(["n": .number(Double(number))])),
              let url = request.url?.absoluteString, let body = request.httpBody else { return nil }
        struct Answer: Decodable {
            struct Kept: Decodable { var room: String; var id: UInt64 }
            var events: [Kept]
        }
        let result = CurlHTTP.post(url: url, body: Array(body), headers: ["Content-Type: application/json", "Expect:"],
                                   timeout: Self.requestTimeout, maxResponseBytes: 64 * 1024)
        guard case .success(let answer) = result, answer.status == 200,
              let kept = (try? JSONDecoder().decode(Answer.self, from: Data(answer.body)))?.events.first(where: { $0.room == room }) else {
            tally.withLock { $0.roomFailed += 1 }
            return nil
        }
        tally.withLock { tally in
            tally.roomKept += 1
            tally.keptUpTo[room] = max(tally.keptUpTo[room] ?? 0, kept.id)
        }
        return kept.id
    }

    /// Publishes one channel event (`POST /apps/{id}/events`, Pusher's REST API).
    private func publishToChannel(number: Int) {
        let path = "/apps/\(app.id)/events"
        let data = (try? RealtimeMessage.jsonText(["n": number])) ?? "{}"
        guard let body = try? RealtimeMessage.jsonText(ChannelEvent(name: "tick", channels: [channel], data: data)) else { return }
        let parameters = RESTSignature.signedParameters(method: "POST", path: path, body: Array(body.utf8), key: app.key, secret: app.secret,
                                                        timestamp: Int(Date().timeIntervalSince1970))
        // The parameters' values are a key, digits and hex: nothing to escape but the key's own
        // characters, which the app chose from the URL-safe set.
        let query = parameters.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: "&")
        let result = CurlHTTP.post(url: api + path + "?" + query, body: Array(body.utf8), headers: ["Content-Type: application/json", "Expect:"],
                                   timeout: Self.requestTimeout, maxResponseBytes: 64 * 1024)
        let accepted = if case .success(let answer) = result, answer.status == 200 { true } else { false }
        tally.withLock { accepted ? ($0.channelSent += 1) : ($0.channelFailed += 1) }
    }

    /// The body of `POST /apps/{id}/events`.
    private struct ChannelEvent: Encodable {
        var name: String
        var channels: [String]
        var data: String
    }
}
