import RealtimeProtocol
import Synchronization

/// What the operator's console shows of one app on this node: a snapshot read under the hub's
/// lock in one bounded pass (`RealtimeHub.consoleSnapshot`), so a console open on a busy node
/// costs a bounded read a second, never a scan of every connection of every app.
public struct ConsoleSnapshot: Sendable, Encodable {
    /// A list cut at its limit, and whether it was cut.
    public struct Listing<Item: Sendable & Encodable>: Sendable, Encodable {
        /// The items shown.
        public var list: [Item]
        /// Whether there were more than shown.
        public var truncated: Bool
    }

    /// One connection.
    public struct Connection: Sendable, Encodable {
        /// Its socket id (Pusher protocol, `connection_established`).
        public var socketID: String
        /// The user it signed in as, if it did.
        public var userID: String?
        /// How many channels it is subscribed to.
        public var channels: Int
        /// How many rooms it is a member of.
        public var rooms: Int
        enum CodingKeys: String, CodingKey {
            case socketID = "socket_id", userID = "user_id", channels, rooms
        }
    }

    /// The app's connections on this node: how many, and the first `RealtimeHub.consoleListLimit`.
    public struct Connections: Sendable, Encodable {
        /// The app's open connections on this node.
        public var count: Int
        /// The first ones found (at most `RealtimeHub.consoleListLimit`).
        public var list: [Connection]
        /// Whether `list` holds fewer than `count`.
        public var truncated: Bool
    }

    /// One channel with subscribers.
    public struct Channel: Sendable, Encodable {
        /// The channel's name.
        public var name: String
        /// Its subscribers on this node.
        public var subscribers: Int
    }

    /// One room with members on this node.
    public struct Room: Sendable, Encodable {
        /// The room's name.
        public var name: String
        /// Its members on this node (connections).
        public var members: Int
        /// Its users (at most `RealtimeHub.consoleMembersLimit`; anonymous members not listed).
        public var users: [String]
        /// The epoch of the room's stream as this node knows it, if any.
        public var epoch: String?
        /// The last kept event's id this node delivered or caught up to, if any.
        public var lastID: UInt64?
        /// The most events the room keeps now: its rule's `history`, or fewer when its epoch
        /// has had fewer (`lastID`); those older than the rule's span are gone too.
        public var keptAtMost: Int
        /// The rule's span: seconds an event is kept.
        public var spanSeconds: Int
        enum CodingKeys: String, CodingKey {
            case name, members, users, epoch, lastID = "last_id", keptAtMost = "kept_at_most", spanSeconds = "span_seconds"
        }
    }

    /// One presence channel's members: the cluster's as this node was told them when it has
    /// a view from the bus, else this node's.
    public struct Presence: Sendable, Encodable {
        /// The presence channel's name.
        public var channel: String
        /// Its user ids, sorted (at most `RealtimeHub.consoleMembersLimit`).
        public var members: [String]
    }

    /// The node's counters, cumulative since it started (the same as `/metrics`): the console
    /// charts their rates. `nil` for a session of one app on a node that serves several (the
    /// node's counters would show the other apps' traffic).
    public struct Counters: Sendable, Encodable {
        /// Channel and room events this node handed out (`realtime_events_total`; one per
        /// event, recipients or not).
        public var eventsIn: Int
        /// Frames queued to clients (`realtime_messages_sent_total`).
        public var deliveries: Int
        /// Room events sent again from history (`realtime_room_events_replayed_total`).
        public var replays: Int
        /// Connections, subscriptions and room requests refused, and protocol errors.
        public var refusals: Int
        /// Connections accepted (`realtime_connections_opened_total`).
        public var connectionsOpened: Int
        /// Connections ended (`realtime_connections_closed_total`).
        public var connectionsClosed: Int
        enum CodingKeys: String, CodingKey {
            case eventsIn = "events_in", deliveries, replays, refusals
            case connectionsOpened = "connections_opened", connectionsClosed = "connections_closed"
        }
    }

    /// The app's id.
    public var app: String
    /// When it was read, milliseconds since 1970.
    public var at: Int64
    /// Its connections on this node.
    public var connections: Connections
    /// Its channels with subscribers, busiest first.
    public var channels: Listing<Channel>
    /// Its rooms with members on this node, largest first.
    public var rooms: Listing<Room>
    /// Its presence channels' members, by channel name.
    public var presence: Listing<Presence>
    /// The node's counters (see `Counters` for when they are left out).
    public var counters: Counters?
}

extension RealtimeHub {
    /// Most connections, channels, rooms or presence channels a console snapshot lists.
    public static let consoleListLimit = 200
    /// Most members listed per room or presence channel in a snapshot.
    public static let consoleMembersLimit = 50
    /// Most members looked at per listed room or presence channel.
    public static let consoleMembersScanLimit = 500
    /// Most channels or rooms looked at to pick the busiest `consoleListLimit` (a node with
    /// more shows the busiest of the first ones and says the list was cut).
    public static let consoleScanLimit = 5_000

    /// The console's snapshot of an app on this node, or `nil` for an app not served.
    ///
    /// Bounded whatever the node holds: it looks at most at `consoleScanLimit` connections of
    /// the node (to list the app's first `consoleListLimit`), `consoleScanLimit` channels and
    /// rooms of the app (to list the busiest `consoleListLimit`), and then only for the rooms
    /// and presence channels listed at most `consoleMembersScanLimit` members each (to list
    /// `consoleMembersLimit` users). All under the hub's lock, so `OperatorConsole` asks at
    /// most `OperatorConsole.snapshotsPerSecond` times a second per app.
    public func consoleSnapshot(appID: String) -> ConsoleSnapshot? {
        guard app(id: appID) != nil else { return nil }
        let limit = Self.consoleListLimit, scan = Self.consoleScanLimit
        /// At most `consoleMembersLimit` distinct users of `users`, looking at `consoleMembersScanLimit`.
        func listed(_ users: some Sequence<String>) -> [String] {
            var found = Set<String>()
            for user in users.prefix(Self.consoleMembersScanLimit) where found.count < Self.consoleMembersLimit { found.insert(user) }
            return found.sorted()
        }
        var snapshot = withState { state -> ConsoleSnapshot in
            var connections: [ConsoleSnapshot.Connection] = []
            let count = state.connectionsByApp[appID, default: 0]
            if count > 0 {
                for connection in state.connections.values.prefix(scan) where connection.app.id == appID {
                    connections.append(.init(socketID: connection.socketID, userID: connection.userID,
                                             channels: connection.channels.count, rooms: connection.rooms.count))
                    if connections.count == min(limit, count) { break }
                }
            }
            let appChannels = state.channels[appID] ?? [:]
            var busiest = appChannels.prefix(scan).filter { !$0.value.subscribers.isEmpty }
                .map { (name: $0.key, subscribers: $0.value.subscribers.count) }
            busiest.sort { ($0.subscribers, $1.name) > ($1.subscribers, $0.name) }
            let channels = busiest.prefix(limit).map { ConsoleSnapshot.Channel(name: $0.name, subscribers: $0.subscribers) }
            var presence: [ConsoleSnapshot.Presence] = []
            for channel in channels {
                guard let record = appChannels[channel.name] else { continue }
                if let view = record.clusterView, !view.isEmpty {
                    presence.append(.init(channel: channel.name, members: listed(view.keys)))
                } else if !record.members.isEmpty {
                    presence.append(.init(channel: channel.name, members: listed(record.members.keys)))
                }
            }
            let appRooms = state.rooms[appID] ?? [:]
            var largest = appRooms.prefix(scan).map { (name: $0.key, members: $0.value.order.count) }
            largest.sort { ($0.members, $1.name) > ($1.members, $0.name) }
            let rooms = largest.prefix(limit).compactMap { entry -> ConsoleSnapshot.Room? in
                guard let room = appRooms[entry.name] else { return nil }
                let users = room.clusterView.map { listed($0.keys) } ?? listed(room.members.values.prefix(Self.consoleMembersScanLimit).lazy.compactMap(\.user))
                let lastID = max(room.cursor?.id ?? 0, room.lastID ?? 0)
                return .init(name: entry.name, members: entry.members, users: users, epoch: room.cursor?.epoch ?? room.epoch, lastID: lastID.nonZero,
                             keptAtMost: Int(min(lastID, UInt64(room.rule.history))), spanSeconds: room.rule.span)
            }
            presence.sort { $0.channel < $1.channel }
            return ConsoleSnapshot(
                app: appID, at: 0,
                connections: .init(count: count, list: connections, truncated: count > connections.count),
                channels: .init(list: channels, truncated: busiest.count > limit || appChannels.count > scan),
                rooms: .init(list: rooms, truncated: largest.count > limit || appRooms.count > scan),
                presence: .init(list: presence, truncated: busiest.count > limit || appChannels.count > scan),
                counters: nil)
        }
        snapshot.at = wallMilliseconds()
        snapshot.counters = consoleCounters
        return snapshot
    }

    /// The node's counters for the console's charts, read without the hub's lock.
    var consoleCounters: ConsoleSnapshot.Counters {
        let m = metrics
        let refusals = m.refusedUnknownApp.load(ordering: .relaxed) + m.refusedOverCapacity.load(ordering: .relaxed)
            + m.refusedShuttingDown.load(ordering: .relaxed) + m.subscriptionsRefused.load(ordering: .relaxed)
            + m.roomLaneRefused.load(ordering: .relaxed) + m.protocolErrors.load(ordering: .relaxed)
        return .init(eventsIn: m.eventsPublished.load(ordering: .relaxed), deliveries: m.messagesSent.load(ordering: .relaxed),
                     replays: m.eventsReplayed.load(ordering: .relaxed), refusals: refusals,
                     connectionsOpened: m.connectionsOpened.load(ordering: .relaxed), connectionsClosed: m.connectionsClosed.load(ordering: .relaxed))
    }
}

extension UInt64 {
    /// `nil` for 0.
    fileprivate var nonZero: UInt64? { self == 0 ? nil : self }
}

extension RealtimeHub {
    /// The apps this hub serves.
    public var apps: [RealtimeApp] { configurationStorage.apps }

    /// Open connections on this node by app id (apps with none absent).
    public func connectionCounts() -> [String: Int] { withState { $0.connectionsByApp } }
}
