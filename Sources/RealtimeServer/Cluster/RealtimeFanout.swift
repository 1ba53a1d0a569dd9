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
/// methods) on its own thread; `follow`/`unfollow` are called after the hub's lock, in the
/// order the hub decided them, and must only record the change (no blocking, no calls back). `publish` and `terminate` must not
/// block either (queue the message). The presence calls (`presenceJoin`, `presenceLeave`,
/// `presenceReconcile`) are made on the hub's lane (`RoomLane`), one at a time, never under
/// its lock; `presenceMembers` too.
public protocol RealtimeFanout: Sendable {
    /// Starts the bus, which reports to `receiver` (the hub) from now on.
    func start(_ receiver: any FanoutReceiver)
    /// Asks for the topic's messages (nothing when followed already).
    func follow(_ topic: FanoutTopic)
    /// Stops asking for the topic's messages.
    func unfollow(_ topic: FanoutTopic)
    /// Hands a channel event to every node following its channel.
    ///
    /// - Throws: `RoomStoreError.unavailable` when the bus cannot be reached (nothing sent).
    func publish(_ event: ChannelFanoutEvent) throws(RoomStoreError)
    /// Asks every other node to close the user's connections with 4009 (Pusher's
    /// `terminate_connections`; this node closes its own).
    ///
    /// - Throws: `RoomStoreError.unavailable` when the bus cannot be reached (nothing sent).
    func terminate(app: String, user: String) throws(RoomStoreError)

    /// Asks every other node to remove `user` from `room` (the HTTP API's kick; this node
    /// kicks its own connections itself).
    ///
    /// - Parameters:
    ///   - app: the app's id.
    ///   - room: the room's name.
    ///   - user: the user removed.
    ///   - reason: shown to the user in `kicked`, or `nil`.
    /// - Throws: `RoomStoreError.unavailable` when the bus cannot take the request.
    func kick(app: String, room: String, user: String, reason: String?) throws(RoomStoreError)
    /// Stops the bus; no report comes after it returns.
    func stop()

    // MARK: Presence across nodes

    /// Records that `user` is present on `topic` through this node (its first local connection
    /// there); when the user was on no live node before, the other nodes following the topic are
    /// told in the same step (this node tells its own members).
    ///
    /// - Parameters:
    ///   - topic: the presence channel or room.
    ///   - user: the user's id.
    ///   - info: the member's info as JSON text, or `nil`.
    ///   - excluding: the arriving socket (not told).
    /// - Returns: whether the user was on no live node before: the one `member_added`.
    /// - Throws: `RoomStoreError.unavailable` when the bus cannot be reached.
    func presenceJoin(_ topic: FanoutTopic, user: String, info: String?, excluding: String) throws(RoomStoreError) -> Bool

    /// Records that `user` left `topic` on this node (its last local connection there); when it
    /// is now on no node, the other nodes following the topic are told in the same step.
    ///
    /// - Parameters:
    ///   - topic: the presence channel or room.
    ///   - user: the user's id.
    ///   - excluding: the leaving socket (not told).
    /// - Returns: whether the user is now on no node: the one `member_removed`.
    /// - Throws: `RoomStoreError.unavailable` when the bus cannot be reached.
    func presenceLeave(_ topic: FanoutTopic, user: String, excluding: String) throws(RoomStoreError) -> Bool

    /// The users present on `topic` on every live node, each once, sorted by id, with their
    /// info as JSON text.
    ///
    /// - Parameters:
    ///   - topic: the presence channel or room.
    ///   - limit: the most members returned.
    /// - Throws: `RoomStoreError.unavailable` when the bus cannot be reached.
    func presenceMembers(_ topic: FanoutTopic, limit: Int) throws(RoomStoreError) -> [(user: String, info: String?)]

    /// `presenceMembers` for several topics at once (one round trip), in the order asked.
    ///
    /// - Throws: `RoomStoreError.unavailable` when the bus cannot be reached.
    func presenceMembers(_ topics: [FanoutTopic], limit: Int) throws(RoomStoreError) -> [[(user: String, info: String?)]]

    /// The periodic step (every sweep, about once a second, outside the hub's lock): says this
    /// node is alive and takes dead nodes' members out of the topics this node has presence in;
    /// the other nodes are told of every change in the same steps.
    ///
    /// - Parameter local: this node's present users per topic, with their info as JSON text.
    /// - Returns: the changes it made (for this node's webhooks).
    /// - Throws: `RoomStoreError.unavailable` when the bus cannot be reached.
    func presenceSweep(local: [FanoutTopic: [String: String?]]) throws(RoomStoreError) -> [PresenceFanoutEvent]

    /// Whether this node's registration may differ from its members somewhere (a presence call
    /// failed, or the node was taken for dead): then the hub calls `presenceReconcile`.
    var presenceNeedsReconcile: Bool { get }

    /// Marks `topic` for the next `presenceReconcile`: a presence change the hub could not
    /// hand to `presenceJoin` or `presenceLeave` (its lane was full).
    func presenceSuspect(_ topic: FanoutTopic)

    /// Makes this node's registration match `local` where it may differ, telling everybody of
    /// each change. Called on the hub's lane (`RoomLane`) with `local` read just before, so no
    /// other presence call runs meanwhile.
    ///
    /// - Returns: the changes it made (for this node's webhooks).
    /// - Throws: `RoomStoreError.unavailable` when the bus cannot be reached.
    func presenceReconcile(local: [FanoutTopic: [String: String?]]) throws(RoomStoreError) -> [PresenceFanoutEvent]

    /// Whether the bus's server answers now, read without waiting for anything: the health
    /// check's second half (the first is whether the bus is connected). A bus whose server
    /// stopped answering says so at once, before its connection times out.
    var isResponsive: Bool { get }

    /// The bus's shards and whether each is up, for `/health` and `/metrics` (a Redis
    /// Cluster's masters); empty for a bus that is not sharded. A shard that is down stops only
    /// the rooms and channels it holds.
    var shardStatus: [FanoutShardStatus] { get }

    /// The shard holding `topic`'s presence registry as far as is known without asking (a
    /// Redis Cluster master's address, as `RoomHistoryStore.shard` names it), or `""`: the
    /// hub runs the topic's presence calls on that shard's lane.
    func shard(of topic: FanoutTopic) -> String

    /// Whether the bus's connection to `shard` (a name `shard(of:)` gives) answered its last
    /// command in time, known without asking, or `nil` when the bus cannot tell (the health
    /// check then asks the history store alone: `RealtimeHub.stalledStoreShards`).
    func isAnswering(shard: String) -> Bool?
}

extension RealtimeFanout {
    /// `""`: a bus that is not sharded.
    public func shard(of topic: FanoutTopic) -> String { "" }

    /// `nil`: the bus cannot tell.
    public func isAnswering(shard: String) -> Bool? { nil }

    /// Responsive whenever connected: for a bus that cannot tell more.
    public var isResponsive: Bool { true }

    /// No shards: for a bus that is not sharded.
    public var shardStatus: [FanoutShardStatus] { [] }
}

/// One shard of the cluster's bus (a Redis Cluster master) and whether it is up.
public struct FanoutShardStatus: Hashable, Sendable {
    /// The shard's master's address (`redis://host:port`): a failover changes it.
    public var name: String
    /// The slot ranges it serves (`0-5460`, several joined by commas): the same across a
    /// failover, so alerts and dashboards key on it.
    public var slots: String
    /// Whether it is connected and answering.
    public var up: Bool

    /// Creates a status.
    public init(name: String, slots: String, up: Bool) {
        self.name = name
        self.slots = slots
        self.up = up
    }
}

/// A user arriving on or leaving a presence channel or room, cluster-wide (once per user).
public struct PresenceFanoutEvent: Hashable, Sendable {
    /// The presence channel or room.
    public var topic: FanoutTopic
    /// The user id.
    public var user: String
    /// The member's info as JSON text (arrivals), else `nil`.
    public var info: String?
    /// An arrival (`member_added`, a room's `join`) or a departure (`member_removed`, `leave`).
    public var joined: Bool
    /// The socket not to tell (the arriving or leaving connection).
    public var excluding: String?

    /// Creates a change.
    public init(topic: FanoutTopic, user: String, info: String?, joined: Bool, excluding: String? = nil) {
        self.topic = topic
        self.user = user
        self.info = info
        self.joined = joined
        self.excluding = excluding
    }
}

/// What a node follows: a room or a channel of an app.
public enum FanoutTopic: Hashable, Sendable {
    /// A room's kept events.
    case room(app: String, room: String)
    /// A (Pusher-style) channel's events.
    case channel(app: String, channel: String)
    /// An app's requests to every node (`terminate_connections`): followed by every node for
    /// each app it serves, from its start.
    case app(String)

    /// The room a `.room` topic names (its app and name), else `nil`.
    var room: (app: String, room: String)? {
        if case .room(let app, let room) = self { (app, room) } else { nil }
    }
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
    /// A presence change on a channel or room.
    case presence(PresenceFanoutEvent)
    /// Close every connection of the user with 4009.
    case terminateUser(app: String, user: String)
    /// Remove the user from a room on every connection, each told `kicked`.
    case kickRoomUser(app: String, room: String, user: String, reason: String?)
}

/// What a bus (`RealtimeFanout`) reports to: the hub (`RealtimeHub`), or a test's recorder. The
/// calls come on the bus's own thread; each returns without waiting on the bus.
public protocol FanoutReceiver: AnyObject, Sendable {
    /// A message the bus brought: delivered to this node's members of its room or channel.
    func fanoutReceived(_ message: FanoutMessage)
    /// The bus confirmed it follows `topic`: what was kept or changed before is caught up.
    func fanoutFollowing(_ topic: FanoutTopic)
    /// The bus is connected (again) and follows every topic.
    func fanoutReady()
    /// The bus lost its connection, for `reason` (logged).
    func fanoutLost(_ reason: String)
}
