import SystemSupport

/// Commands to a Redis Cluster, each sent to the master serving its key's slot (Redis Cluster
/// specification, "Redirection and resharding"; hiredis 0.14 has no cluster support, so the
/// routing is here). Blocking, safe to share between threads: one `RedisConnection` per master,
/// each running its commands one at a time.
///
/// The slot map is read with `CLUSTER SLOTS` from the seed nodes, then from the map's masters.
/// A `MOVED` reply moves the slot in the map, reads the map again and retries there; an `ASK`
/// reply sends `ASKING` and the command once to the node it names; a master that cannot be
/// connected to makes the map be read again (a failover promotes a replica) and the command
/// retried once. At most `maxRedirects` redirections per command; the map read at most every
/// `mapRefreshInterval`, from at most `maxMapCandidates` nodes.
public final class RedisClusterConnection: Sendable {
    /// Where the map is first asked for.
    public let seeds: [RedisEndpoint]
    /// The connect and command deadline of each node's connection, in milliseconds.
    public let timeout: Int

    private struct State {
        var map: RedisSlotMap?
        var lastRead: ContinuousClock.Instant?
        var nodes: [RedisEndpoint: RedisConnection] = [:]
    }

    private let state = Locked(State())

    /// Redirections followed for one command before it fails with `RedisError.clusterMap`.
    public static let maxRedirects = 5
    /// The shortest time between two reads of the map (one read serves every command that
    /// found it stale meanwhile).
    public static let mapRefreshInterval: Duration = .milliseconds(100)
    /// The most node connections kept: past it, all but the map's masters are dropped, and if
    /// that is still too many, all (they connect again when used).
    public static let maxNodes = 64
    /// The most nodes asked for the map in one read, seeds first (each may take the whole
    /// connect deadline when it does not answer).
    public static let maxMapCandidates = 6

    /// Creates the connection; nothing is opened until the first command.
    ///
    /// - Parameters:
    ///   - seeds: one or more nodes of the cluster (`--redis-cluster host:port,host:port`).
    ///   - timeout: connect and command deadline per node in milliseconds (2,000 by default).
    public init(seeds: [RedisEndpoint], timeout: Int = 2000) {
        self.seeds = seeds
        self.timeout = max(1, timeout)
    }

    /// The slot map as last read (nil before the first command).
    public var slotMap: RedisSlotMap? { state.withLock { $0.map } }

    /// Runs a command on the master serving `key`'s slot.
    ///
    /// - Parameters:
    ///   - arguments: the command and its arguments; every key it names must share `key`'s
    ///     slot (a hash tag), or Redis answers `CROSSSLOT`.
    ///   - key: the key that routes it.
    /// - Returns: the reply; Redis error replies other than redirections are `.error`.
    /// - Throws: `RedisError.clusterMap` when no map can be read, the slot has no master, or
    ///   redirections do not end; the node connection's errors when the master stays
    ///   unreachable after the map was read again.
    @discardableResult
    public func command(_ arguments: [String], key: String) throws(RedisError) -> RedisValue {
        try routed(key: key) { connection, asking throws(RedisError) in
            asking ? try connection.pipeline([["ASKING"], arguments])[1] : try connection.command(arguments)
        }
    }

    /// Runs several commands in one round trip on the master serving `key`'s slot. Redirected
    /// as a whole: when the first reply is a redirection, the slot is not served there, so
    /// nothing ran and every command is sent again where it points (an `ASK` target after
    /// `ASKING` before each command).
    ///
    /// - Parameters:
    ///   - commands: at most `RedisConnection.maxPipeline`, every key in `key`'s slot.
    ///   - key: the key that routes them.
    /// - Returns: one reply per command, in order.
    /// - Throws: as `command(_:key:)`.
    public func pipeline(_ commands: [[String]], key: String) throws(RedisError) -> [RedisValue] {
        guard !commands.isEmpty else { return [] }
        var replies: [RedisValue] = []
        _ = try routed(key: key) { connection, asking throws(RedisError) in
            replies = asking ? try connection.pipeline(commands.flatMap { [["ASKING"], $0] }).enumerated().filter { $0.offset % 2 == 1 }.map(\.element)
                : try connection.pipeline(commands)
            return replies[0]
        }
        return replies
    }

    /// Runs a Lua script on the master serving its first key's slot (`RedisConnection.evaluate`:
    /// by SHA1, loaded once per node), following redirections as `command(_:key:)` does.
    ///
    /// - Parameters:
    ///   - source: the script.
    ///   - keys: its `KEYS`, at least one, all in one slot (a hash tag).
    ///   - arguments: its `ARGV`.
    /// - Returns: the script's reply; a Redis error other than a redirection is `.error`.
    /// - Throws: `RedisError.invalidCommand` with no key; otherwise as `command(_:key:)`.
    public func evaluate(_ source: String, keys: [String], arguments: [String]) throws(RedisError) -> RedisValue {
        guard let first = keys.first else { throw .invalidCommand("a script routed by its first key needs one") }
        return try routed(key: first) { connection, asking throws(RedisError) in
            // `ASKING` holds for the next command only: the script goes whole, with `EVAL`.
            asking ? try connection.pipeline([["ASKING"], ["EVAL", source, String(keys.count)] + keys + arguments])[1]
                : try connection.evaluate(source, keys: keys, arguments: arguments)
        }
    }

    /// Runs a Lua script once per call, each on the master serving its first key's slot: the
    /// calls for one master go in one round trip (pipelined `EVALSHA`s, as
    /// `RedisConnection.evaluate(_:calls:)`), the masters one after another; a call answered
    /// with a redirection, or whose master cannot be connected to, is sent again alone, as
    /// `evaluate(_:keys:arguments:)` sends it.
    ///
    /// - Parameters:
    ///   - source: the script.
    ///   - calls: each call's `KEYS` (at least one, all in one slot) and `ARGV`; at most
    ///     `RedisConnection.maxPipeline`.
    /// - Returns: one reply per call, in the calls' order.
    /// - Throws: `RedisError.invalidCommand` for a call with no key or too many calls;
    ///   otherwise as `evaluate(_:keys:arguments:)` (a connection lost mid-round-trip: some
    ///   calls may have run).
    public func evaluate(_ source: String, calls: [(keys: [String], arguments: [String])]) throws(RedisError) -> [RedisValue] {
        var replies: [RedisValue] = []
        replies.reserveCapacity(calls.count)
        for result in try evaluateEach(source, calls: calls) {
            switch result {
            case .success(let reply): replies.append(reply)
            case .failure(let error): throw error
            }
        }
        return replies
    }

    /// `evaluate(_:calls:)` with each call's outcome apart: the calls whose master cannot be
    /// reached (a shard down) fail, the others are answered, so a batch over the shards
    /// degrades by shard instead of failing whole.
    ///
    /// - Parameters:
    ///   - source: the script.
    ///   - calls: each call's `KEYS` (at least one, all in one slot) and `ARGV`; at most
    ///     `RedisConnection.maxPipeline`.
    /// - Returns: one outcome per call, in the calls' order: its reply (a Redis error reply
    ///   other than a redirection is `.error`), or why it got none.
    /// - Throws: `RedisError.invalidCommand` for a call with no key or too many calls.
    public func evaluateEach(_ source: String, calls: [(keys: [String], arguments: [String])]) throws(RedisError) -> [Result<RedisValue, RedisError>] {
        guard calls.count <= RedisConnection.maxPipeline else { throw .invalidCommand("\(calls.count) calls in one round trip") }
        guard calls.allSatisfy({ !$0.keys.isEmpty }) else { throw .invalidCommand("a script routed by its first key needs one") }
        var results = [Result<RedisValue, RedisError>](repeating: .success(.null), count: calls.count)
        var byMaster: [(master: RedisEndpoint, indices: [Int])] = []
        var again: [Int] = []
        var refused: [(index: Int, master: RedisEndpoint)] = []
        for (index, call) in calls.enumerated() {
            let master: RedisEndpoint
            do {
                master = try self.master(forSlot: RedisClusterSlot.of(call.keys[0]))
            } catch {
                results[index] = .failure(error)
                continue
            }
            if let group = byMaster.firstIndex(where: { $0.master == master }) {
                byMaster[group].indices.append(index)
            } else {
                byMaster.append((master, [index]))
            }
        }
        for (master, indices) in byMaster {
            let answered: [RedisValue]
            do {
                answered = try node(master).evaluate(source, calls: indices.map { calls[$0] })
            } catch {
                // A connection lost mid-round-trip may have run some calls: those fail, for
                // the caller to judge. Nothing ran on a master that could not be connected to.
                guard case .connectFailed = error else {
                    for index in indices { results[index] = .failure(error) }
                    continue
                }
                // The map read again once: calls whose slot moved to another master are sent
                // there; those still on the unreachable one fail at once (not one connect
                // deadline each).
                try? readMap()
                for index in indices {
                    let now = try? self.master(forSlot: RedisClusterSlot.of(calls[index].keys[0]))
                    if let now, now != master { again.append(index) } else { results[index] = .failure(error) }
                }
                continue
            }
            for (index, reply) in zip(indices, answered) {
                results[index] = .success(reply)
                guard case .error(let message) = reply else { continue }
                if RedisRedirect(error: message, from: master) != nil {
                    again.append(index)
                } else if message.hasPrefix("CLUSTERDOWN") {
                    refused.append((index, master))
                }
            }
        }
        // Calls a master took for unserved: the map read again once, and only those whose slot
        // it now gives another master are sent again (a partitioned master answers every call
        // so: one read, not one per call); the others keep their answer.
        if !refused.isEmpty {
            try? readMap(force: true)
            for (index, master) in refused {
                if let now = try? self.master(forSlot: RedisClusterSlot.of(calls[index].keys[0])), now != master { again.append(index) }
            }
        }
        for index in again.sorted() {
            do {
                results[index] = .success(try evaluate(source, keys: calls[index].keys, arguments: calls[index].arguments))
            } catch {
                results[index] = .failure(error)
            }
        }
        return results
    }

    /// Sends `send` to the master of `key`'s slot and follows the redirections.
    private func routed(key: String, _ send: (RedisConnection, _ asking: Bool) throws(RedisError) -> RedisValue) throws(RedisError) -> RedisValue {
        let slot = RedisClusterSlot.of(key)
        var target = try master(forSlot: slot)
        var asking = false
        var retriedUnreachable = false
        for _ in 0...Self.maxRedirects {
            let reply: RedisValue
            do {
                reply = try send(node(target), asking)
            } catch {
                // A master that cannot be reached (nothing ran): a replica may have taken its
                // slots. A connection lost during the command is the caller's to judge, as for
                // `RedisConnection` (the command may have run).
                guard case .connectFailed = error, !retriedUnreachable else { throw error }
                retriedUnreachable = true
                try readMap()
                target = try master(forSlot: slot)
                asking = false
                continue
            }
            guard case .error(let message) = reply else { return reply }
            // A node that takes the slot for unserved (its view is behind the cluster's, just
            // after a failover or its own restart): the map is read again, once.
            if message.hasPrefix("CLUSTERDOWN"), !retriedUnreachable {
                retriedUnreachable = true
                try readMap(force: true)
                target = try master(forSlot: slot)
                asking = false
                continue
            }
            guard let redirect = RedisRedirect(error: message, from: target) else { return reply }
            switch redirect.kind {
            case .moved:
                state.withLock { $0.map?.move(slot: redirect.slot, to: redirect.endpoint) }
                try? readMap()
                asking = false
            case .ask:
                asking = true
            }
            target = redirect.endpoint
        }
        throw .clusterMap("more than \(Self.maxRedirects) redirections for slot \(slot)")
    }

    /// Runs a command on the master serving `key`'s slot (`command(["GET", k], key: k)` spelled
    /// as `command("GET", k, key: k)`).
    ///
    /// - Throws: as `command(_:key:)`.
    @discardableResult
    public func command(_ arguments: String..., key: String) throws(RedisError) -> RedisValue {
        try command(arguments, key: key)
    }

    /// Reads the slot map again now (at most every `mapRefreshInterval`).
    ///
    /// - Throws: `RedisError.clusterMap` when no known node answers with a map.
    public func refreshSlotMap() throws(RedisError) {
        try readMap()
    }

    /// Drops every node connection; the next command connects again.
    public func disconnect() {
        for connection in state.withLock({ Array($0.nodes.values) }) { connection.disconnect() }
    }

    // MARK: - The map and the nodes

    private func master(forSlot slot: Int) throws(RedisError) -> RedisEndpoint {
        if let master = state.withLock({ $0.map?.shard(forSlot: slot)?.master }) { return master }
        try readMap()
        guard let master = state.withLock({ $0.map?.shard(forSlot: slot)?.master }) else {
            throw .clusterMap("no master serves slot \(slot)")
        }
        return master
    }

    /// Reads `CLUSTER SLOTS` from the first node that answers with a map serving every slot
    /// (a node whose view is behind, just after a failover or its own restart, may leave slots
    /// unserved), else the fullest map read: the seeds, then the map's masters,
    /// `maxMapCandidates` at most. Not again within `mapRefreshInterval` of the last read
    /// (every caller that finds the map stale meanwhile uses the one read); `force`d, within a
    /// tenth of it (a node answered `CLUSTERDOWN`: the map is wrong now, whatever its age).
    private func readMap(force: Bool = false) throws(RedisError) {
        let now = ContinuousClock.now
        let candidates = state.withLock { state -> [RedisEndpoint]? in
            if let last = state.lastRead, now < last + (force ? Self.mapRefreshInterval / 10 : Self.mapRefreshInterval) { return nil }
            state.lastRead = now
            let known = state.map?.shards.map(\.master) ?? []
            var seen = Set<RedisEndpoint>()
            return Array((seeds + known).filter { seen.insert($0).inserted }.prefix(Self.maxMapCandidates))
        }
        guard let candidates else { return }
        var failures: [String] = []
        var fullest: RedisSlotMap?
        for endpoint in candidates {
            do {
                let map = try RedisSlotMap(clusterSlots: try node(endpoint).command("CLUSTER", "SLOTS"), from: endpoint)
                guard !map.shards.isEmpty else {
                    failures.append("\(endpoint): no slots")
                    continue
                }
                if map.coversEverySlot {
                    state.withLock { $0.map = map }
                    return
                }
                if (fullest?.servedSlots ?? -1) < map.servedSlots { fullest = map }
                failures.append("\(endpoint): \(RedisClusterSlot.count - map.servedSlots) slot(s) unserved")
            } catch {
                failures.append("\(endpoint): \(error)")
            }
        }
        if let fullest {
            state.withLock { $0.map = fullest }
            return
        }
        throw .clusterMap("no node answered CLUSTER SLOTS: \(failures.joined(separator: "; ").prefix(500))")
    }

    /// The connection to `endpoint` if one was made (none is made here).
    func connection(to endpoint: RedisEndpoint) -> RedisConnection? {
        state.withLock { $0.nodes[endpoint] }
    }

    /// The connection to the node whose address reads `name` (`RedisEndpoint.description`),
    /// if one was made.
    func connection(named name: String) -> RedisConnection? {
        state.withLock { $0.nodes.first { $0.key.description == name }?.value }
    }

    /// Whether every node this client connected to answered its last command in time.
    var allAnswering: Bool {
        state.withLock { Array($0.nodes.values) }.allSatisfy(\.isAnswering)
    }

    /// The connection to `endpoint`, made on first use (`maxNodes` bounds them).
    private func node(_ endpoint: RedisEndpoint) -> RedisConnection {
        state.withLock { state in
            if let connection = state.nodes[endpoint] { return connection }
            if state.nodes.count >= Self.maxNodes {
                let masters = Set(state.map?.shards.map(\.master) ?? [])
                state.nodes = state.nodes.filter { masters.contains($0.key) }
                if state.nodes.count >= Self.maxNodes { state.nodes = [:] }
            }
            let connection = RedisConnection(endpoint: endpoint, timeout: timeout)
            state.nodes[endpoint] = connection
            return connection
        }
    }
}
