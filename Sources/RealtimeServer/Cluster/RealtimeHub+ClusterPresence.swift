import RealtimeProtocol

/// Presence across the nodes of a cluster (DESIGN.md, "Scale-out"): a presence channel's or
/// presence room's members are every live node's, `member_added`/`member_removed` (a room's
/// `join`/`leave`) go out once per user whichever nodes its connections are on, and a dead
/// node's members leave within `RealtimeHub.presenceDeadNodeBound` through the bus's TTLs.
/// Without a fan-out each rule is the node's own, as before.
extension RealtimeHub {
    /// How long after a node dies its members are taken out of presence at the latest: its
    /// liveness key's TTL (5 s, refreshed every sweep) plus one sweep of a surviving node, with
    /// room to spare.
    public static let presenceDeadNodeBound = Duration.seconds(10)

    /// What to do with a presence change this node saw locally (a user's first or last
    /// connection here).
    enum PresenceVerdict: Equatable {
        /// Not a change for everybody (the user is on another node too).
        case none
        /// A change this node tells its own members of: without a fan-out.
        case announceHere
        /// A change the bus tells every node of, this one included, in one order for all.
        case announcedByBus

        var isChange: Bool { self != .none }
    }

    func clusterPresence(joined: Bool, topic: FanoutTopic, user: String, info: JSONValue?, excluding: String) -> PresenceVerdict {
        guard let fanout = configurationStorage.fanout else { return .announceHere }
        do throws(RoomStoreError) {
            let changed: Bool
            if joined {
                let text = info.flatMap { try? RealtimeMessage.jsonText($0) }
                changed = try fanout.presenceJoin(topic, user: user, info: text, excluding: excluding)
            } else {
                changed = try fanout.presenceLeave(topic, user: user, excluding: excluding)
            }
            return changed ? .announcedByBus : .none
        } catch {
            // Whether the script ran is unknown: the next sweep's reconcile makes the node's
            // registration right and tells everybody (this node too) of what it changed, once.
            log("presence of \(user.prefix(80)) on \(topic) left to the next sweep: \(error)")
            return .none
        }
    }

    /// The members every live node has on `topic`, or `nil` without a fan-out or when the bus
    /// cannot be reached (the caller lists its own).
    func clusterMembers(_ topic: FanoutTopic, limit: Int) -> [(user: String, info: JSONValue?)]? {
        guard let fanout = configurationStorage.fanout else { return nil }
        do throws(RoomStoreError) {
            return try fanout.presenceMembers(topic, limit: limit).map { ($0.user, $0.info.flatMap(StrictJSON.parse)) }
        } catch {
            log("members of \(topic) listed from this node only: \(error)")
            return nil
        }
    }

    /// This node's present users per presence topic, with their info as JSON text.
    func presenceSnapshot(in state: State) -> [FanoutTopic: [String: String?]] {
        var local: [FanoutTopic: [String: String?]] = [:]
        for (app, channels) in state.channels {
            for (name, channel) in channels where !channel.members.isEmpty {
                local[.channel(app: app, channel: name)] = channel.members.mapValues { member in member.info.flatMap { try? RealtimeMessage.jsonText($0) } }
            }
        }
        for (app, rooms) in state.rooms {
            for (name, room) in rooms where room.rule.presence {
                var users: [String: String?] = [:]
                for (key, sockets) in room.users {
                    guard let socketID = sockets.first, let member = room.members[socketID], let user = member.user, user == key else { continue }
                    // `updateValue`: assigning a nil info through the subscript would drop the user.
                    users.updateValue(member.info.flatMap { try? RealtimeMessage.jsonText($0) }, forKey: user)
                }
                // Also with no named member here: its anonymous members are told when a dead
                // node's users leave.
                local[.room(app: app, room: name)] = users
            }
        }
        return local
    }

    /// Tells this node's members of a presence change the bus brought, if it changes the node's
    /// view (`Channel.clusterView`, `Room.clusterView`): a user already listed is not told
    /// again, nor one never listed told gone; nor is a socket told of its own user.
    func deliverPresence(_ change: PresenceFanoutEvent, in state: inout State) {
        let info = change.info.flatMap(StrictJSON.parse)
        switch change.topic {
        case .channel(let appID, let name):
            guard var channel = state.channels[appID]?[name], var view = channel.clusterView else { return }
            guard Self.apply(change, info: info, to: &view) else { return }
            channel.clusterView = view
            state.channels[appID]?[name] = channel
            let payload = PresenceMember(userID: change.user, userInfo: change.joined ? info : nil)
            for socketID in channel.subscribers where socketID != change.excluding {
                guard let target = state.connections[socketID], target.presenceUser[name] != change.user else { continue }
                target.output.send(text: Self.message(target.namespace.internalEvent(change.joined ? .memberAdded : .memberRemoved), channel: name, payload: payload))
            }
        case .room(let appID, let name):
            guard var room = state.rooms[appID]?[name], var view = room.clusterView else { return }
            guard Self.apply(change, info: info, to: &view) else { return }
            room.clusterView = view
            state.rooms[appID]?[name] = room
            let data = Self.memberJSON(change.user, info: change.joined ? info : nil)
            let event = change.joined ? RoomSystemEvent.join : RoomSystemEvent.leave
            for socketID in room.order where socketID != change.excluding && room.members[socketID]?.user != change.user {
                guard let connection = state.connections[socketID] else { continue }
                connection.output.send(text: RoomFrame.system(event, data: data, room: name, namespace: connection.namespace))
            }
        case .app:
            break
        }
    }

    /// Applies a change to a view; false when it changes nothing.
    static func apply(_ change: PresenceFanoutEvent, info: JSONValue?, to view: inout [String: JSONValue?]) -> Bool {
        if change.joined {
            guard view[change.user] == nil else { return false }
            view.updateValue(info, forKey: change.user)
        } else {
            guard view.removeValue(forKey: change.user) != nil else { return false }
        }
        return true
    }

    /// Brings a node's view of a topic to `members` (the cluster's, read again), telling this
    /// node's members of each difference as an arrival or a departure.
    func applyPresenceList(_ topic: FanoutTopic, members: [(user: String, info: JSONValue?)], in state: inout State) {
        let current: [String: JSONValue?]
        switch topic {
        case .channel(let app, let name): guard let view = state.channels[app]?[name]?.clusterView else { return }; current = view
        case .room(let app, let name): guard let view = state.rooms[app]?[name]?.clusterView else { return }; current = view
        case .app: return
        }
        let listed = Dictionary(members.map { ($0.user, $0.info) }, uniquingKeysWith: { first, _ in first })
        for (user, info) in listed where current[user] == nil {
            deliverPresence(PresenceFanoutEvent(topic: topic, user: user, info: info.flatMap { try? RealtimeMessage.jsonText($0) }, joined: true), in: &state)
        }
        for user in current.keys where listed[user] == nil {
            deliverPresence(PresenceFanoutEvent(topic: topic, user: user, info: nil, joined: false), in: &state)
        }
    }

    /// The sweep's presence step: this node's present users handed to the bus (outside the
    /// hub's lock), which announces what changed to every node; the webhooks of the changes
    /// this node found are sent here.
    func sweepClusterPresence() {
        guard let fanout = configurationStorage.fanout else { return }
        let local = state.withLock { presenceSnapshot(in: $0) }
        var changes: [PresenceFanoutEvent] = []
        do throws(RoomStoreError) {
            changes = try fanout.presenceSweep(local: local)
            if fanout.presenceNeedsReconcile {
                // Under the lock, with the members as they are now: no join or leave between
                // the snapshot and the script.
                changes += try state.withLock { state throws(RoomStoreError) in try fanout.presenceReconcile(local: presenceSnapshot(in: state)) }
            }
        } catch {
            log("cluster presence not refreshed: \(error)")
        }
        guard !changes.isEmpty else { return }
        // The bus brings these changes to every node, this one too: only the webhooks are this
        // node's to send.
        state.withLock { state in
            for change in changes {
                switch change.topic {
                case .channel(let appID, let channel):
                    if let app = app(id: appID) { webhook(app, .init(name: change.joined ? "member_added" : "member_removed", channel: channel, userID: change.user)) }
                case .room(let appID, let room):
                    if let app = app(id: appID) { webhook(app, .init(name: change.joined ? "room_member_added" : "room_member_removed", room: room, userID: change.user)) }
                case .app:
                    break
                }
            }
        }
    }
}
