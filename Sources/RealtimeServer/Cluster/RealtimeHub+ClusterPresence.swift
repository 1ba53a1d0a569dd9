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

    /// A user's first connection on `topic` on this node (`joined`), or its last one gone.
    /// Without a fan-out the change is everybody's: the answer is `true`, and the caller tells
    /// its members and sends `webhook`. With one, the cluster's registry in Redis says whether
    /// the user was on no other live node: the call is queued (`Delivery.presence`), runs on
    /// the topic's lane after the hub's lock is released, and sends `webhook` when it
    /// was a change, which the bus tells every node's members of, this one's too: the answer is
    /// `false`, nothing for the caller to do.
    ///
    /// - Returns: whether the caller announces the change to this node's members itself.
    func clusterPresence(joined: Bool, topic: FanoutTopic, user: String, info: JSONValue?, excluding: String, app: RealtimeApp,
                         webhook event: WebhookEvent, in state: inout State) -> Bool {
        guard configurationStorage.fanout != nil else { return true }
        state.queue(.presence(ClusterPresenceChange(joined: joined, topic: topic, user: user, info: info.flatMap { try? RealtimeMessage.jsonText($0) },
                                                    excluding: excluding, app: app, webhook: event)))
        return false
    }

    /// Performs a queued presence change, with no lock held: on the topic's lane. A call that
    /// fails, or that a full lane cannot take, is left to the next sweep's reconcile, which
    /// tells everybody of what it changes, once.
    func submitClusterPresence(_ change: ClusterPresenceChange) {
        guard let fanout = configurationStorage.fanout else { return }
        let queued = submitPresenceWork(on: change.topic) { [self] in
            do throws(RoomStoreError) {
                let changed = change.joined
                    ? try fanout.presenceJoin(change.topic, user: change.user, info: change.info, excluding: change.excluding)
                    : try fanout.presenceLeave(change.topic, user: change.user, excluding: change.excluding)
                if changed { webhook(change.app, change.webhook) }
            } catch {
                // Whether the script ran is unknown: the bus marked the topic for reconcile.
                log("presence of \(change.user.prefix(80)) on \(change.topic) left to the next sweep: \(error)")
            }
        }
        if !queued {
            metrics.roomLaneRefused.bump()
            fanout.presenceSuspect(change.topic)
            log("presence of \(change.user.prefix(80)) on \(change.topic) left to the next sweep: the room lane is full")
        }
    }

    /// Queues the node's `job` about `topic`'s presence on the lane of the shard holding the
    /// topic's registry (a room's is its history's, in order with the room's requests): a
    /// frozen master holds its own topics' calls only.
    ///
    /// - Returns: whether the job was queued (`false`: that lane is full).
    func submitPresenceWork(on topic: FanoutTopic, _ job: @escaping @Sendable () -> Void) -> Bool {
        lane.submit(LaneJob(client: RoomLane.node, room: topic.room, shard: configurationStorage.fanout?.shard(of: topic), run: job, refused: {}))
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
            guard var channel = state.channels[appID]?[name] else { return }
            guard var view = channel.clusterView else { return keepViewChange(change, channel: name, app: appID, in: &state) }
            guard Self.apply(change, info: info, to: &view) else { return }
            channel.clusterView = view
            state.channels[appID]?[name] = channel
            let payload = PresenceMember(userID: change.user, userInfo: change.joined ? info : nil)
            for socketID in channel.subscribers where socketID != change.excluding {
                guard let target = state.connections[socketID], target.presenceUser[name] != change.user else { continue }
                state.send(Self.message(target.namespace.internalEvent(change.joined ? .memberAdded : .memberRemoved), channel: name, payload: payload), to: target)
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
                state.send(RoomFrame.system(event, data: data, room: name, namespace: connection.namespace), to: connection)
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
    ///
    /// - Returns: whether the node has a view of the topic (nothing is done without one).
    @discardableResult
    func applyPresenceList(_ topic: FanoutTopic, members: [(user: String, info: JSONValue?)], in state: inout State) -> Bool {
        let current: [String: JSONValue?]
        switch topic {
        case .channel(let app, let name): guard let view = state.channels[app]?[name]?.clusterView else { return false }; current = view
        case .room(let app, let name): guard let view = state.rooms[app]?[name]?.clusterView else { return false }; current = view
        case .app: return false
        }
        let listed = Dictionary(members.map { ($0.user, $0.info) }, uniquingKeysWith: { first, _ in first })
        for (user, info) in listed where current[user] == nil {
            deliverPresence(PresenceFanoutEvent(topic: topic, user: user, info: info.flatMap { try? RealtimeMessage.jsonText($0) }, joined: true), in: &state)
        }
        for user in current.keys where listed[user] == nil {
            deliverPresence(PresenceFanoutEvent(topic: topic, user: user, info: nil, joined: false), in: &state)
        }
        return true
    }

    /// The sweep's presence step, on a lane of its own (`presenceLane`; skipped while one
    /// waits): this node's present users handed to the bus, which keeps the node alive and
    /// announces what changed to every node (never behind room work: a lane busy for the
    /// liveness key's 5 s would let the other nodes take this one for dead); the webhooks of
    /// the changes this node found are sent here. A reconcile, when the bus asks for one, runs
    /// on the lane (`reconcileClusterPresence`).
    func sweepClusterPresence() {
        guard let fanout = configurationStorage.fanout else { return }
        presenceLane.submitOnce("presence sweep") { [self] in
            let local = withState { presenceSnapshot(in: $0) }
            do throws(RoomStoreError) {
                presenceWebhooks(try fanout.presenceSweep(local: local))
            } catch {
                log("cluster presence not refreshed: \(error)")
            }
            if fanout.presenceNeedsReconcile { reconcileClusterPresence(fanout) }
        }
    }

    /// Queues the reconcile on the lane (one at a time): the snapshot of this node's members
    /// is read under the lock as it starts, the script run without it. A topic's joins and
    /// leaves run on its shard's lane, which on a Redis Cluster is not this one: one that ran
    /// meanwhile may have reached the registry before the script, which then undid it. So a
    /// topic whose members changed between the snapshot and the script's end is reconciled
    /// again at the next sweep, until one reconcile sees it still.
    private func reconcileClusterPresence(_ fanout: any RealtimeFanout) {
        lane.submitOnce("presence reconcile") { [self] in
            let local = withState { presenceSnapshot(in: $0) }
            do throws(RoomStoreError) {
                presenceWebhooks(try fanout.presenceReconcile(local: local))
            } catch {
                log("cluster presence not reconciled: \(error)")
            }
            let after = withState { presenceSnapshot(in: $0) }
            for topic in Set(local.keys).union(after.keys) where local[topic] != after[topic] { fanout.presenceSuspect(topic) }
        }
    }

    /// The webhooks of presence changes this node's sweep or reconcile made (the bus brings the
    /// changes themselves to every node, this one too).
    private func presenceWebhooks(_ changes: [PresenceFanoutEvent]) {
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

/// A user's presence on a topic changed on this node (its first connection, or its last one
/// gone), for the cluster's registry: decided under the hub's lock, performed after it.
struct ClusterPresenceChange: Sendable {
    var joined: Bool
    var topic: FanoutTopic
    var user: String
    /// The user's info as JSON text.
    var info: String?
    /// The connection the change comes from (the registry's member key).
    var excluding: String
    var app: RealtimeApp
    /// Sent when the registry says it was a change for the cluster.
    var webhook: WebhookEvent
}
