import Foundation
@testable import Realtime
import RealtimeProtocol
import Reachability
import Reconnect
import SystemSupport
import Testing

/// The shared transcripts (`Clients/conformance`): the same scripted server and clock as the
/// browser and Kotlin clients run, against this client's fakes (`ClientFixture`). Room auth
/// requests (`options.roomAuthorizer`) wait until a step answers them; the client asks and takes
/// the answer on tasks of its own, so the steps that read what follows an auth request or
/// answer wait for it (up to 2 s) before comparing.
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
            "room_auth_batch_window_ms": Self.milliseconds(options.roomAuthBatchWindow),
            "room_minimum_auth_interval_ms": Self.milliseconds(RoomsMachine.minimumAuthInterval), "room_token_margin_ms": Self.milliseconds(RoomToken.margin),
            "room_max_per_auth_request": Int64(RoomAuthorizationRequest.maxRooms), "room_max_auth_attempts": Int64(RoomRequests.maxAttempts),
            "room_max_resyncs": Int64(RoomsMachine.maxResyncs), "room_max_join_retries": Int64(RoomsMachine.maxJoinRetries),
            "room_max_rooms": Int64(RoomTable.maxRooms),
        ]
        #expect(Set(constants.keys.filter { $0 != "source" }) == Set(ours.keys), "every shared constant is checked")
        #expect(Self.files.count >= 10, "the transcripts are found: \(Self.root.path)")
        for (key, value) in ours { #expect((constants[key] as? NSNumber)?.int64Value == value, "\(key)") }
    }

    /// Auth requests of one kind (rooms, channels, signins) held until the transcript answers them.
    final class HeldAuth<Request: Sendable & Equatable, Answer: Sendable & Decodable>: Sendable {
        private let state = Locked<(requests: [Request], waiting: [CheckedContinuation<Answer, any Error>], answered: Int)>(([], [], 0))

        func ask(_ request: Request) async throws -> Answer {
            try await withCheckedThrowingContinuation { continuation in
                state.withLock { $0.requests.append(request); $0.waiting.append(continuation) }
            }
        }

        var requests: [Request] { state.withLock { $0.requests } }
        var answered: Int { state.withLock { $0.answered } }

        /// Answers the oldest unanswered request with `json` decoded; false when there is none.
        func answer(_ json: Any) throws -> Bool {
            let answer = try JSONDecoder().decode(Answer.self, from: JSONSerialization.data(withJSONObject: json))
            let next: CheckedContinuation<Answer, any Error>? = state.withLock {
                guard $0.answered < $0.waiting.count else { return nil }
                $0.answered += 1
                return $0.waiting[$0.answered - 1]
            }
            next?.resume(returning: answer)
            return next != nil
        }

        /// Waits (as `settled`) for a request to answer, then answers it.
        func answerWhenAsked(_ json: Any, _ fixture: ClientFixture) async throws -> Bool {
            _ = await ConformanceTranscriptTests.settled(true, fixture) { self.state.withLock { $0.answered < $0.waiting.count } }
            return try answer(json)
        }
    }

    /// What a room delivered: its app events and its errors, as canonical JSON texts.
    final class RoomSeen: Sendable {
        private let seen = Locked<(app: [String], errors: [String])>(([], []))
        func record(_ event: String, _ data: JSONValue, _ meta: RoomEventMeta) {
            if event == "error" {
                var fields: [String: Any] = ["code": data["code"]?.string ?? ""]
                fields["reason"] = data["reason"]?.string
                let text = (try? ConformanceTranscriptTests.canonical(fields)) ?? ""
                seen.withLock { $0.errors.append(text) }
            } else if !RoomSystemEvent.reserved.contains(event) {
                let parsed = (try? JSONSerialization.jsonObject(with: Data(data.description.utf8), options: .fragmentsAllowed)) ?? NSNull()
                var fields: [String: Any] = ["event": event, "data": parsed, "id": meta.id, "replayed": meta.replayed]
                fields["epoch"] = meta.epoch
                let text = (try? ConformanceTranscriptTests.canonical(fields)) ?? ""
                seen.withLock { $0.app.append(text) }
            }
        }
        var app: [String] { seen.withLock { $0.app } }
        var errors: [String] { seen.withLock { $0.errors } }
    }

    /// Waits up to 2 s for `read` to give `expected` (the client works on tasks of its own after
    /// an auth request or answer); what it gives then.
    static func settled<T: Equatable>(_ expected: T, _ fixture: ClientFixture, _ read: () -> T) async -> T {
        let deadline = ContinuousClock.now + .seconds(2)
        while true {
            fixture.drain()
            let value = read()
            if value == expected || ContinuousClock.now > deadline { return value }
            try? await Task.sleep(for: .milliseconds(2))
        }
    }

    @Test("a transcript", arguments: files)
    func transcript(_ file: String) async throws {
        let transcript = try Self.json("transcripts/\(file)")
        let held = HeldAuth<[String], RoomAuthorizationResponse>()
        let channelAuth = HeldAuth<[String: String], ChannelAuthorizationResponse>()
        let signinAuth = HeldAuth<[String: String], UserAuthenticationResponse>()
        let fixture = ClientFixture(random: FixedDraw((transcript["draw"] as? NSNumber)?.doubleValue ?? 0.5)) { options in
            options.roomAuthorizer = { rooms in try await held.ask(rooms) }
            options.authorizer = { request in try await channelAuth.ask(["socket_id": request.socketID, "channel_name": request.channelName]) }
            options.userAuthenticator = { socketID in try await signinAuth.ask(["socket_id": socketID]) }
        }
        var memberEvents: [String: Locked<[String]>] = [:]
        /// Waits until the client has taken every answer the transcript gave (the other clients
        /// take an answer in the same call).
        func quiesce() async {
            _ = await Self.settled(true, fixture) {
                fixture.bird.connection.authAnswersTaken == held.answered + channelAuth.answered + signinAuth.answered
            }
        }
        var delivered: [String: Deliveries] = [:]
        var rooms: [String: RoomSeen] = [:]
        var tokens: [ObservationToken] = []
        defer { tokens.forEach { $0.cancel() } }
        let steps = try #require(transcript["steps"] as? [[String: Any]])
        for (index, step) in steps.enumerated() {
            let kind = step["step"] as? String ?? ""
            let comment = Comment(rawValue: "\(file) step \(index + 1) (\(kind))")
            /// Answers the oldest held request of `auth` with the step's answer, then waits until the client took it.
            func answer<Request, Answer>(_ auth: HeldAuth<Request, Answer>) async throws {
                #expect(try await auth.answerWhenAsked(step["answer"] ?? [:], fixture), "\(comment.rawValue): no request to answer")
                await quiesce()
            }
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
                let members = Locked<[String]>([])
                memberEvents[channel] = members
                let subscribed = fixture.bird.subscribe(channel)
                tokens.append(subscribed.bindAll { event in if !event.event.hasPrefix("bird") { seen.record(event) } })
                if let presence = subscribed as? PresenceChannel {
                    tokens.append(presence.onMemberAdded { member in members.withLock { $0.append("+\(member.userID)") } })
                    tokens.append(presence.onMemberRemoved { id in members.withLock { $0.append("-\(id)") } })
                }
            case "confirm":
                let channel = step["channel"] as? String ?? ""
                fixture.socket.receive(RealtimeMessage(event: ProtocolNamespace.bird.internalEvent(.subscriptionSucceeded), channel: channel,
                                                       data: try Self.canonical(step["data"] ?? [String: Any]())))
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
            case "join":
                let name = step["room"] as? String ?? ""
                let seen = RoomSeen()
                rooms[name] = seen
                fixture.bird.join(name).bindAll { event, data, meta in seen.record(event, data, meta) }
            case "expect_room_auth":
                let expected = step["requests"] as? [[String]] ?? []
                #expect(await Self.settled(expected, fixture) { held.requests } == expected, comment)
            case "answer_room_auth": try await answer(held)
            case "answer_channel_auth": try await answer(channelAuth)
            case "answer_signin_auth": try await answer(signinAuth)
            case "expect_channel_auth", "expect_signin_auth":
                let expected = step["requests"] as? [[String: String]] ?? []
                let requests = kind == "expect_channel_auth" ? { channelAuth.requests } : { signinAuth.requests }
                #expect(await Self.settled(expected, fixture, requests) == expected, comment)
            case "signin": fixture.bird.signin()
            case "expect_members":
                let name = step["channel"] as? String ?? ""
                let expected = [((step["ids"] as? [String]) ?? []).sorted().joined(separator: ","), step["me"] as? String ?? ""]
                let seen = await Self.settled(expected, fixture) {
                    let channel = fixture.bird.channel(named: name)
                    return [(channel?.members ?? []).map(\.userID).sorted().joined(separator: ","), channel?.me?.userID ?? ""]
                }
                #expect(seen == expected, comment)
            case "expect_member_events":
                let expected = step["events"] as? [String] ?? []
                let seen = memberEvents[step["channel"] as? String ?? ""]
                #expect(await Self.settled(expected, fixture) { seen?.withLock { $0 } ?? [] } == expected, comment)
            case "expect_frames":
                let expected = try (step["data"] as? [Any] ?? []).map { try Self.canonical($0) }
                let event = step["event"] as? String ?? ""
                let sent = await Self.settled(expected, fixture) {
                    fixture.socket.sentMessages.filter { $0.event == event }.map { message in
                        (try? JSONSerialization.jsonObject(with: Data((message.data ?? "null").utf8), options: .fragmentsAllowed)).flatMap { try? Self.canonical($0) } ?? ""
                    }
                }
                #expect(sent == expected, comment)
            case "room_frame":
                var payload: [String: Any] = ["event": step["event"] as? String ?? "", "data": step["data"] ?? NSNull()]
                payload["meta"] = step["meta"]
                fixture.publish("bird:room_event", on: step["room"] as? String ?? "", data: try Self.canonical(payload))
            case "expect_room":
                let name = step["room"] as? String ?? ""
                let expected = [step["state"] as? String ?? "", step["error"] as? String ?? ""]
                let seen = await Self.settled(expected, fixture) {
                    let room = fixture.bird.room(name)
                    return [room?.state.rawValue ?? "none", step["error"] == nil ? "" : room?.error?.code.rawValue ?? ""]
                }
                #expect(seen == expected, comment)
            case "expect_room_events":
                let expected = try (step["events"] as? [Any] ?? []).map { try Self.canonical($0) }
                let seen = rooms[step["room"] as? String ?? ""]
                #expect(await Self.settled(expected, fixture) { seen?.app ?? [] } == expected, comment)
            case "expect_room_errors":
                let expected = try (step["errors"] as? [Any] ?? []).map { try Self.canonical($0) }
                let seen = rooms[step["room"] as? String ?? ""]
                #expect(await Self.settled(expected, fixture) { seen?.errors ?? [] } == expected, comment)
            default: Issue.record("\(comment.rawValue): unknown step")
            }
        }
    }
}
