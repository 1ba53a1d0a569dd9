import RealtimeProtocol

/// What the server says about a room event (rooms seed, "Joining": "meta: from, id, at,
/// replayed"; docs/rooms-protocol.md "Server to client").
public struct RoomEventMeta: Sendable, Hashable {
    /// The kept event's id: grows by one per kept event of the room. 0 for the room's own
    /// events (`joined`, `join`, `leave`, `count`, `error`, `kicked`), which are not kept.
    public var id: UInt64
    /// When the event was kept, in milliseconds since 1970 (the server's clock); 0 for the
    /// room's own events.
    public var at: Int64
    /// The user who sent it from a page or an app, as the app's server vouched in their token;
    /// `nil` for the app's server (and for the room's own events).
    public var from: String?
    /// `true` for events sent from history during a resume: they were published while this
    /// client was away.
    public var replayed: Bool
    /// The epoch of the room's stream the id belongs to (`nil` for the room's own events): ids
    /// start again at 1 in a new epoch, so an app that deduplicates by id keys on both.
    public var epoch: String?

    /// Creates a meta.
    public init(id: UInt64, at: Int64, from: String?, replayed: Bool, epoch: String? = nil) {
        self.id = id
        self.at = at
        self.from = from
        self.replayed = replayed
        self.epoch = epoch
    }

    /// Whether the event is a kept one (it has an id), not one of the room's own.
    public var isKept: Bool { id > 0 }

    /// The meta of the room's own events.
    static let system = RoomEventMeta(id: 0, at: 0, from: nil, replayed: false)
}

extension RoomError {
    /// The `error` event's data: `{"code", "message"}` (and `reason` for `notRecovered`, and
    /// `gap` when it says which events will not come).
    func json(reason: String? = nil) -> JSONValue {
        var fields: [String: JSONValue] = ["code": .string(code.rawValue), "message": .string(message)]
        if let reason { fields["reason"] = .string(reason) }
        if let gap { fields["gap"] = gap.value }
        return .object(fields)
    }
}

extension RoomErrorCode {
    /// The client rejoined from its position and the server could not replay all that was
    /// missed (`reason`: `epoch_changed`, `expired`, `unknown_position`, `too_large`). With a
    /// `gap` (told before the replay of what is still kept), exactly which ids will not come:
    /// the app fetches that range from its own records; without one, it fetches the room's
    /// state (docs/rooms-protocol.md "Replay").
    public static let notRecovered = RoomErrorCode(rawValue: "not_recovered")
    /// The auth route could not be asked, or kept failing (after its retries with backoff).
    public static let authFailed = RoomErrorCode(rawValue: "auth_failed")
    /// The auth route answered 401 twice in a row (the session is not valid).
    public static let unauthorized = RoomErrorCode(rawValue: "unauthorized")
    /// The app's server removed this user from the room (`kicked`).
    public static let kicked = RoomErrorCode(rawValue: "kicked")
    /// The app left the room.
    public static let left = RoomErrorCode(rawValue: "left")
    /// The connection dropped before the server answered.
    public static let disconnected = RoomErrorCode(rawValue: "disconnected")
    /// The server did not answer in time.
    public static let timedOut = RoomErrorCode(rawValue: "timed_out")
    /// The server sent something the client could not read (not JSON, a sealed value that does
    /// not open, data that does not decode into the asked type): reported, never delivered.
    public static let badData = RoomErrorCode(rawValue: "bad_data")
}

/// A member of a presence room: the user id the app's server vouched for and their `info`.
public struct RoomMember: Sendable, Hashable, Codable {
    /// The user id (`sub` of their token).
    public var id: String
    /// Their presence info (the token's `info`), if any.
    public var info: JSONValue?

    /// Creates a member.
    public init(id: String, info: JSONValue? = nil) {
        self.id = id
        self.info = info
    }
}

/// One event of a history page (rooms seed: `show(event.event, event.data, event.meta)`).
public struct RoomHistoryEvent: Sendable, Hashable {
    /// The event name.
    public var event: String
    /// The event's data (opened, in a sealed room).
    public var data: JSONValue
    /// Its id, time and sender.
    public var meta: RoomEventMeta

    /// Creates an event.
    public init(event: String, data: JSONValue, meta: RoomEventMeta) {
        self.event = event
        self.data = data
        self.meta = meta
    }
}

/// A page of a room's history: at most 100 events, oldest first (rooms seed, "Paging back").
public struct RoomHistoryPage: Sendable, Hashable {
    /// The events, oldest first.
    public var events: [RoomHistoryEvent]
    /// Older events are kept: ask for them with `history(before: events.first?.meta.id, …)`.
    public var more: Bool

    /// Creates a page.
    public init(events: [RoomHistoryEvent], more: Bool) {
        self.events = events
        self.more = more
    }
}

/// A handler added with `Room.on`, `onAny` or `bind`: pass it to `Room.off(_:)` to remove it.
public struct RoomListener: Sendable, Hashable {
    let id: UInt64
}

/// One event for a room's handlers, decided by the connection's state machine.
struct RoomDelivery: Sendable {
    var room: String
    var event: String
    var payload: RoomData
    var meta: RoomEventMeta

    init(room: String, event: String, data: JSONValue, meta: RoomEventMeta) {
        self.init(room: room, event: event, payload: .value(data), meta: meta)
    }

    init(room: String, event: String, payload: RoomData, meta: RoomEventMeta) {
        self.room = room
        self.event = event
        self.payload = payload
        self.meta = meta
    }

    /// The data, built from its text if need be.
    var data: JSONValue { payload.value }
}

/// A room event's data: built, or JSON text already checked against the grammar, built on the
/// delivery queue (off the socket thread, which reads only the event's meta).
enum RoomData: Sendable {
    case value(JSONValue)
    case text(String)

    /// The value (`null` for text that does not parse, which the grammar check rules out).
    var value: JSONValue {
        switch self {
        case .value(let value): return value
        case .text(let text): return StrictJSON.parse(text) ?? .null
        }
    }
}
