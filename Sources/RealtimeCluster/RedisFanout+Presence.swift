import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport

/// Presence across nodes on Redis (`RealtimeFanout`'s presence calls; DESIGN.md, "Scale-out"):
/// per topic a members hash (`<node>\n<user>` → info) and a users hash (user → how many nodes
/// have it), each change one Lua script (`PresenceScript`) that also publishes it, and a
/// liveness key per node with a TTL so a dead node's members are taken out.
extension RedisFanout {
    /// How long a node's liveness key lives without a refresh (every sweep, about once a
    /// second), in milliseconds: past it the node is dead to the others.
    public static let nodeTTL = 5000
    /// How long a topic's presence hashes live without a sweep of a node that has members there,
    /// in milliseconds.
    static let presenceTTL = 30_000
    static let nodePrefix = "rt:node:"

    /// The topic's two presence hashes: members (`<node>\n<user>` → `n`, or `i` and the info's
    /// JSON) and users (user → how many nodes have it), under the topic's hash tag.
    static func presenceKeys(_ topic: FanoutTopic) -> [String] {
        let tag: String = switch topic {
        case .room(let app, let room): "rt:{\(app.utf8.count):\(app):\(room)}"
        case .channel(let app, let channel): "rt:{ch:\(app.utf8.count):\(app):\(channel)}"
        case .app(let app): "rt:{app:\(app.utf8.count):\(app)}"
        }
        return [tag + ":presence", tag + ":presence-users"]
    }

    private func presenceCall(_ topic: FanoutTopic, user: String, info: String?, excluding: String?) -> (keys: [String], arguments: [String]) {
        let change = PresenceFanoutEvent(topic: topic, user: user, info: info, joined: true, excluding: excluding)
        return (Self.presenceKeys(topic), [router.node, user, info.map { "i" + $0 } ?? "n", String(Self.presenceTTL),
                                           Self.channel(of: topic), FanoutCodec.encode(change, origin: router.node),
                                           Self.nodePrefix + router.node, String(Self.nodeTTL)])
    }

    /// Registers the user on this node (`RealtimeFanout`); one script: the member, the user's
    /// node count, and the `member_added` publish when it is the first.
    ///
    /// - Throws: `RoomStoreError.unavailable`.
    public func presenceJoin(_ topic: FanoutTopic, user: String, info: String?, excluding: String) throws(RoomStoreError) -> Bool {
        let call = presenceCall(topic, user: user, info: info, excluding: excluding)
        let reply: RedisValue
        do {
            reply = try evaluate(PresenceScript.join, [call])[0]
        } catch {
            suspect(topic)
            throw error
        }
        guard let values = reply.array, values.count == 2, let first = values[0].integer, let revived = values[1].integer else {
            suspect(topic)
            throw .unavailable("an unexpected presence answer")
        }
        // This join brought the node's key back: the node was taken for dead (or Redis lost
        // everything), and its members elsewhere are gone from Redis.
        let wasRegistered = registered.withLock { registered in
            defer { registered = true }
            return registered
        }
        if revived == 1, wasRegistered { suspects.withLock { $0.all = true } }
        return first == 1
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
            return try integer(PresenceScript.leave, call) == 1
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
        let replies = try evaluate(PresenceScript.members, topics.map { (Self.presenceKeys($0), [Self.nodePrefix, router.node]) })
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
        let previous: RedisValue
        do {
            previous = try publisher.command("SET", Self.nodePrefix + router.node, "1", "PX", String(Self.nodeTTL), "GET")
        } catch {
            throw .unavailable("\(error)")
        }
        // Taken for dead (its key had expired, or Redis lost everything): every topic of this
        // node is reconciled.
        let wasRegistered = registered.withLock { registered in
            defer { registered = true }
            return registered
        }
        if previous == .null, wasRegistered { suspects.withLock { $0.all = true } }
        let topics = Array(local.keys)
        let calls = topics.map { topic in
            (keys: Self.presenceKeys(topic), arguments: [Self.nodePrefix, String(Self.presenceTTL), Self.channel(of: topic), router.node])
        }
        var changes: [PresenceFanoutEvent] = []
        let replies = try evaluate(PresenceScript.cleanup, calls)
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
    /// each change that is one for everybody (`RealtimeFanout`).
    ///
    /// - Throws: `RoomStoreError.unavailable` (the topics stay suspect).
    public func presenceReconcile(local: [FanoutTopic: [String: String?]]) throws(RoomStoreError) -> [PresenceFanoutEvent] {
        let (suspected, all) = suspects.withLock { suspects in
            defer { suspects = ([], false) }
            return (suspects.topics, suspects.all)
        }
        let order = Array(all ? Set(local.keys).union(suspected) : suspected)
        guard !order.isEmpty else { return [] }
        let calls = order.map { topic in
            var arguments = [router.node, String(Self.presenceTTL), Self.channel(of: topic), Self.nodePrefix + router.node, String(Self.nodeTTL)]
            for (user, info) in local[topic] ?? [:] { arguments += [user, info.map { "i" + $0 } ?? "n"] }
            return (keys: Self.presenceKeys(topic), arguments: arguments)
        }
        var changes: [PresenceFanoutEvent] = []
        do {
            let replies = try evaluate(PresenceScript.reconcile, calls)
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
