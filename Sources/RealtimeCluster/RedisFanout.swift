import Dispatch
import RealtimeProtocol
import RealtimeServer
import Redis
import SystemSupport

/// The cluster's bus on Redis pub/sub (DESIGN.md, "Scale-out"; `RealtimeFanout`): one
/// subscriber connection per node following exactly the rooms and channels the node has members
/// for, and one connection for publishing channel events. Room events are published by
/// `RedisRoomStore`'s append script, in the step that keeps them, and every node (the
/// publisher's too) delivers them from the bus, in the history's order. Channel events carry
/// their node's id: that node delivered them to its own subscribers at once and skips them.
///
/// Channels: a room's `rt:{<app length>:<app>:<room>}:live` (its keys' hash tag), a channel's
/// `rt:ch:<app length>:<app>:<channel>`. Messages are `FanoutCodec`'s. A message that does not
/// decode is logged and dropped: a room catches it up from the store at its next check.
public final class RedisFanout: RealtimeFanout {
    private final class Router: Sendable {
        /// Followed pub/sub channels and what they carry.
        let topics = Locked<[String: FanoutTopic]>([:])
        let hub = Locked<RealtimeHub?>(nil)
        let log: (@Sendable (String) -> Void)?
        /// This node's id on the bus: its own channel events are skipped (delivered already).
        let node = Crypto.hex(Crypto.randomBytes(8))

        init(log: (@Sendable (String) -> Void)?) { self.log = log }

        static func comesBack(_ message: FanoutMessage) -> Bool {
            if case .presence = message { return true }
            return false
        }

        func handle(_ event: RedisSubscriber.Event) {
            guard let hub = hub.withLock({ $0 }) else { return }
            switch event {
            case .message(let channel, let payload):
                guard let topic = topics.withLock({ $0[channel] }) else { return }
                do {
                    let (message, origin) = try FanoutCodec.decode(payload, topic: topic)
                    // A node delivers its own channel events and terminations itself; presence
                    // changes come back to it too, so every node tells them in Redis's order.
                    if origin == node, !Self.comesBack(message) { return }
                    hub.fanoutReceived(message)
                } catch {
                    log?("a message on \(channel.prefix(120)) not understood, dropped: \(error)")
                }
            case .subscribed(let channel):
                if let topic = topics.withLock({ $0[channel] }) { hub.fanoutFollowing(topic) }
            case .ready:
                hub.fanoutReady()
            case .lost(let error):
                hub.fanoutLost("\(error)")
            }
        }
    }

    private let router: Router
    private let subscriber: RedisSubscriber
    private let publisher: RedisConnection
    /// Channel events and terminations go out in order on this queue, so a slow Redis never
    /// holds the thread that published (a socket thread, for a client event).
    private let sending = DispatchQueue(label: "RedisFanout.sending")
    /// The queue's own connection: a publish waiting out a timeout never holds the presence
    /// scripts (which run on `publisher`, under the hub's lock).
    private let sender: RedisConnection
    private let backlog = Locked((count: 0, bytes: 0))
    /// Most bytes of publishes waiting for Redis.
    public static let maxBacklogBytes = 64 * 1024 * 1024
    /// Set by `stop`: what is still queued is dropped, so a stop never waits out a backlog.
    private let stopped = Locked(false)
    /// Most publishes waiting for Redis; past it (or `maxBacklogBytes`) `publish` refuses
    /// (logged by the hub).
    public static let maxBacklog = 10_000
    /// Topics whose presence registration may differ from this node's members (a call failed):
    /// reconciled at the next sweep. Bounded: past `maxSuspects`, every topic is.
    private let suspects = Locked((topics: Set<FanoutTopic>(), all: false))
    static let maxSuspects = 10_000

    /// Creates a bus to the Redis at `endpoint`; nothing connects before `start`.
    ///
    /// - Parameters:
    ///   - endpoint: the cluster's Redis.
    ///   - timeout: connect, command and ping deadline in milliseconds.
    ///   - log: where undecodable messages are reported.
    public init(endpoint: RedisEndpoint, timeout: Int = 2000, log: (@Sendable (String) -> Void)? = nil) {
        let router = Router(log: log)
        self.router = router
        self.subscriber = RedisSubscriber(endpoint: endpoint, timeout: timeout) { router.handle($0) }
        self.publisher = RedisConnection(endpoint: endpoint, timeout: timeout)
        self.sender = RedisConnection(endpoint: endpoint, timeout: timeout)
    }

    /// Starts following for `hub` (`RealtimeFanout`).
    public func start(_ hub: RealtimeHub) {
        router.hub.withLock { $0 = hub }
        subscriber.start()
    }

    /// Follows a room or channel (`RealtimeFanout`).
    public func follow(_ topic: FanoutTopic) {
        let channel = Self.channel(of: topic)
        router.topics.withLock { $0[channel] = topic }
        subscriber.subscribe(channel)
    }

    /// Stops following (`RealtimeFanout`).
    public func unfollow(_ topic: FanoutTopic) {
        let channel = Self.channel(of: topic)
        router.topics.withLock { $0[channel] = nil }
        subscriber.unsubscribe(channel)
    }

    /// Publishes a channel event to every node (`RealtimeFanout`).
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses.
    public func publish(_ event: ChannelFanoutEvent) throws(RoomStoreError) {
        try send(Self.channel(of: .channel(app: event.app, channel: event.channel)), FanoutCodec.encode(event, origin: router.node))
    }

    /// Queues one `PUBLISH` (in order with the others); a failure is logged.
    ///
    /// - Throws: `RoomStoreError.unavailable` when the message is over `FanoutCodec.maxMessageSize`
    ///   or `maxBacklog` publishes are waiting already (nothing queued).
    private func send(_ channel: String, _ message: String) throws(RoomStoreError) {
        guard message.utf8.count <= FanoutCodec.maxMessageSize else {
            throw .unavailable("a message of \(message.utf8.count) bytes, more than the bus carries (\(FanoutCodec.maxMessageSize))")
        }
        let size = message.utf8.count
        let queued = backlog.withLock { backlog -> Bool in
            guard backlog.count < Self.maxBacklog, backlog.bytes + size <= Self.maxBacklogBytes else { return false }
            backlog.count += 1
            backlog.bytes += size
            return true
        }
        guard queued else { throw .unavailable("\(Self.maxBacklog) publishes or \(Self.maxBacklogBytes) bytes already wait for Redis") }
        let (sender, router, backlog, stopped) = (sender, router, backlog, stopped)
        sending.async {
            defer { backlog.withLock { $0.count -= 1; $0.bytes -= size } }
            guard !stopped.withLock({ $0 }) else { return }
            do {
                if case .error(let refusal) = try sender.command("PUBLISH", channel, message) {
                    router.log?("Redis refused PUBLISH on \(channel.prefix(120)): \(refusal)")
                }
            } catch {
                router.log?("a PUBLISH on \(channel.prefix(120)) did not reach Redis (the other nodes miss it): \(error)")
            }
        }
    }

    /// Asks every other node to close the user's connections (`RealtimeFanout`).
    ///
    /// - Throws: `RoomStoreError.unavailable` when Redis cannot be reached or refuses.
    public func terminate(app: String, user: String) throws(RoomStoreError) {
        try send(Self.channel(of: .app(app)), "t \(router.node) \(user.utf8.count)\n" + user)
    }

    /// Stops the subscriber; the hub hears nothing more (`RealtimeFanout`).
    public func stop() {
        stopped.withLock { $0 = true }
        subscriber.stop()
        sending.sync {}
        router.hub.withLock { $0 = nil }
        publisher.disconnect()
        sender.disconnect()
    }

    // MARK: - Presence

    /// How long a node's liveness key lives without a refresh (every sweep, about once a
    /// second), in milliseconds: past it the node is dead to the others.
    public static let nodeTTL = 5000
    /// How long a topic's presence hashes live without a sweep of a node that has members there,
    /// in milliseconds.
    static let presenceTTL = 30_000
    private static let nodePrefix = "rt:node:"
    /// Whether this node's liveness key was ever set (by a join or a sweep): a missing key
    /// means the node was taken for dead only after that.
    private let registered = Locked(false)

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
    enum PresenceScript {
        /// ARGV: node, user, value, TTL (ms), pub/sub channel, the `member_added` message, the
        /// node's liveness key, its TTL (refreshed here too: a member is never registered for
        /// a node the others take for dead). Returns {1 when the user's first, 1 when the
        /// node's key was gone: it was taken for dead, and its other topics need a reconcile}.
        static let join = """
        local alive = redis.call('SET', ARGV[7], '1', 'PX', ARGV[8], 'GET')
        local field = ARGV[1] .. '\\n' .. ARGV[2]
        local first = 0
        if redis.call('HSETNX', KEYS[1], field, ARGV[3]) == 1 then
          if redis.call('HINCRBY', KEYS[2], ARGV[2], 1) == 1 then
            first = 1
            redis.call('PUBLISH', ARGV[5], ARGV[6])
          end
        end
        redis.call('PEXPIRE', KEYS[1], ARGV[4])
        redis.call('PEXPIRE', KEYS[2], ARGV[4])
        if alive then return {first, 0} end
        return {first, 1}
        """

        /// Shared by the scripts: a node's registration of a user removed; when it was the
        /// user's last, the departure published and true returned.
        private static let library = """
        local function remove(members, users, node, user, channel, excluding)
          if redis.call('HDEL', members, node .. '\\n' .. user) == 0 then return false end
          if redis.call('HINCRBY', users, user, -1) > 0 then return false end
          redis.call('HDEL', users, user)
          local tail, size = '', -1
          if excluding ~= '' then tail, size = excluding, #excluding end
          redis.call('PUBLISH', channel, 'p ' .. node .. ' 0 ' .. #user .. ' -1 ' .. size .. '\\n' .. user .. tail)
          return true
        end

        """

        /// ARGV: node, user, TTL (ms), pub/sub channel, the leaving socket.
        static let leave = library + """
        if remove(KEYS[1], KEYS[2], ARGV[1], ARGV[2], ARGV[4], ARGV[5]) then return 1 end
        return 0
        """

        /// ARGV: node key prefix, this node. Returns user, value, … for live nodes, each user once.
        static let members = """
        local all = redis.call('HGETALL', KEYS[1])
        local alive, seen, out = {}, {}, {}
        for i = 1, #all, 2 do
          local node, user = string.match(all[i], '^([^\\n]*)\\n(.*)$')
          if node then
            if alive[node] == nil then alive[node] = node == ARGV[2] or redis.call('EXISTS', ARGV[1] .. node) == 1 end
            if alive[node] and not seen[user] then
              seen[user] = true
              out[#out + 1] = user
              out[#out + 1] = all[i + 1]
            end
          end
        end
        return out
        """

        /// ARGV: node, TTL (ms), pub/sub channel, the node's liveness key, its TTL, then this
        /// node's users there as user, value pairs. Makes the node's registration exactly those
        /// users: adds the missing, removes the others, publishing each change that is one for
        /// everybody. Returns `+user` / `-user` for those.
        static let reconcile = library + """
        redis.call('SET', ARGV[4], '1', 'PX', ARGV[5])
        local wanted = {}
        for i = 6, #ARGV, 2 do wanted[ARGV[i]] = ARGV[i + 1] end
        local prefix = ARGV[1] .. '\\n'
        local all = redis.call('HGETALL', KEYS[1])
        local changes = {}
        for i = 1, #all, 2 do
          if string.sub(all[i], 1, #prefix) == prefix then
            local user = string.sub(all[i], #prefix + 1)
            if wanted[user] == nil then
              if remove(KEYS[1], KEYS[2], ARGV[1], user, ARGV[3], '') then changes[#changes + 1] = '-' .. user end
            else
              wanted[user] = false
            end
          end
        end
        for user, value in pairs(wanted) do
          if value and redis.call('HSETNX', KEYS[1], prefix .. user, value) == 1 then
            if redis.call('HINCRBY', KEYS[2], user, 1) == 1 then
              changes[#changes + 1] = '+' .. user
              local info, size = '', -1
              if string.sub(value, 1, 1) == 'i' then info = string.sub(value, 2); size = #info end
              redis.call('PUBLISH', ARGV[3], 'p ' .. ARGV[1] .. ' 1 ' .. #user .. ' ' .. size .. ' -1\\n' .. user .. info)
            end
          end
        end
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
        redis.call('PEXPIRE', KEYS[2], ARGV[2])
        return changes
        """

        /// ARGV: node key prefix, TTL (ms), pub/sub channel, this node. Takes dead nodes'
        /// members out; returns the users now on no node (each published as gone, in the dead
        /// node's name: every live node, this one too, tells it).
        static let cleanup = library + """
        local all = redis.call('HGETALL', KEYS[1])
        local alive, gone = {}, {}
        for i = 1, #all, 2 do
          local node, user = string.match(all[i], '^([^\\n]*)\\n(.*)$')
          if node then
            if alive[node] == nil then alive[node] = node == ARGV[4] or redis.call('EXISTS', ARGV[1] .. node) == 1 end
            if not alive[node] and remove(KEYS[1], KEYS[2], node, user, ARGV[3], '') then gone[#gone + 1] = user end
          end
        end
        redis.call('PEXPIRE', KEYS[1], ARGV[2])
        redis.call('PEXPIRE', KEYS[2], ARGV[2])
        return gone
        """
    }

    /// The pub/sub channels followed now (for tests and metrics).
    public var followedChannels: Set<String> { subscriber.channels }

    static func channel(of topic: FanoutTopic) -> String {
        switch topic {
        case .room(let app, let room): return RedisRoomStore.liveChannel(app: app, room: room)
        case .channel(let app, let channel): return "rt:ch:\(app.utf8.count):\(app):\(channel)"
        case .app(let app): return "rt:app:\(app.utf8.count):\(app)"
        }
    }
}
