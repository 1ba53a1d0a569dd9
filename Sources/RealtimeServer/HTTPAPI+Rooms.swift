import Foundation
import RealtimeProtocol

/// The rooms part of the HTTP API (docs/rooms-protocol.md "HTTP API"), signed like the rest.
extension HTTPAPI {
    /// `room_events` body: `{name, data, room | rooms, rule?}`; `data` is the event's data as
    /// JSON text (a string, as Pusher's `data`) or any other JSON value.
    struct RoomEvent: Decodable {
        var name: String
        var data: String
        var room: String?
        var rooms: [String]?
        var rule: RoomRule?

        enum CodingKeys: String, CodingKey { case name, data, room, rooms, rule }

        init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            name = try container.decode(String.self, forKey: .name)
            room = try container.decodeIfPresent(String.self, forKey: .room)
            rooms = try container.decodeIfPresent([String].self, forKey: .rooms)
            rule = try container.decodeIfPresent(RoomRule.self, forKey: .rule)
            switch try container.decode(JSONValue.self, forKey: .data) {
            case .string(let text): data = text
            case let value: data = try RealtimeMessage.jsonText(value)
            }
        }
    }

    struct RoomBatch: Decodable { var batch: [RoomEvent] }
    struct Kick: Decodable { var reason: String? }

    /// - Parameter segments: the path after `/apps/{id}/`, split at `/`, each segment as the
    ///   listener gave it: already percent-decoded once (libwebsockets decodes the path), so
    ///   never decoded again (`a%41` names the user `a%41`, not `aA`).
    func handleRooms(_ request: HTTPRequest, _ segments: [String], app: RealtimeApp) -> HTTPResponse {
        switch (request.method, segments.count) {
        case ("POST", 1) where segments[0] == "room_events":
            guard let event = try? StrictJSON.decode(RoomEvent.self, from: request.body) else { return Self.roomError(RoomError(.badRequest, "malformed room event JSON")) }
            return publishRooms([event], app: app)
        case ("POST", 1) where segments[0] == "batch_room_events":
            guard let batch = try? StrictJSON.decode(RoomBatch.self, from: request.body) else { return Self.roomError(RoomError(.badRequest, "malformed batch JSON")) }
            guard batch.batch.count <= 100 else { return Self.roomError(RoomError(.badRequest, "at most 100 events a batch")) }
            return publishRooms(batch.batch, app: app)
        case ("GET", 3) where segments[2] == "history":
            let query = Dictionary(request.query.map { ($0.name, $0.value) }, uniquingKeysWith: { _, last in last })
            let limit = query["limit"].map { Int($0) ?? 0 } ?? 50
            var before: UInt64?
            if let text = query["before"] {
                guard let id = UInt64(text) else { return Self.roomError(RoomError(.badRequest, "before must be an event id")) }
                before = id
            }
            do {
                let page = try hub.roomHistory(appID: app.id, room: segments[1], before: before, limit: limit)
                return HTTPResponse(status: 200, body: RoomFrame.pageJSON(page.events, more: page.more, request: nil))
            } catch {
                return Self.roomError(error)
            }
        case ("GET", 3) where segments[2] == "users":
            let members = hub.roomUsers(appID: app.id, room: segments[1])
            let body = (try? RealtimeMessage.jsonText(RoomUsers(users: members.users.map { ["id": $0] }, connections: members.connections))) ?? "{}"
            return HTTPResponse(status: 200, body: body)
        case ("POST", 5...) where segments[2] == "users" && segments.last == "kick":
            let reason = request.body.isEmpty ? nil : (try? StrictJSON.decode(Kick.self, from: request.body))?.reason
            // A user id may hold `/` (sent as %2F, decoded by the listener), even at its ends or
            // twice in a row: it is the path's text between the room's `/users/` (room names
            // hold no `/`) and the final `/kick`, not its non-empty segments joined.
            guard request.path.hasSuffix("/kick"), let start = request.path.range(of: "/rooms/\(segments[1])/users/")?.upperBound else {
                return HTTPResponse(status: 404, body: #"{"code":"not_found","error":"not found"}"#)
            }
            let end = request.path.index(request.path.endIndex, offsetBy: -"/kick".count)
            guard start < end else { return Self.roomError(RoomError(.badRequest, "no user id")) }
            let user = String(request.path[start..<end])
            do {
                let count = try hub.kickRoomUser(appID: app.id, room: segments[1], userID: user, reason: reason)
                return HTTPResponse(status: 200, body: #"{"kicked":\#(count)}"#)
            } catch {
                return Self.roomError(error)
            }
        default:
            return HTTPResponse(status: 404, body: #"{"code":"not_found","error":"not found"}"#)
        }
    }

    struct RoomUsers: Encodable {
        var users: [[String: String]]
        var connections: Int
    }

    /// Every event is checked before any is published, so a bad batch publishes nothing.
    private func publishRooms(_ events: [RoomEvent], app: RealtimeApp) -> HTTPResponse {
        for event in events {
            guard event.room == nil || event.rooms == nil else { return Self.roomError(RoomError(.badRequest, "give room or rooms, not both")) }
            let rooms = event.rooms ?? event.room.map { [$0] } ?? []
            guard !rooms.isEmpty, rooms.count <= 100 else { return Self.roomError(RoomError(.badRequest, "an event needs 1 to 100 room names")) }
            guard rooms.allSatisfy(RoomName.isValid) else { return Self.roomError(RoomError(.invalidRoom, "invalid room name")) }
            guard RoomSystemEvent.isValidEventName(event.name) else { return Self.roomError(RoomError(.notAllowed, "invalid or reserved event name")) }
            if let rule = event.rule, !rule.isValid { return Self.roomError(RoomError(.badRequest, "rule out of range")) }
            guard event.data.utf8.count <= maxDataSize else {
                return HTTPResponse(status: 413, body: (try? RealtimeMessage.jsonText(["error": "event data larger than \(maxDataSize) bytes", "code": RoomErrorCode.badRequest.rawValue])) ?? "{}")
            }
            do {
                try RealtimeHub.checkRoomData(event.data, rule: event.rule ?? RoomRule())
            } catch {
                return Self.roomError(error)
            }
        }
        var kept: [String] = []
        for event in events {
            for room in event.rooms ?? event.room.map({ [$0] }) ?? [] {
                do {
                    let (epoch, record) = try hub.publishRoom(appID: app.id, room: room, event: event.name, data: event.data, rule: event.rule)
                    var line = #"{"epoch":"\#(epoch)","id":\#(record.id),"room":"#
                    RealtimeMessage.appendJSONString(room, to: &line)
                    kept.append(line + "}")
                } catch {
                    return Self.roomError(error)
                }
            }
        }
        return HTTPResponse(status: 200, body: #"{"events":[\#(kept.joined(separator: ","))]}"#)
    }

    /// A room refusal as an HTTP answer: 404 no_history, 507 store_full, 400 otherwise; the
    /// body is `{"error": message, "code": code}`.
    static func roomError(_ error: RoomError) -> HTTPResponse {
        let status: Int
        switch error.code {
        case .noHistory: status = 404
        case .storeFull: status = 507
        default: status = 400
        }
        return HTTPResponse(status: status, body: (try? RealtimeMessage.jsonText(["error": error.message, "code": error.code.rawValue])) ?? "{}")
    }
}
