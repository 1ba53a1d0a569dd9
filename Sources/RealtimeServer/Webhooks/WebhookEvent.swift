/// One event of a webhook body, in Pusher's shape (Pusher Channels webhooks: `{"name":
/// "channel_occupied", "channel": "…"}`, `member_added` with `user_id`, `client_event` with
/// `event`, `data`, `socket_id`, `user_id`), plus this server's room events: `room_event`
/// (`room`, `event`, `data` as JSON text, `id`, `at`, `user_id` = the sender or absent for
/// the app's server) for rooms whose rule has `webhook`, and `room_member_added` /
/// `room_member_removed` (`room`, `user_id`).
public struct WebhookEvent: Encodable, Hashable, Sendable {
    /// The event kind (`channel_occupied`, `channel_vacated`, `member_added`,
    /// `member_removed`, `client_event`, `room_event`, `room_member_added`, `room_member_removed`).
    public var name: String
    /// The channel, for channel events.
    public var channel: String?
    /// The room, for room events.
    public var room: String?
    /// The user concerned (a member, or a client event's or room event's sender).
    public var userID: String?
    /// A client or room event's name.
    public var event: String?
    /// A client or room event's data text.
    public var data: String?
    /// The sender's socket id, for client events.
    public var socketID: String?
    /// A room event's id.
    public var id: UInt64?
    /// A room event's time, in milliseconds since 1970.
    public var at: Int64?

    /// Creates an event.
    public init(name: String, channel: String? = nil, room: String? = nil, userID: String? = nil, event: String? = nil,
                data: String? = nil, socketID: String? = nil, id: UInt64? = nil, at: Int64? = nil) {
        self.name = name
        self.channel = channel
        self.room = room
        self.userID = userID
        self.event = event
        self.data = data
        self.socketID = socketID
        self.id = id
        self.at = at
    }

    /// The bytes the event holds, for the dispatcher's byte bound: its strings' UTF-8 and 64
    /// more for the rest.
    public var size: Int {
        [name, channel, room, userID, event, data, socketID].reduce(64) { $0 + ($1?.utf8.count ?? 0) }
    }

    enum CodingKeys: String, CodingKey {
        case name, channel, room, event, data, id, at
        case userID = "user_id"
        case socketID = "socket_id"
    }
}
