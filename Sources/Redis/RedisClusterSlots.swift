/// Redis Cluster's key space (Redis Cluster specification, "Key distribution model"): 16,384
/// hash slots, a key's slot the CRC16 of its hash tag (or of the whole key) modulo 16,384.
/// Keys that share a hash tag (`{app:room}:events`, `{app:room}:meta`) share a slot, so one
/// script or transaction may use them all.
public enum RedisClusterSlot {
    /// Slots in a cluster.
    public static let count = 16_384

    /// The slot of `key`.
    ///
    /// The hash tag is the part between the first `{` and the first `}` after it, when that is
    /// not empty; otherwise the whole key is hashed (the specification's examples: `{user1000}.following`
    /// hashes `user1000`, `foo{}{bar}` the whole key, `foo{{bar}}zap` `{bar`).
    ///
    /// - Returns: 0…16,383.
    public static func of(_ key: String) -> Int {
        Int(crc16(hashTag(of: Array(key.utf8))) % UInt16(count))
    }

    /// The bytes of a key that are hashed.
    static func hashTag(of key: [UInt8]) -> ArraySlice<UInt8> {
        guard let open = key.firstIndex(of: UInt8(ascii: "{")),
              let close = key[(open + 1)...].firstIndex(of: UInt8(ascii: "}")), close > open + 1 else { return key[...] }
        return key[(open + 1)..<close]
    }

    /// CRC16-CCITT as XMODEM computes it (polynomial 0x1021, initial value 0, no reflection),
    /// the variant the specification names: `crc16("123456789") == 0x31C3`.
    static func crc16(_ bytes: ArraySlice<UInt8>) -> UInt16 {
        var crc: UInt16 = 0
        for byte in bytes {
            crc ^= UInt16(byte) << 8
            for _ in 0..<8 {
                crc = crc & 0x8000 != 0 ? (crc << 1) ^ 0x1021 : crc << 1
            }
        }
        return crc
    }
}

/// Where a Redis Cluster keeps each slot: its shards, each a master and its replicas, read from
/// `CLUSTER SLOTS` (Redis Cluster specification, "Cluster topology"; the reply's layout is
/// Redis' `CLUSTER SLOTS` documentation). A value: the connection that reads it decides with it.
public struct RedisSlotMap: Hashable, Sendable {
    /// One master and the slots it serves, with its replicas.
    public struct Shard: Hashable, Sendable {
        /// The master's address.
        public var master: RedisEndpoint
        /// Its replicas' addresses.
        public var replicas: [RedisEndpoint]
        /// The slot ranges it serves.
        public var slots: [ClosedRange<Int>]
    }

    /// The shards, one per master, in the order the reply named them first.
    public private(set) var shards: [Shard] = []
    /// Per slot, the index of its shard in `shards`; `UInt16.max` for a slot nobody serves.
    private var owners = [UInt16](repeating: .max, count: RedisClusterSlot.count)

    /// Reads a `CLUSTER SLOTS` reply.
    ///
    /// - Parameters:
    ///   - reply: an array of `[start, end, [host, port, id, …], replica…]` entries.
    ///   - node: the node that answered: a node named with an empty host is on its host
    ///     (Redis 7 with `cluster-preferred-endpoint-type unknown-endpoint`).
    /// - Throws: `RedisError.clusterMap` for a reply of another shape, a slot out of range or
    ///   named twice, or more than 1,000 masters.
    public init(clusterSlots reply: RedisValue, from node: RedisEndpoint) throws(RedisError) {
        guard let entries = reply.array else { throw .clusterMap("CLUSTER SLOTS answered \(String(describing: reply).prefix(200))") }
        var byMaster: [RedisEndpoint: Int] = [:]
        var replicasSeen: [Set<RedisEndpoint>] = []
        var covered = 0
        for entry in entries {
            guard let fields = entry.array, fields.count >= 3,
                  let start = fields[0].integer, let end = fields[1].integer,
                  0 <= start, start <= end, end < RedisClusterSlot.count,
                  let master = Self.endpoint(fields[2], from: node) else {
                throw .clusterMap("a CLUSTER SLOTS entry that is not [start, end, [host, port, …], …]: \(String(describing: entry).prefix(200))")
            }
            // Each slot once: a reply naming slots again (a broken or hostile node) is refused
            // before it costs more than one pass over the slots.
            covered += Int(end - start) + 1
            guard covered <= RedisClusterSlot.count else { throw .clusterMap("CLUSTER SLOTS names more than \(RedisClusterSlot.count) slots") }
            let replicas = fields.dropFirst(3).prefix(Self.maxReplicas).compactMap { Self.endpoint($0, from: node) }
            let index: Int
            if let known = byMaster[master] {
                index = known
            } else {
                guard shards.count < Self.maxShards else { throw .clusterMap("more than \(Self.maxShards) masters") }
                index = shards.count
                byMaster[master] = index
                shards.append(Shard(master: master, replicas: [], slots: []))
                replicasSeen.append([])
            }
            shards[index].slots.append(Int(start)...Int(end))
            // Each replica once, by a set, and at most `maxReplicas` a shard: a reply naming
            // thousands cannot make this quadratic.
            for replica in replicas where shards[index].replicas.count < Self.maxReplicas && replicasSeen[index].insert(replica).inserted {
                shards[index].replicas.append(replica)
            }
            for slot in Int(start)...Int(end) { owners[slot] = UInt16(index) }
        }
    }

    /// The most masters a map takes (Redis' own advice is at most 1,000 nodes).
    public static let maxShards = 1000
    /// The most replicas a shard keeps (and reads per slot range).
    public static let maxReplicas = 16

    /// The shard serving `slot`, if any does.
    public func shard(forSlot slot: Int) -> Shard? {
        guard (0..<RedisClusterSlot.count).contains(slot), owners[slot] != .max else { return nil }
        return shards[Int(owners[slot])]
    }

    /// Whether every slot has a master (a cluster whose state is `ok`).
    public var coversEverySlot: Bool { !owners.contains(.max) }

    /// How many slots have a master (16,384 when every one is served).
    public var servedSlots: Int { owners.count { $0 != .max } }

    /// Learns that `slot` moved to `master` (a `MOVED` redirection), until the map is read
    /// again: `shard(forSlot:)` answers the new master; the shards' `slots` stay as read.
    public mutating func move(slot: Int, to master: RedisEndpoint) {
        guard (0..<RedisClusterSlot.count).contains(slot) else { return }
        if let index = shards.firstIndex(where: { $0.master == master }) {
            owners[slot] = UInt16(index)
        } else if shards.count < Self.maxShards {
            owners[slot] = UInt16(shards.count)
            shards.append(Shard(master: master, replicas: [], slots: [slot...slot]))
        }
    }

    /// `[host, port, …]` as an address; an empty host is `node`'s; `?` (a node whose address
    /// is not known) is none.
    static func endpoint(_ value: RedisValue, from node: RedisEndpoint) -> RedisEndpoint? {
        guard let fields = value.array, fields.count >= 2, let host = fields[0].string, let port = fields[1].integer,
              (1...65_535).contains(port), host != "?" else { return nil }
        if host.isEmpty {
            guard case .tcp(let nodeHost, _) = node else { return nil }
            return .tcp(host: nodeHost, port: Int(port))
        }
        return .tcp(host: host, port: Int(port))
    }
}

/// A Redis Cluster redirection: an error reply `MOVED <slot> <host>:<port>` (the slot is served
/// by another master from now on) or `ASK <slot> <host>:<port>` (this one command goes there,
/// after `ASKING`, while the slot migrates) (Redis Cluster specification, "Redirection and
/// resharding").
public struct RedisRedirect: Hashable, Sendable {
    /// Which redirection.
    public enum Kind: String, Hashable, Sendable {
        /// The slot is the named node's from now on: the map is to be read again.
        case moved = "MOVED"
        /// The slot is migrating: this command only goes to the named node, after `ASKING`.
        case ask = "ASK"
    }

    /// Which redirection it is.
    public let kind: Kind
    /// The key's slot.
    public let slot: Int
    /// Where to send the command.
    public let endpoint: RedisEndpoint

    /// Reads an error reply's text; nil for any other error.
    ///
    /// - Parameters:
    ///   - error: the error reply (`RedisValue.error`'s text).
    ///   - node: the node that answered: an address with an empty host (`MOVED 3999 :6381`) is
    ///     on its host.
    public init?(error: String, from node: RedisEndpoint) {
        let parts = error.split(separator: " ")
        guard parts.count == 3, let kind = Kind(rawValue: String(parts[0])), let slot = Int(parts[1]),
              (0..<RedisClusterSlot.count).contains(slot), let colon = parts[2].lastIndex(of: ":"),
              let port = Int(parts[2][parts[2].index(after: colon)...]), (1...65_535).contains(port) else { return nil }
        var host = String(parts[2][..<colon])
        if host.isEmpty {
            guard case .tcp(let nodeHost, _) = node else { return nil }
            host = nodeHost
        }
        self.kind = kind
        self.slot = slot
        self.endpoint = .tcp(host: host, port: port)
    }
}
