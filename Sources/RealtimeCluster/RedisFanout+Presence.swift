import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport

/// Presence across nodes on Redis (`RealtimeFanout`'s presence calls; DESIGN.md, "Scale-out"):
/// per topic a members hash (`<node>\n<user>` → info) and a users hash (user → how many nodes
/// have it), each change one Lua script (`PresenceScript`) that also publishes it, and a
/// liveness key per node with a TTL so a dead node's members are taken out.
extension RedisFanout {
    /// How long a node's registration lives without a refresh (every sweep, about once a
    /// second), in milliseconds: past it the node is dead to the others.
    public static let nodeTTL = 5000
    /// How long a topic's presence hashes live without a sweep of a node that has members there,
    /// in milliseconds.
    static let presenceTTL = 30_000
    /// The cluster's nodes: a sorted set, each node's id scored by when its registration ends
    /// (Redis' clock, ms), kept `deadRetention` after. One key (its own hash tag, so one shard
    /// of a Redis Cluster holds it): the presence scripts, which may touch only their topic's
    /// slot, are handed the nodes it lists as live (to list members) or ended (to take theirs
    /// out).
    static let nodesKey = "rt:{nodes}:live"
    /// Most nodes listed (live, or dead for the sweeps; a cluster of more is not planned for:
    /// past it, live ones count as dead to readers, and dead ones wait for later sweeps).
    static let maxNodes = 1000
    /// How long a node whose registration ended stays listed as dead, in milliseconds (10
    /// minutes): every live node's sweep (each second) takes its members out well within it,
    /// even after the nodes' shard was down a while. A node is never listed again (each start
    /// is a new id), so at most the nodes started in that time are.
    static let deadRetention = 600_000
    /// How long after a revival (the node found taken for dead) every registration has every
    /// topic reconciled again: another node's sweep that read the node as dead before it came
    /// back may take its members out after the first reconcile (3 s: a sweep's length).
    static let reconcilesAfterRevival = Duration.seconds(3)

    /// The topic's two presence hashes: members (`<node>\n<user>` → `n`, or `i` and the info's
    /// JSON) and users (user → how many nodes have it), under the topic's hash tag.
    static func presenceKeys(_ topic: FanoutTopic) -> [String] {
        [topic.hashTag + ":presence", topic.hashTag + ":presence-users"]
    }

    /// The master holding `topic`'s presence hashes in the slot map last read (`""` for one
    /// Redis, or before the first map).
    /// Whether the connection the presence calls use (`publisher`) to `shard` answered its
    /// last command in time (`RealtimeFanout`): a presence call on a frozen master holds that
    /// master's lane as a store request does.
    public func isAnswering(shard: String) -> Bool? {
        publisher.isAnswering(shard: shard)
    }

    public func shard(of topic: FanoutTopic) -> String {
        publisher.shard(forKey: Self.presenceKeys(topic)[0])
    }

    /// Registers this node among the live ones (`PresenceScript.alive`); a node found taken
    /// for dead since its last registration (or a Redis that lost everything) needs every
    /// topic reconciled.
    ///
    /// - Returns: the dead nodes (registrations that ended).
    /// - Throws: `RoomStoreError.unavailable`.
    @discardableResult
    func register() throws(RoomStoreError) -> [String] {
        let reply: RedisValue
        do {
            reply = try publisher.evaluate(presenceScripts.alive, keys: [Self.nodesKey],
                                           arguments: [router.node, String(Self.nodeTTL), String(Self.maxNodes), String(Self.deadRetention)])
        } catch {
            throw .unavailable("\(error)")
        }
        guard let values = reply.array, values.count == 2, let wasAlive = values[0].integer, let nodes = values[1].array else {
            throw .unavailable("an unexpected answer registering the node: \(String(describing: reply).prefix(120))")
        }
        let wasRegistered = registered.withLock { registered in
            defer { registered = (true, .now) }
            return registered.ever
        }
        let now = ContinuousClock.now
        if wasAlive == 0, wasRegistered { revivedAt.withLock { $0 = now } }
        if revivedAt.withLock({ $0.map { now - $0 < Self.reconcilesAfterRevival } ?? false }) { suspects.withLock { $0.all = true } }
        return nodes.compactMap(\.string)
    }

    /// The live nodes (`PresenceScript.live`), this one always among them.
    private func liveNodes() throws(RoomStoreError) -> [String] {
        let reply: RedisValue
        do {
            reply = try publisher.evaluate(presenceScripts.live, keys: [Self.nodesKey], arguments: [String(Self.maxNodes)])
        } catch {
            throw .unavailable("\(error)")
        }
        guard let nodes = reply.array else { throw .unavailable("an unexpected answer listing the nodes") }
        return Array(Set(nodes.compactMap(\.string) + [router.node]))
    }

    /// Registers the user on this node (`RealtimeFanout`); one script: the member, the user's
    /// node count, and the `member_added` publish when it is the first. The node registers
    /// itself first when its last registration is half its TTL old: a member is never added
    /// for a node the others take for dead.
    ///
    /// - Throws: `RoomStoreError.unavailable`.
    public func presenceJoin(_ topic: FanoutTopic, user: String, info: String?, excluding: String) throws(RoomStoreError) -> Bool {
        let change = PresenceFanoutEvent(topic: topic, user: user, info: info, joined: true, excluding: excluding)
        let arguments = [router.node, user, info.map { "i" + $0 } ?? "n", String(Self.presenceTTL), Self.channel(of: topic),
                         FanoutCodec.encode(change, origin: router.node)]
        do throws(RoomStoreError) {
            let fresh = registered.withLock { $0.at.map { ContinuousClock.now - $0 < .milliseconds(Self.nodeTTL / 2) } ?? false }
            if !fresh { try register() }
            return try integer(presenceScripts.join, (Self.presenceKeys(topic), arguments)) == 1
        } catch {
            suspect(topic)
            throw error
        }
    }

    /// Marks a topic for reconciliation at the next sweep (`RealtimeFanout`): also for a
    /// presence change the hub could not hand over.
    public func presenceSuspect(_ topic: FanoutTopic) { suspect(topic) }

    /// Marks a topic for reconciliation at the next sweep.
    private func suspect(_ topic: FanoutTopic) {
        suspects.withLock { suspects in
            if suspects.topics.count < Self.maxSuspects { suspects.topics.insert(topic) } else { suspects.all = true }
        }
    }

    /// Unregisters the user on this node (`RealtimeFanout`); the `member_removed` publish when
    /// it was the last, in the same script.
    ///
    /// - Throws: `RoomStoreError.unavailable`.
    public func presenceLeave(_ topic: FanoutTopic, user: String, excluding: String) throws(RoomStoreError) -> Bool {
        let call = (Self.presenceKeys(topic), [router.node, user, String(Self.presenceTTL), Self.channel(of: topic), excluding])
        do {
            return try integer(presenceScripts.leave, call) == 1
        } catch {
            suspect(topic)
            throw error
        }
    }

    /// Every live node's members of the topic, each user once, sorted (`RealtimeFanout`).
    ///
    /// - Throws: `RoomStoreError.unavailable`.
    public func presenceMembers(_ topic: FanoutTopic, limit: Int) throws(RoomStoreError) -> [(user: String, info: String?)] {
        try presenceMembers([topic], limit: limit)[0]
    }

    /// `presenceMembers` for several topics in one round trip (`RealtimeFanout`).
    ///
    /// - Throws: `RoomStoreError.unavailable`.
    public func presenceMembers(_ topics: [FanoutTopic], limit: Int) throws(RoomStoreError) -> [[(user: String, info: String?)]] {
        guard !topics.isEmpty else { return [] }
        let live = try liveNodes()
        let replies = try evaluate(presenceScripts.members, topics.map { (Self.presenceKeys($0), live) })
        return try replies.map { reply throws(RoomStoreError) in
            guard let values = reply.array, values.count % 2 == 0 else { throw .unavailable("an unexpected members answer") }
            var members: [(user: String, info: String?)] = []
            for index in stride(from: 0, to: values.count, by: 2) {
                guard let user = values[index].string, let value = values[index + 1].string else { continue }
                members.append((user, value.hasPrefix("i") ? String(value.dropFirst()) : nil))
            }
            return Array(members.sorted { $0.user < $1.user }.prefix(max(0, limit)))
        }
    }

    /// Refreshes this node's liveness and takes dead nodes' members out of this node's topics
    /// (`RealtimeFanout`); a node found taken for dead needs a reconcile.
    ///
    /// - Throws: `RoomStoreError.unavailable`.
    public func presenceSweep(local: [FanoutTopic: [String: String?]]) throws(RoomStoreError) -> [PresenceFanoutEvent] {
        let dead = try register()
        let topics = Array(local.keys)
        let calls = topics.map { topic in
            (keys: Self.presenceKeys(topic), arguments: [String(Self.presenceTTL), Self.channel(of: topic)] + dead)
        }
        var changes: [PresenceFanoutEvent] = []
        let replies = try evaluate(presenceScripts.cleanup, calls)
        for (topic, reply) in zip(topics, replies) {
            for user in reply.array ?? [] {
                if let user = user.string { changes.append(PresenceFanoutEvent(topic: topic, user: user, info: nil, joined: false)) }
            }
        }
        return changes
    }

    /// Whether a presence call failed (or this node was taken for dead) since the last
    /// reconcile (`RealtimeFanout`).
    public var presenceNeedsReconcile: Bool { suspects.withLock { !$0.topics.isEmpty || $0.all } }

    /// Makes this node's registration in each suspect topic (every topic of `local` too, after
    /// it was taken for dead) exactly its members there: one script per topic, which publishes
    /// each change that is one for everybody (`RealtimeFanout`); after it was taken for dead,
    /// also each of its users already registered, as present: a node that read the members
    /// meanwhile (dead nodes left out) dropped them from its view.
    ///
    /// - Throws: `RoomStoreError.unavailable` (the topics stay suspect).
    public func presenceReconcile(local: [FanoutTopic: [String: String?]]) throws(RoomStoreError) -> [PresenceFanoutEvent] {
        let (suspected, all) = suspects.withLock { suspects in
            defer { suspects = ([], false) }
            return (suspects.topics, suspects.all)
        }
        let order = Array(all ? Set(local.keys).union(suspected) : suspected)
        guard !order.isEmpty else { return [] }
        // Found taken for dead lately: the other nodes' reads left this node's users out.
        let announce = revivedAt.withLock { $0.map { ContinuousClock.now - $0 < Self.reconcilesAfterRevival } ?? false }
        let calls = order.map { topic in
            var arguments = [router.node, String(Self.presenceTTL), Self.channel(of: topic), announce ? "1" : "0"]
            for (user, info) in local[topic] ?? [:] { arguments += [user, info.map { "i" + $0 } ?? "n"] }
            return (keys: Self.presenceKeys(topic), arguments: arguments)
        }
        var changes: [PresenceFanoutEvent] = []
        do {
            // Registered first: nothing is added for a node the others take for dead.
            try register()
            let replies = try evaluate(presenceScripts.reconcile, calls)
            for (topic, reply) in zip(order, replies) {
                for entry in reply.array ?? [] {
                    guard let text = entry.string, let sign = text.first else { continue }
                    let user = String(text.dropFirst())
                    changes.append(PresenceFanoutEvent(topic: topic, user: user, info: sign == "+" ? (local[topic]?[user] ?? nil) : nil, joined: sign == "+"))
                }
            }
        } catch {
            for topic in order { suspect(topic) }
            if all { suspects.withLock { $0.all = true } }
            throw error
        }
        return changes
    }

    private func evaluate(_ script: String, _ calls: [(keys: [String], arguments: [String])]) throws(RoomStoreError) -> [RedisValue] {
        guard !calls.isEmpty else { return [] }
        var replies: [RedisValue] = []
        for start in stride(from: 0, to: calls.count, by: RedisConnection.maxPipeline) {
            let batch = Array(calls[start..<min(start + RedisConnection.maxPipeline, calls.count)])
            do {
                replies += try publisher.evaluate(script, calls: batch)
            } catch {
                throw .unavailable("\(error)")
            }
        }
        if let refusal = replies.first(where: { if case .error = $0 { true } else { false } }), case .error(let message) = refusal {
            throw .unavailable("Redis refused a presence script: \(message)")
        }
        return replies
    }

    private func integer(_ script: String, _ call: (keys: [String], arguments: [String])) throws(RoomStoreError) -> Int64 {
        guard let value = try evaluate(script, [call])[0].integer else { throw .unavailable("an unexpected presence answer") }
        return value
    }

    /// The presence scripts. KEYS: the topic's members and users hashes.
}

extension FanoutTopic {
    /// The Redis Cluster hash tag every key and channel of the topic shares, so they live on one
    /// slot (Redis Cluster specification, "Hash tags"): `rt:{<app length>:<app>:<room>}` for a
    /// room (its history, append marks, live channel and presence), `rt:{ch:…}` for a channel
    /// and `rt:{app:…}` for an app's signed-in users. The app's length first keeps two apps'
    /// names from running into each other.
    var hashTag: String {
        switch self {
        case .room(let app, let room): "rt:{\(app.utf8.count):\(app):\(room)}"
        case .channel(let app, let channel): "rt:{ch:\(app.utf8.count):\(app):\(channel)}"
        case .app(let app): "rt:{app:\(app.utf8.count):\(app)}"
        }
    }
}
