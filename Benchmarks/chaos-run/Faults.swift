import Foundation
import NetworkLab
import RealtimeCluster

/// The faults of the schedule (issue 14, part 3): each one a way a long-lived connection, or
/// what stands behind it, goes away.
enum FaultKind: String, CaseIterable, Sendable {
    /// A node killed with SIGKILL (a crash: no close frame), started again after recovery.
    case nodeKill = "node SIGKILL, restarted"
    /// A node stopped with SIGTERM (its clients closed with 4200, so they move to the other
    /// node through nginx), started again after recovery.
    case nodeMove = "node move (SIGTERM, 4200)"
    /// Redis killed with SIGKILL and started again on its append-only file: the nodes lose
    /// their bus and its messages meanwhile, and catch their rooms up from the store.
    case redisRestart = "Redis SIGKILL, restarted"
    /// Every client of a node closed with 4201 (reconnect now), the node staying up.
    case close4201 = "4201 close (node's clients)"
    /// Every client of a node closed with 4200 (reconnect now), the node staying up.
    case close4200 = "4200 close (node's clients)"
    /// A client link set down for 1–4 s, then up (its routes go with it: kernel behaviour).
    case linkFlap = "link flap (1-4 s down)"
    /// A client link's far end down for 1–4 s: the link loses carrier, as a cable unplugged.
    case carrierLoss = "carrier loss (1-4 s)"
    /// A client process stopped with SIGSTOP past the server's timeouts (activity 2 s, pong
    /// 3 s), then SIGCONT: the seed's "coming back from the background".
    case clientFreeze = "client SIGSTOP 8 s, SIGCONT"
    /// A client process killed with SIGKILL and started again 0.5–3 s later with the same
    /// `--state` file: it rejoins every room from its saved position in a new process (issue
    /// 34, "Saved positions").
    case clientRestart = "client SIGKILL, restarted with --state"
    /// `--redis-cluster` only: a Redis Cluster shard's master killed with SIGKILL once its
    /// replica holds its writes; the nodes lose that shard until the replica is promoted (after
    /// the cluster's node timeout), then follow the new master; the old one is started again
    /// and rejoins as a replica.
    case shardKill = "shard master SIGKILL, replica promoted"
    /// `--redis-cluster` only: a shard's replica takes over with `CLUSTER FAILOVER` (a
    /// coordinated failover: the old master steps down, its slots move and the nodes' sharded
    /// subscriptions there are dropped by Redis).
    case shardFailover = "shard failover (CLUSTER FAILOVER)"

    /// The kinds a run draws from: on one Redis, all but the shards'; on a Redis Cluster, the
    /// shards' in place of the Redis restart.
    static func available(onRedisCluster: Bool) -> [FaultKind] {
        allCases.filter { kind in
            switch kind {
            case .redisRestart: !onRedisCluster
            case .shardKill, .shardFailover: onRedisCluster
            default: true
            }
        }
    }
}

extension FaultKind {
    /// Its name on the command line (`--kind`).
    var name: String {
        switch self {
        case .nodeKill: "node-kill"
        case .nodeMove: "node-move"
        case .redisRestart: "redis-restart"
        case .close4201: "close-4201"
        case .close4200: "close-4200"
        case .linkFlap: "link-flap"
        case .carrierLoss: "carrier-loss"
        case .clientFreeze: "client-freeze"
        case .clientRestart: "client-restart"
        case .shardKill: "shard-kill"
        case .shardFailover: "shard-failover"
        }
    }
}

/// The outcome of one fault.
struct FaultResult: Sendable {
    var kind: FaultKind
    /// What exactly was done (which node, link or client; how long).
    var detail: String
    /// From the end of the fault (the node killed or stopped, the close sent, Redis answering
    /// again, the link or carrier back, SIGCONT) to every client connected, joined again where
    /// its connection went down, and holding every event kept by then and the next one; nil
    /// when that did not happen within the recovery timeout.
    var recovery: Duration?
    /// Clients whose connection went down and came back.
    var reconnected: Int
    /// Whether the fault did what it is for: every client on the node was closed with the
    /// fault's code (1006 for a kill, 4200 for a move, 4201 or 4200 for a close) and reconnected,
    /// and a moved node exited by itself; both nodes lost their bus (Redis); the server pruned
    /// the frozen client (no pong) and it reconnected; a restarted client's new process
    /// connected and joined its rooms. Link faults need not break a TCP
    /// connection, so they always count (the `ip` command that made them succeeded).
    var tookEffect: Bool
}

/// A seeded generator (SplitMix64), so that a schedule can be run again with `--seed`.
struct SplitMix64: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The schedule: rounds of every kind once, each round in its own random order.
///
/// - Parameters:
///   - count: faults in all.
///   - kinds: the kinds to draw from (all of them by default), not empty.
///   - generator: the seeded generator.
/// - Returns: `count` kinds.
func schedule(count: Int, of allowed: [FaultKind] = FaultKind.allCases, using generator: inout SplitMix64) -> [FaultKind] {
    var kinds: [FaultKind] = []
    while kinds.count < count { kinds += allowed.shuffled(using: &generator) }
    return Array(kinds.prefix(count))
}
