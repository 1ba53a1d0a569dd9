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
        public var socketID: String
        public var userID: String?
        public var channels: Int
        public var rooms: Int
        enum CodingKeys: String, CodingKey {
            case socketID = "socket_id", userID = "user_id", channels, rooms
        }
    }

    /// The app's connections on this node: how many, and the first `RealtimeHub.consoleListLimit`.
    public struct Connections: Sendable, Encodable {
        public var count: Int
        public var list: [Connection]
        public var truncated: Bool
    }

    /// One channel with subscribers.
    public struct Channel: Sendable, Encodable {
        public var name: String
        public var subscribers: Int
    }

    /// One room with members on this node.
    public struct Room: Sendable, Encodable {
        public var name: String
        public var members: Int
        /// Its users (at most `RealtimeHub.consoleMembersLimit`; anonymous members not listed).
        public var users: [String]
        /// The epoch of the room's stream as this node knows it, if any.
        public var epoch: String?
        /// The last kept event's id this node delivered or caught up to, if any.
        public var lastID: UInt64?
        enum CodingKeys: String, CodingKey {
            case name, members, users, epoch, lastID = "last_id"
        }
    }

    /// One presence channel's members on this node.
    public struct Presence: Sendable, Encodable {
        public var channel: String
        public var members: [String]
    }

    /// The node's counters, cumulative since it started (the same as `/metrics`): the console
    /// charts their rates.
    public struct Counters: Sendable, Encodable {
        public var eventsIn: Int
        public var deliveries: Int
        public var replays: Int
        public var refusals: Int
        public var connectionsOpened: Int
        public var connectionsClosed: Int
        enum CodingKeys: String, CodingKey {
            case eventsIn = "events_in", deliveries, replays, refusals
            case connectionsOpened = "connections_opened", connectionsClosed = "connections_closed"
        }
    }

    public var app: String
    /// When it was read, milliseconds since 1970.
    public var at: Int64
    public var connections: Connections
    public var channels: Listing<Channel>
    public var rooms: Listing<Room>
    public var presence: Listing<Presence>
    public var counters: Counters
}

extension RealtimeHub {
    /// Most connections, channels, rooms or presence channels a console snapshot lists.
    public static let consoleListLimit = 200
    /// Most members listed per room or presence channel in a snapshot.
    public static let consoleMembersLimit = 50
    /// Most channels or rooms looked at to pick the busiest `consoleListLimit` (a node with
    /// more shows the busiest of the first ones and says the list was cut).
    public static let consoleScanLimit = 5_000

    /// The console's snapshot of an app on this node, or `nil` for an app not served.
    ///
    /// Reads at most `consoleScanLimit` channels and rooms and `consoleListLimit` connections
    /// of the app under the lock; the busiest channels and rooms first.
    public func consoleSnapshot(appID: String) -> ConsoleSnapshot? {
        guard app(id: appID) != nil else { return nil }
        let limit = Self.consoleListLimit
        let snapshot = withState { state -> ConsoleSnapshot in
            var connections: [ConsoleSnapshot.Connection] = []
            let count = state.connectionsByApp[appID, default: 0]
            if count > 0 {
                for connection in state.connections.values where connection.app.id == appID {
                    connections.append(.init(socketID: connection.socketID, userID: connection.userID,
                                             channels: connection.channels.count, rooms: connection.rooms.count))
                    if connections.count == min(limit, count) { break }
                }
            }
            var channels: [ConsoleSnapshot.Channel] = []
            var presence: [ConsoleSnapshot.Presence] = []
            let appChannels = state.channels[appID] ?? [:]
            for (name, channel) in appChannels.prefix(Self.consoleScanLimit) where !channel.subscribers.isEmpty {
                channels.append(.init(name: name, subscribers: channel.subscribers.count))
                if !channel.members.isEmpty, presence.count < limit {
                    presence.append(.init(channel: name, members: Array(channel.members.keys.sorted().prefix(Self.consoleMembersLimit))))
                }
            }
            var rooms: [ConsoleSnapshot.Room] = []
            let appRooms = state.rooms[appID] ?? [:]
            for (name, room) in appRooms.prefix(Self.consoleScanLimit) {
                let users = room.members.values.compactMap(\.user)
                rooms.append(.init(name: name, members: room.order.count, users: Array(Set(users).sorted().prefix(Self.consoleMembersLimit)),
                                   epoch: room.cursor?.epoch ?? room.epoch, lastID: max(room.cursor?.id ?? 0, room.lastID ?? 0).nonZero))
            }
            channels.sort { ($0.subscribers, $1.name) > ($1.subscribers, $0.name) }
            rooms.sort { ($0.members, $1.name) > ($1.members, $0.name) }
            presence.sort { $0.channel < $1.channel }
            return ConsoleSnapshot(
                app: appID, at: 0,
                connections: .init(count: count, list: connections, truncated: count > connections.count),
                channels: .init(list: Array(channels.prefix(limit)), truncated: channels.count > limit || appChannels.count > Self.consoleScanLimit),
                rooms: .init(list: Array(rooms.prefix(limit)), truncated: rooms.count > limit || appRooms.count > Self.consoleScanLimit),
                presence: .init(list: presence, truncated: presence.count >= limit),
                counters: .init(eventsIn: 0, deliveries: 0, replays: 0, refusals: 0, connectionsOpened: 0, connectionsClosed: 0))
        }
        var result = snapshot
        result.at = wallMilliseconds()
        result.counters = consoleCounters
        return result
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
