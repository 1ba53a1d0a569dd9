/// A position in a room's stream: the stream's epoch and the id of the last event seen
/// (DESIGN.md, "Position, not session"). Id 0 is the position before the first event.
public struct RoomPosition: Codable, Hashable, Sendable, CustomStringConvertible {
    /// Changes whenever the room's history is lost (store flushed, room recreated).
    public var epoch: String
    /// The last event id seen; ids grow by one per kept event.
    public var id: UInt64

    /// Creates a position.
    public init(epoch: String, id: UInt64) {
        self.epoch = epoch
        self.id = id
    }

    /// `epoch/id`.
    public var description: String { "\(epoch)/\(id)" }
}

/// `room_join` data (client → server): `{room, token, since?}`.
public struct RoomJoinRequest: Codable, Hashable, Sendable {
    /// The room name.
    public var room: String
    /// The room token, or the public grant for the room's pattern.
    public var token: String
    /// The position to resume from: events after it are replayed first.
    public var since: RoomPosition?

    /// Creates a request.
    public init(room: String, token: String, since: RoomPosition? = nil) {
        self.room = room
        self.token = token
        self.since = since
    }
}

/// `room_leave` data: `{room}`.
public struct RoomLeaveRequest: Codable, Hashable, Sendable {
    /// The room name.
    public var room: String
    /// Creates a request.
    public init(room: String) { self.room = room }
}

/// `room_refresh` data: `{room, token}`: a new token for a joined room before the old expires.
public struct RoomRefreshRequest: Codable, Hashable, Sendable {
    /// The room name.
    public var room: String
    /// The new token.
    public var token: String
    /// Creates a request.
    public init(room: String, token: String) {
        self.room = room
        self.token = token
    }
}

/// `room_send` data: `{room, event, data}` where `data` is the event's data as JSON text.
public struct RoomSendRequest: Codable, Hashable, Sendable {
    /// The room name.
    public var room: String
    /// The event name (not one of `RoomSystemEvent.reserved`).
    public var event: String
    /// The event's data as JSON text (`{"text":"hi"}`), kept and relayed as sent.
    public var data: String

    /// Creates a request.
    public init(room: String, event: String, data: String) {
        self.room = room
        self.event = event
        self.data = data
    }
}

/// `room_history` data (client → server): `{room, request, limit?, before?}`.
public struct RoomHistoryRequest: Codable, Hashable, Sendable {
    /// Most events a page may have: 100 (rooms seed, "at most 100 a page").
    public static let maxLimit = 100

    /// The room name.
    public var room: String
    /// The client's id for the request (1…64 characters), echoed in the answer.
    public var request: String
    /// Events wanted, 1…100 (50 when absent).
    public var limit: Int?
    /// Only events older than this id.
    public var before: UInt64?

    /// Creates a request.
    public init(room: String, request: String, limit: Int? = nil, before: UInt64? = nil) {
        self.room = room
        self.request = request
        self.limit = limit
        self.before = before
    }
}

/// One kept room event as the store holds it: id, time, name, data (JSON text) and sender.
public struct RoomEventRecord: Hashable, Sendable {
    /// Grows by one per kept event of the room.
    public var id: UInt64
    /// When it was kept, in milliseconds since 1970.
    public var at: Int64
    /// The event name.
    public var event: String
    /// The data as JSON text.
    public var data: String
    /// The user who sent it, as the token vouched; `nil` for the app's server.
    public var from: String?

    /// Creates a record.
    public init(id: UInt64, at: Int64, event: String, data: String, from: String?) {
        self.id = id
        self.at = at
        self.event = event
        self.data = data
        self.from = from
    }

    /// Bytes this record holds, for the store's memory budget.
    public var size: Int { event.utf8.count + data.utf8.count + (from?.utf8.count ?? 0) + 64 }

    /// The record as the JSON object of a `room_event` frame or a history page:
    /// `{"data":…,"event":"…","meta":{"at":…,"from":…,"id":…[,"replayed":true]}}`, keys sorted,
    /// `data` embedded as the JSON text it is.
    public func json(replayed: Bool = false) -> String {
        var output = #"{"data":"#
        output += data
        output += #","event":"#
        RealtimeMessage.appendJSONString(event, to: &output)
        output += #","meta":{"at":\#(at),"from":"#
        if let from { RealtimeMessage.appendJSONString(from, to: &output) } else { output += "null" }
        output += #","id":\#(id)"#
        if replayed { output += #","replayed":true"# }
        output += "}}"
        return output
    }
}

/// The server's room frames (docs/rooms-protocol.md "Server to client").
public enum RoomFrame {
    /// A kept event: `room_event` with `channel` = the room and data = the record's JSON.
    public static func event(_ record: RoomEventRecord, room: String, namespace: ProtocolNamespace, replayed: Bool = false) -> String {
        RealtimeMessage(event: namespace.event(.roomEvent), channel: room, data: record.json(replayed: replayed)).text
    }

    /// One of the room's own events (no `meta.id`: not kept): `{"data":…,"event":"join"}`.
    ///
    /// - Parameters:
    ///   - name: a `RoomSystemEvent` name.
    ///   - data: its data as JSON text.
    ///   - room: the room's name.
    ///   - namespace: the protocol's event prefix the connection speaks.
    public static func system(_ name: String, data: String, room: String, namespace: ProtocolNamespace) -> String {
        var output = #"{"data":"#
        output += data
        output += #","event":"#
        RealtimeMessage.appendJSONString(name, to: &output)
        output += "}"
        return RealtimeMessage(event: namespace.event(.roomEvent), channel: room, data: output).text
    }

    /// An `error` event: `{"code":"full","message":"…"}`.
    public static func error(_ code: RoomErrorCode, _ message: String, room: String, namespace: ProtocolNamespace) -> String {
        system(RoomSystemEvent.error, data: errorJSON(code, message), room: room, namespace: namespace)
    }

    /// `{"code":"…","message":"…"}`.
    public static func errorJSON(_ code: RoomErrorCode, _ message: String) -> String {
        var output = #"{"code":"#
        RealtimeMessage.appendJSONString(code.rawValue, to: &output)
        output += #","message":"#
        RealtimeMessage.appendJSONString(message, to: &output)
        output += "}"
        return output
    }

    /// A history page: `room_history` with `{"events":[…],"more":…,"request":"…"}`.
    public static func historyPage(_ records: [RoomEventRecord], more: Bool, request: String, room: String, namespace: ProtocolNamespace) -> String {
        RealtimeMessage(event: namespace.event(.roomHistory), channel: room, data: pageJSON(records, more: more, request: request)).text
    }

    /// `{"events":[…],"more":…[,"request":"…"]}`.
    public static func pageJSON(_ records: [RoomEventRecord], more: Bool, request: String?) -> String {
        var output = #"{"events":["#
        for (index, record) in records.enumerated() {
            if index > 0 { output += "," }
            output += record.json()
        }
        output += #"],"more":\#(more)"#
        if let request {
            output += #","request":"#
            RealtimeMessage.appendJSONString(request, to: &output)
        }
        output += "}"
        return output
    }

    /// A refused history request: `room_history` with `{"error":{"code","message"},"request"}`.
    public static func historyError(_ code: RoomErrorCode, _ message: String, request: String, room: String, namespace: ProtocolNamespace) -> String {
        var output = #"{"error":"#
        output += errorJSON(code, message)
        output += #","request":"#
        RealtimeMessage.appendJSONString(request, to: &output)
        output += "}"
        return RealtimeMessage(event: namespace.event(.roomHistory), channel: room, data: output).text
    }
}
