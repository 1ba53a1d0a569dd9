import RealtimeProtocol

/// Live fan-out between the nodes of a cluster: what a hub needs of a message bus (DESIGN.md,
/// "Scale-out"). `RealtimeCluster.RedisFanout` implements it on Redis pub/sub.
///
/// With a fan-out, a hub delivers no room event straight to its own members: a room event is
/// kept by the history store, which also hands it to the bus in the same atomic step, and every
/// node following the room (this one included) delivers what the bus brings, so all members of
/// a room see one order, the history's. A channel event (not kept, no ids) is delivered to this
/// node's subscribers at once and handed to the bus for the others; the bus must not bring a
/// node its own channel events back. A node follows a topic only while it has members for it.
///
/// The bus calls back into the hub (`RealtimeHub.fanoutReceived` and the other `fanout…`
/// methods) on its own thread; `follow`/`unfollow` are called under the hub's lock and must
/// only record the change (no blocking, no calls back).
public protocol RealtimeFanout: Sendable {
    /// Starts the bus, which reports to `hub` from now on.
    func start(_ hub: RealtimeHub)
    /// Asks for the topic's messages (nothing when followed already).
    func follow(_ topic: FanoutTopic)
    /// Stops asking for the topic's messages.
    func unfollow(_ topic: FanoutTopic)
    /// Hands a channel event to every node following its channel.
    ///
    /// - Throws: `RoomStoreError.unavailable` when the bus cannot be reached (nothing sent).
    func publish(_ event: ChannelFanoutEvent) throws(RoomStoreError)
    /// Stops the bus; no report comes after it returns.
    func stop()
}

/// What a node follows: a room or a channel of an app.
public enum FanoutTopic: Hashable, Sendable {
    /// A room's kept events.
    case room(app: String, room: String)
    /// A (Pusher-style) channel's events.
    case channel(app: String, channel: String)
}

/// A channel event on its way to every node: an HTTP API publish or a client event.
public struct ChannelFanoutEvent: Hashable, Sendable {
    /// The app.
    public var app: String
    /// The channel.
    public var channel: String
    /// The event name.
    public var event: String
    /// The payload text, as published (`nil`: a client event without data).
    public var data: String?
    /// The sender's user id on a presence channel (a client event's `user_id`), else `nil`.
    public var userID: String?
    /// A socket id not to deliver to (the sender of a client event, the publisher's own
    /// connection of an HTTP publish with `socket_id`).
    public var excluding: String?

    /// Creates an event.
    public init(app: String, channel: String, event: String, data: String?, userID: String? = nil, excluding: String? = nil) {
        self.app = app
        self.channel = channel
        self.event = event
        self.data = data
        self.userID = userID
        self.excluding = excluding
    }
}

/// One message the bus brought.
public enum FanoutMessage: Hashable, Sendable {
    /// A room event as the history store kept it, in the store's order.
    case room(app: String, room: String, epoch: String, record: RoomEventRecord)
    /// A channel event.
    case channel(ChannelFanoutEvent)
}
