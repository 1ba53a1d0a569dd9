/// What the room store and the cluster's bus need of Redis, from one server
/// (`RedisConnection`) or a Redis Cluster (`RedisClusterConnection`): commands routed by a key,
/// and Lua scripts routed by their first key. Every key one call names shares a slot (a hash
/// tag, Redis Cluster specification, "Hash tags"), so the same call runs on either.
public protocol RedisClient: Sendable {
    /// Whether pub/sub is sharded (Redis 7's `SPUBLISH`/`SSUBSCRIBE`, a channel served by its
    /// slot's shard): true on a cluster, where classic `PUBLISH` goes to every node.
    var isSharded: Bool { get }

    /// Runs one command where `key` lives.
    ///
    /// - Parameters:
    ///   - arguments: the command and its arguments; every key it names shares `key`'s slot.
    ///   - key: the key that routes it (a channel's name for `SPUBLISH`).
    /// - Returns: the reply; a Redis error reply is `.error`, not a throw.
    /// - Throws: `RedisError` when Redis cannot be reached or the command is refused before
    ///   it is sent (as each implementation says).
    @discardableResult
    func command(_ arguments: [String], key: String) throws(RedisError) -> RedisValue

    /// Runs several commands in one round trip where `key` lives.
    ///
    /// - Parameters:
    ///   - commands: at most `RedisConnection.maxPipeline`, every key in `key`'s slot.
    ///   - key: the key that routes them.
    /// - Returns: one reply per command, in order.
    /// - Throws: as `command(_:key:)`; after a lost connection no reply is known.
    func pipeline(_ commands: [[String]], key: String) throws(RedisError) -> [RedisValue]

    /// Runs a Lua script where its first key lives (by SHA1, loaded on first use).
    ///
    /// - Parameters:
    ///   - source: the script.
    ///   - keys: its `KEYS`, all in one slot.
    ///   - arguments: its `ARGV`.
    /// - Returns: the script's reply; a Redis error (`OOM`, a script error) is `.error`.
    /// - Throws: as `command(_:key:)`.
    func evaluate(_ source: String, keys: [String], arguments: [String]) throws(RedisError) -> RedisValue

    /// Runs a Lua script once per call, each where its first key lives, in as few round trips
    /// as the servers allow (one per server).
    ///
    /// - Parameters:
    ///   - source: the script.
    ///   - calls: each call's `KEYS` (all in one slot) and `ARGV`; at most
    ///     `RedisConnection.maxPipeline`.
    /// - Returns: one reply per call, in the calls' order.
    /// - Throws: as `command(_:key:)`.
    func evaluate(_ source: String, calls: [(keys: [String], arguments: [String])]) throws(RedisError) -> [RedisValue]

    /// `evaluate(_:calls:)` with each call's outcome apart: on a cluster, the calls whose
    /// shard cannot be reached fail and the others are answered; on one server, all share one
    /// outcome.
    ///
    /// - Returns: one outcome per call, in the calls' order.
    /// - Throws: `RedisError.invalidCommand` for calls it cannot send at all.
    func evaluateEach(_ source: String, calls: [(keys: [String], arguments: [String])]) throws(RedisError) -> [Result<RedisValue, RedisError>]

    /// Drops the connections; the next call connects again.
    func disconnect()

    /// Where `key` is served as far as is known without asking: the address of its slot's
    /// master in the slot map last read, or `""` for one server (or before the first map).
    func shard(forKey key: String) -> String

    /// Whether the server of `key` answered its last command in time, as far as is known
    /// without asking (`RedisConnection.isAnswering`): false while it is taken for frozen, so
    /// work that can wait (listing a room for the rooms bound) is not sent to wait there.
    func isAnswering(forKey key: String) -> Bool

    /// Whether the server `shard` names (as `shard(forKey:)` gives it) answered its last
    /// command in time, known without asking: true for one that has no connection yet.
    func isAnswering(shard: String) -> Bool
}

extension RedisConnection: RedisClient {
    /// False: one server's pub/sub is not sharded (`PUBLISH` reaches every subscriber).
    public var isSharded: Bool { false }

    /// `""`: one server serves every key.
    public func shard(forKey key: String) -> String { "" }

    /// `isAnswering`: one server serves every key.
    public func isAnswering(forKey key: String) -> Bool { isAnswering }

    /// `isAnswering`: one server is every shard.
    public func isAnswering(shard: String) -> Bool { isAnswering }

    /// Runs one command on this server (`command(_:)`; the key routes nothing here).
    ///
    /// - Throws: as `command(_:)`.
    @discardableResult
    public func command(_ arguments: [String], key: String) throws(RedisError) -> RedisValue {
        try command(arguments)
    }

    /// Runs several commands in one round trip on this server (`pipeline(_:)`).
    ///
    /// - Throws: as `pipeline(_:)`.
    public func pipeline(_ commands: [[String]], key: String) throws(RedisError) -> [RedisValue] {
        try pipeline(commands)
    }

    /// `evaluate(_:calls:)`, its one outcome given to every call (one server: one round trip).
    ///
    /// - Throws: `RedisError.invalidCommand` for too many calls.
    public func evaluateEach(_ source: String, calls: [(keys: [String], arguments: [String])]) throws(RedisError) -> [Result<RedisValue, RedisError>] {
        guard calls.count <= Self.maxPipeline else { throw .invalidCommand("\(calls.count) calls in one round trip") }
        do {
            return try evaluate(source, calls: calls).map { .success($0) }
        } catch {
            return calls.map { _ in .failure(error) }
        }
    }
}

extension RedisClusterConnection: RedisClient {
    /// True: a cluster's channels are published with `SPUBLISH` to their slot's shard.
    public var isSharded: Bool { true }

    /// The master serving `key`'s slot in the map last read (`""` before the first map, or for
    /// a slot no master serves).
    public func shard(forKey key: String) -> String {
        slotMap?.shard(forSlot: RedisClusterSlot.of(key))?.master.description ?? ""
    }

    /// Whether the master serving `key`'s slot in the map last read answered its last command
    /// in time (true before the first map, or when no connection to it was made yet).
    public func isAnswering(forKey key: String) -> Bool {
        guard let master = slotMap?.shard(forSlot: RedisClusterSlot.of(key))?.master else { return true }
        return connection(to: master)?.isAnswering ?? true
    }

    /// Whether the master named `shard` (`RedisEndpoint.description`) answered its last command
    /// in time (true for one this client has no connection to); for `""` (work over every
    /// shard, or before the first map), whether every node does.
    public func isAnswering(shard: String) -> Bool {
        guard !shard.isEmpty else { return allAnswering }
        return connection(named: shard)?.isAnswering ?? true
    }
}
