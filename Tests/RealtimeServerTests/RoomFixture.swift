import Foundation
import SystemSupport
import RealtimeProtocol
import RealtimeServer
import WebSocket

/// One room frame as a client sees it: the room, the event, its data and meta.
struct RoomFrameSeen: Sendable {
    var room: String
    var event: String
    var data: JSONValue
    var id: UInt64?
    var at: Int64?
    var from: String?
    var replayed: Bool

    init?(_ message: RealtimeMessage) {
        guard message.event == "bird:room_event", let room = message.channel,
              let object = try? message.decodeData([String: JSONValue].self),
              let event = object["event"]?.string else { return nil }
        self.room = room
        self.event = event
        data = object["data"] ?? .null
        let meta = object["meta"]
        id = meta?["id"]?.number.map { UInt64($0) }
        at = meta?["at"]?.number.map { Int64($0) }
        from = meta?["from"]?.string
        replayed = meta?["replayed"]?.bool ?? false
    }
}

/// A real WebSocket client of the room protocol that parses frames as they arrive.
final class RoomClient: Sendable {
    private let state = Locked((messages: [RealtimeMessage](), frames: [RoomFrameSeen](), closed: UInt16?.none))
    private let arrived = DispatchSemaphore(value: 0)
    private let connectionBox = Locked<WebSocketConnection?>(nil)

    init(_ fixture: ServerFixture, key: String = ServerFixture.app.key) throws {
        let connection = try fixture.clients.connect(url: "\(fixture.base)/app/\(key)") { [state, arrived] event in
            state.withLock { state in
                switch event {
                case .text(let text):
                    guard let message = try? RealtimeMessage(parsing: text) else { return }
                    state.messages.append(message)
                    if let frame = RoomFrameSeen(message) { state.frames.append(frame) }
                case .closed(let code, _): state.closed = code.rawValue
                case .failed: state.closed = 1006
                default: break
                }
            }
            arrived.signal()
        }
        connectionBox.withLock { $0 = connection }
        guard wait({ $0.messages.contains { $0.event == "bird:connection_established" } }) else { throw FixtureError.noHandshake }
    }

    enum FixtureError: Error { case noHandshake }

    /// The socket id the server's handshake gave.
    var socketID: String? { messages.first { $0.event == "bird:connection_established" }.flatMap { try? $0.decodeData(ConnectionEstablished.self).socketID } }

    /// Subscribes to a presence channel as `user`, signed with the test app's secret.
    func subscribePresence(_ channel: String, user: String) throws {
        let channelData = try RealtimeMessage.jsonText(PresenceMember(userID: user))
        let auth = ChannelAuthorization(key: ServerFixture.app.key, secret: ServerFixture.app.secret)
            .authorizeSubscription(socketID: socketID ?? "", channel: channel, channelData: channelData)
        send(.subscribe, SubscribeRequest(channel: channel, auth: auth, channelData: channelData))
    }

    var frames: [RoomFrameSeen] { state.withLock { $0.frames } }
    var messages: [RealtimeMessage] { state.withLock { $0.messages } }

    /// Pauses (`false`) or resumes reading the socket: a client that stops reading.
    func setReceiving(_ enabled: Bool) { connectionBox.withLock { $0 }?.setReceiving(enabled) }
    var closeCode: UInt16? { state.withLock { $0.closed } }

    /// Kept events of `room` (those with an id).
    func kept(_ room: String) -> [RoomFrameSeen] { frames.filter { $0.room == room && $0.id != nil } }
    /// The room's own events named `event`.
    func system(_ event: String, room: String) -> [RoomFrameSeen] { frames.filter { $0.room == room && $0.id == nil && $0.event == event } }

    @discardableResult
    func wait(timeout: Duration = .seconds(10), _ condition: ((messages: [RealtimeMessage], frames: [RoomFrameSeen], closed: UInt16?)) -> Bool) -> Bool {
        let deadline = DispatchTime.now() + .milliseconds(Int(timeout.components.seconds * 1000))
        while !state.withLock({ condition($0) }) {
            if arrived.wait(timeout: deadline) == .timedOut { return state.withLock { condition($0) } }
        }
        return true
    }

    /// Waits for the `count`-th room event named `event` (kept or the room's own) in `room`.
    @discardableResult
    func waitFor(_ event: String, room: String, count: Int = 1, timeout: Duration = .seconds(10)) -> RoomFrameSeen? {
        wait(timeout: timeout) { $0.frames.filter { $0.room == room && $0.event == event }.count >= count }
        return frames.filter { $0.room == room && $0.event == event }.dropFirst(count - 1).first
    }

    func send(_ event: ProtocolEventName, _ payload: some Encodable) {
        // The payload types here always encode.
        let text = (try? RealtimeMessage(event: ProtocolNamespace.bird.event(event), payload: payload).text) ?? ""
        try? connectionBox.withLock { $0 }?.send(text: text)
    }

    func sendRaw(_ text: String) { try? connectionBox.withLock { $0 }?.send(text: text) }

    func join(_ room: String, token: String, since: RoomPosition? = nil) {
        send(.roomJoin, RoomJoinRequest(room: room, token: token, since: since))
    }

    /// Joins and waits for `joined`; returns its data.
    func joined(_ room: String, token: String, since: RoomPosition? = nil, count: Int? = nil) -> JSONValue? {
        let before = system(RoomSystemEvent.joined, room: room).count
        join(room, token: token, since: since)
        wait { $0.frames.filter { $0.room == room && $0.event == "joined" }.count > before || $0.frames.contains { $0.room == room && $0.event == "error" } }
        return system(RoomSystemEvent.joined, room: room).dropFirst(before).first?.data
    }

    func abort() { connectionBox.withLock { $0 }?.abort() }
    func close() { try? connectionBox.withLock { $0 }?.close() }
}

/// Room tokens for tests, signed as a backend signs them.
enum Tokens {
    static func make(room: String, user: String?, rule: RoomRule = RoomRule(history: 1000), info: JSONValue? = nil,
                     expiresIn seconds: Int = 3600, now: Int64 = Int64(Date().timeIntervalSince1970 * 1000),
                     secret: String = ServerFixture.app.secret) -> String {
        let claims = RoomClaims(subject: user, room: room, expiresAt: Int(now / 1000) + seconds, issuedAt: Int(now / 1000), info: info, rule: rule)
        return (try? JSONWebToken.sign(claims, secret: secret)) ?? ""
    }
}

extension JSONValue {
    var position: RoomPosition? {
        guard let epoch = self["epoch"]?.string, let id = self["id"]?.number else { return nil }
        return RoomPosition(epoch: epoch, id: UInt64(id))
    }
}

/// A wall clock a test moves by hand (milliseconds since 1970).
final class ManualWallClock: Sendable {
    private let value = Locked(Int64(Date().timeIntervalSince1970 * 1000))
    var now: Int64 { value.withLock { $0 } }
    func advance(seconds: Int64) { value.withLock { $0 += seconds * 1000 } }
    var closure: @Sendable () -> Int64 { { self.now } }
}
