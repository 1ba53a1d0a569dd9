import RealtimeServer
import SystemSupport

/// The cluster's presence registry as `RedisFanout`'s presence scripts keep it in Redis: per
/// topic each node's users (the members hash) and how many nodes have each user (the users
/// hash), the nodes' registrations (live for `RedisFanout.nodeTTL` after each, then dead to the
/// others), and each change that is one for everybody published on the topic's bus channel in
/// the same step, to every node following it, its own too. Each call is a round trip to the
/// store (`SimulatedStore.roundTrip`): it fails while the store fails over, as the scripts do
/// on a master that is down.
final class SimulatedPresence: Sendable {
    private struct State {
        /// Per topic, per node id: its users there and their info (`nil`: none).
        var members: [FanoutTopic: [String: [String: String?]]] = [:]
        /// When each node's registration ends (nanoseconds); kept after it ended.
        var liveUntil: [String: Int64] = [:]
    }

    private let simulation: Simulation
    private let store: SimulatedStore
    private let bus: SimulatedBus
    private let state = Locked(State())

    init(simulation: Simulation, store: SimulatedStore, bus: SimulatedBus) {
        self.simulation = simulation
        self.store = store
        self.bus = bus
    }

    /// How long a node's registration lives without a refresh, nanoseconds (`RedisFanout.nodeTTL`).
    static let ttl: Int64 = 5_000_000_000

    /// `PresenceScript.alive`: registers `node` for the TTL from now.
    ///
    /// - Returns: whether it was registered still, and the dead nodes (registrations ended).
    func register(_ node: String) throws(RoomStoreError) -> (wasAlive: Bool, dead: [String]) {
        try store.roundTrip { () throws(RoomStoreError) in
            let now = simulation.time
            return state.withLock { state in
                let wasAlive = (state.liveUntil[node] ?? 0) > now
                state.liveUntil[node] = now + Self.ttl
                return (wasAlive, state.liveUntil.filter { $0.value <= now }.keys.sorted())
            }
        }
    }

    /// `PresenceScript.live`: the nodes whose registration has not ended, and `node`.
    func live(_ node: String) throws(RoomStoreError) -> Set<String> {
        try store.roundTrip { () throws(RoomStoreError) in
            let now = simulation.time
            return state.withLock { state in Set(state.liveUntil.filter { $0.value > now }.keys).union([node]) }
        }
    }

    /// `PresenceScript.join`: true when the user is on no other node (published).
    func join(_ topic: FanoutTopic, node: String, user: String, info: String?, excluding: String) throws(RoomStoreError) -> Bool {
        try store.roundTrip { () throws(RoomStoreError) in
            let first = state.withLock { state -> Bool in add(user, info: info, node: node, topic: topic, in: &state) }
            if first { publish(PresenceFanoutEvent(topic: topic, user: user, info: info, joined: true, excluding: excluding)) }
            return first
        }
    }

    /// `PresenceScript.leave`: true when the user is now on no node (published).
    func leave(_ topic: FanoutTopic, node: String, user: String, excluding: String) throws(RoomStoreError) -> Bool {
        try store.roundTrip { () throws(RoomStoreError) in
            let last = state.withLock { state in remove(user, node: node, topic: topic, in: &state) }
            if last { publish(PresenceFanoutEvent(topic: topic, user: user, info: nil, joined: false, excluding: excluding)) }
            return last
        }
    }

    /// `PresenceScript.members`: the users of the live nodes in `live`, each once, sorted.
    func members(_ topics: [FanoutTopic], live: Set<String>, limit: Int) throws(RoomStoreError) -> [[(user: String, info: String?)]] {
        try store.roundTrip { () throws(RoomStoreError) in
            state.withLock { state in
                topics.map { topic in
                    var users: [String: String?] = [:]
                    for (node, present) in state.members[topic] ?? [:] where live.contains(node) {
                        for (user, info) in present where users[user] == nil { users.updateValue(info, forKey: user) }
                    }
                    return Array(users.sorted { $0.key < $1.key }.prefix(max(0, limit)).map { (user: $0.key, info: $0.value) })
                }
            }
        }
    }

    /// `PresenceScript.cleanup` for each topic: the dead nodes' users taken out, those now on
    /// no node published as gone (and returned), those still on a node that is not dead
    /// published as present again (not returned).
    func cleanup(_ topics: [FanoutTopic], dead: [String]) throws(RoomStoreError) -> [PresenceFanoutEvent] {
        try store.roundTrip { () throws(RoomStoreError) in
            let (gone, again) = state.withLock { state -> ([PresenceFanoutEvent], [PresenceFanoutEvent]) in
                var gone: [PresenceFanoutEvent] = []
                var again: [PresenceFanoutEvent] = []
                let deadNodes = Set(dead)
                for topic in topics {
                    var kept: [String: String?] = [:]
                    for (node, present) in (state.members[topic] ?? [:]).sorted(by: { $0.key < $1.key }) where !deadNodes.contains(node) {
                        for (user, info) in present { kept.updateValue(info, forKey: user) }
                    }
                    var told: Set<String> = []
                    for node in dead {
                        for user in (state.members[topic]?[node] ?? [:]).keys.sorted() {
                            if remove(user, node: node, topic: topic, in: &state) {
                                gone.append(PresenceFanoutEvent(topic: topic, user: user, info: nil, joined: false))
                            } else if let info = kept[user], told.insert(user).inserted {
                                again.append(PresenceFanoutEvent(topic: topic, user: user, info: info, joined: true))
                            }
                        }
                    }
                }
                return (gone, again)
            }
            for change in gone + again { publish(change) }
            return gone
        }
    }

    /// `PresenceScript.reconcile` for each topic: the node's registration made exactly `local`'s
    /// users there, each change that is one for everybody published; with `announce`, each of
    /// its users already registered published as present too (not returned).
    func reconcile(_ topics: [FanoutTopic], node: String, local: [FanoutTopic: [String: String?]], announce: Bool) throws(RoomStoreError) -> [PresenceFanoutEvent] {
        try store.roundTrip { () throws(RoomStoreError) in
            var announced: [PresenceFanoutEvent] = []
            let changes = state.withLock { state -> [PresenceFanoutEvent] in
                var changes: [PresenceFanoutEvent] = []
                for topic in topics {
                    let wanted = local[topic] ?? [:]
                    for (user, info) in (state.members[topic]?[node] ?? [:]).sorted(by: { $0.key < $1.key }) {
                        if wanted[user] == nil {
                            if remove(user, node: node, topic: topic, in: &state) { changes.append(PresenceFanoutEvent(topic: topic, user: user, info: nil, joined: false)) }
                        } else if announce {
                            announced.append(PresenceFanoutEvent(topic: topic, user: user, info: info, joined: true))
                        }
                    }
                    for (user, info) in wanted.sorted(by: { $0.key < $1.key }) where add(user, info: info, node: node, topic: topic, in: &state) {
                        changes.append(PresenceFanoutEvent(topic: topic, user: user, info: info, joined: true))
                    }
                }
                return changes
            }
            for change in announced + changes { publish(change) }
            return changes
        }
    }

    /// Adds the node's user (`HSETNX`, then `HINCRBY` of the users hash): true when the user was
    /// on no node before.
    private func add(_ user: String, info: String?, node: String, topic: FanoutTopic, in state: inout State) -> Bool {
        guard state.members[topic]?[node]?[user] == nil else { return false }
        let before = (state.members[topic] ?? [:]).values.filter { $0[user] != nil }.count
        state.members[topic, default: [:]][node, default: [:]].updateValue(info, forKey: user)
        return before == 0
    }

    /// Removes the node's user (`HDEL`, then `HINCRBY -1`): true when it was the user's last node.
    private func remove(_ user: String, node: String, topic: FanoutTopic, in state: inout State) -> Bool {
        guard state.members[topic]?[node]?.removeValue(forKey: user) != nil else { return false }
        return !(state.members[topic] ?? [:]).values.contains { $0[user] != nil }
    }

    private func publish(_ change: PresenceFanoutEvent) {
        simulation.note("presence \(change.joined ? "+" : "-")\(change.user) on \(change.topic)")
        bus.publish(.presence(change), on: change.topic)
    }
}
