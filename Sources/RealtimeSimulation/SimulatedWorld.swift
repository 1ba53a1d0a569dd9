import Realtime
import RealtimeProtocol
import RealtimeServer
import SystemSupport

/// One schedule's world: two or three nodes running the real `RealtimeHub` (its decisions, its
/// lanes, its outbox; its deferred work on the simulation's clock), the store and bus they
/// share, members on them, and the faults the seed picks.
package final class SimulatedWorld: Sendable {
    static let app = RealtimeApp(id: "1", key: "sim-key", secret: "sim-secret", maxConnections: 1_000, activityTimeout: 120)
    /// Presence rooms: each member's list of a room's members must converge too.
    static let rule = RoomRule(history: 1_000, presence: true, membersSend: true)

    /// What one schedule did.
    package struct Outcome: Sendable {
        package var faults = 0
        package var events = 0
        package var kept = 0
        package var violations: [String] = []
        package var trace: UInt64 = 0
    }

    private struct State {
        var hubs: [RealtimeHub] = []
        var members: [SimulatedMember] = []
        var violations: [String] = []
        var faults = 0
        var incarnations: [Int] = []
        /// Every hub's executor, for `tearDown` (their queues hold jobs that hold their hubs).
        var executors: [SimulatedExecutor] = []
        /// Each node's executor now: a killed node's runs nothing more.
        var nodeExecutors: [Int: SimulatedExecutor] = [:]
        /// Each room's position when its history was last lost: one node with no bus cannot
        /// know of the loss before the room's next event, and its members stay there.
        var lostAt: [String: RoomPosition] = [:]
    }

    let simulation: Simulation
    let bus: SimulatedBus
    let store: SimulatedStore
    let presence: SimulatedPresence
    let nodeCount: Int
    let rooms: [String]
    /// The schedule's faults, drawn before it runs (`PlannedFault.plan`).
    package let plan: [PlannedFault]
    private let state = Locked(State())

    /// Whether failovers that lose a room's newest writes in its epoch are among the faults.
    let lossyFailovers: Bool

    /// A world for `seed`: 1 to 3 nodes (one with no bus), 2 to 4 members, 1 to 3 rooms, faults for
    /// `activeSeconds` (`run`).
    ///
    /// - Parameters:
    ///   - lossyFailovers: whether failovers that lose a room's newest writes in its epoch are
    ///     among the faults (off by default: they find a window of the design not closed yet,
    ///     told in `perform(_:)`).
    ///   - activeSeconds: how long members send and faults happen, virtual seconds.
    package init(seed: UInt64, lossyFailovers: Bool = false, activeSeconds: Int = 4) {
        self.lossyFailovers = lossyFailovers
        self.activeSeconds = activeSeconds
        simulation = Simulation(seed: seed)
        bus = SimulatedBus(simulation: simulation)
        store = SimulatedStore(simulation: simulation, bus: bus)
        presence = SimulatedPresence(simulation: simulation, store: store, bus: bus)
        nodeCount = simulation.random(in: 1...3)
        rooms = (1...simulation.random(in: 1...3)).map { "room\($0)" }
        let memberCount = simulation.random(in: 2...4)
        plan = PlannedFault.plan(seed: seed, members: memberCount, nodes: nodeCount, rooms: rooms.count,
                                 active: Int64(activeSeconds) * 1_000_000_000, lossyFailovers: lossyFailovers)
        state.withLock { $0.incarnations = Array(repeating: 0, count: nodeCount) }
        for index in 0..<nodeCount { start(index) }
        let members = (1...memberCount).map { number in
            SimulatedMember(name: "m\(number)", rooms: rooms, world: self)
        }
        state.withLock { $0.members = members }
    }

    /// How long members send and faults happen, virtual seconds.
    let activeSeconds: Int

    // MARK: - Nodes

    private func start(_ index: Int) {
        let incarnation = state.withLock { state -> Int in
            state.incarnations[index] += 1
            return state.incarnations[index]
        }
        var configuration = RealtimeHub.Configuration(apps: [Self.app])
        configuration.roomStore = store
        // A small lane: a store failing over fills it, and its bounds are checked (`checkQueues`).
        configuration.roomLaneBacklog = Self.laneBacklog
        // One node runs with no bus at all, as `realtime-server` without `--redis` does.
        configuration.fanout = nodeCount > 1
            ? NodeFanout(bus: bus, presence: presence, simulation: simulation, node: index, id: "\(index).\(incarnation)") : nil
        let executor = SimulatedExecutor(simulation: simulation)
        configuration.executor = executor
        state.withLock { state in
            state.executors.append(executor)
            state.nodeExecutors[index] = executor
        }
        configuration.wallClock = { [simulation] in simulation.wallMilliseconds }
        configuration.log = { [simulation] text in simulation.note("node \(index): \(text)") }
        let counter = Locked(0)
        configuration.socketIDs = {
            let next = counter.withLock { value -> Int in
                value += 1
                return value
            }
            return "\(index).\(incarnation).\(next)"
        }
        let hub = RealtimeHub(configuration: configuration, now: { [simulation] in simulation.instant })
        configuration.fanout?.start(hub)
        configuration.fanout?.follow(.app(Self.app.id))
        state.withLock { state in
            if state.hubs.count > index { state.hubs[index] = hub } else { state.hubs.append(hub) }
        }
        sweepLater(index, hub)
    }

    private func hub(_ index: Int) -> RealtimeHub { state.withLock { $0.hubs[index] } }

    /// The node's sweep, once a second on its clock, while this hub runs the node.
    private func sweepLater(_ index: Int, _ hub: RealtimeHub) {
        simulation.after(.seconds(1)) { [self] in
            guard state.withLock({ $0.hubs[index] === hub }) else { return }
            hub.sweep()
            sweepLater(index, hub)
        }
    }

    /// Node `index` killed and started again: its connections drop with no close, its state is
    /// gone; the store and the bus keep theirs.
    func restart(_ index: Int) {
        state.withLock { $0.nodeExecutors[index] }?.clear()
        bus.detach(index)
        for member in state.withLock({ $0.members }) { member.nodeRestarted(index) }
        start(index)
    }

    // MARK: - Connections

    func open(_ connection: MemberConnection, on node: Int) {
        connection.aim(at: node)
        let delay = Int64(simulation.random(in: 100...2_000)) * 1_000
        simulation.after(.nanoseconds(delay)) { [self] in
            guard connection.isOpen else { return }
            let hub = hub(node)
            let socketID = hub.open(appKey: Self.app.key, namespace: .bird, output: connection)
            connection.opened(socketID: socketID, node: node)
            connection.hub = hub
        }
    }

    /// A frame from the member, after the network's delay, in order. A request (a room's join,
    /// a channel's subscription) must be answered on the connection within `answerDeadline`,
    /// unless the connection ends first.
    func send(_ text: String, over connection: MemberConnection) {
        let at = connection.arrivalAtNode(after: Int64(simulation.random(in: 20...800)) * 1_000)
        simulation.after(.nanoseconds(at - simulation.time)) { [self] in
            guard connection.isOpen, let socketID = connection.socketID, let hub = connection.hub else { return }
            if let request = Self.request(in: text) {
                let token = connection.asked(request)
                simulation.after(Self.answerDeadline) { [self] in
                    guard connection.isOpen, connection.isWaiting(for: request, token: token) else { return }
                    violation("\(connection.member.name): \(request) unanswered by node \(connection.node) for \(Self.answerDeadline) on an open connection")
                }
            }
            hub.receive(text: text, from: socketID)
        }
    }

    /// How long a node may take to answer a request: the client's own deadline (its auth
    /// timeout, 10 s), after which it asks again.
    static let answerDeadline = Duration.seconds(10)

    /// The request a client frame makes (`room <name>` for `room_join`, `channel <name>` for
    /// `subscribe`), `nil` for any other frame.
    static func request(in text: String) -> String? {
        guard text.contains("room_join") || text.contains("subscribe"), let frame = StrictJSON.parse(text),
              let event = frame["event"]?.string, let data = frame["data"]?.string.flatMap(StrictJSON.parse) else { return nil }
        if event.hasSuffix(":room_join"), let room = data["room"]?.string { return "room \(room)" }
        if event.hasSuffix(":subscribe"), let channel = data["channel"]?.string { return "channel \(channel)" }
        return nil
    }

    /// The request a node's frame answers: a room's `joined` or `error`, a channel's
    /// `subscription_succeeded` or `subscription_error`; `nil` for any other frame.
    static func answer(in text: String) -> String? {
        guard text.contains("joined") || text.contains("error") || text.contains("subscription_succeeded"),
              let frame = StrictJSON.parse(text), let event = frame["event"]?.string, let channel = frame["channel"]?.string else { return nil }
        if event.hasSuffix(":room_event") {
            guard let inner = frame["data"]?.string.flatMap(StrictJSON.parse)?["event"]?.string,
                  inner == RoomSystemEvent.joined || inner == RoomSystemEvent.error else { return nil }
            return "room \(channel)"
        }
        if event.hasSuffix(":subscription_succeeded") || event.hasSuffix(":subscription_error") { return "channel \(channel)" }
        return nil
    }

    /// Most jobs waiting on a node's room lane in the simulation (10,000 by default): small, so
    /// that a store failing over fills it.
    static let laneBacklog = 16

    /// Checks every node's lanes against their bounds every 50 ms, until `end`.
    private func checkQueues(until end: Int64) {
        simulation.after(.milliseconds(50)) { [self] in
            guard simulation.time < end else { return }
            let hubs = state.withLock { $0.hubs }
            for (index, hub) in hubs.enumerated() {
                for line in hub.lanesOverBounds { violation("node \(index): \(line)") }
            }
            checkQueues(until: end)
        }
    }

    /// The member ended its connection (`end()` was called): the node hears the close after
    /// the network's delay.
    func closedFromClient(_ connection: MemberConnection) {
        let at = connection.arrivalAtNode(after: Int64(simulation.random(in: 20...800)) * 1_000)
        simulation.after(.nanoseconds(at - simulation.time)) {
            guard let socketID = connection.socketID, let hub = connection.hub else { return }
            hub.closed(socketID)
        }
    }

    /// The node closed or dropped the connection: the member hears it after the frames before it.
    func closeFromServer(_ connection: MemberConnection, code: UInt16?) {
        let at = connection.arrival(after: Int64(simulation.random(in: 20...800)) * 1_000)
        simulation.after(.nanoseconds(at - simulation.time)) {
            guard connection.end() else { return }
            connection.member.closed(connection, code: code)
            if let socketID = connection.socketID, let hub = connection.hub { hub.closed(socketID) }
        }
    }

    /// The app's backend answers a room auth request (`POST /rooms/auth`) 1-30 ms later: a
    /// token per room, expiring 4-30 s from now (the client renews it at half its life, during
    /// the run; a member frozen past its expiry meets the server's own check), or, one time in
    /// twenty, a 503 the client retries with backoff.
    func authorize(_ rooms: [String], user: String, answer: @escaping @Sendable (Result<RoomAuthorizationResponse, AuthorizationError>) -> Void) {
        let fails = simulation.random(in: 1...20) == 1
        let lifetime = simulation.random(in: 4...30)
        simulation.after(.milliseconds(simulation.random(in: 1...30))) { [self] in
            guard !fails else { return answer(.failure(.httpStatus(503, body: "simulated"))) }
            let now = simulation.wallMilliseconds
            var entries: [String: RoomAuthorizationResponse.Entry] = [:]
            for room in rooms {
                entries[room] = RoomAuthorizationResponse.Entry(token: token(room: room, user: user, lifetime: lifetime), expires: now + Int64(lifetime) * 1000)
            }
            answer(.success(RoomAuthorizationResponse(time: now, rooms: entries)))
        }
    }

    /// The presence channel every member subscribes to: its members must converge to the
    /// members connected.
    static let lobby = "presence-lobby"

    /// The app's backend answers a channel auth request (`POST /pusher/auth`) 1-30 ms later:
    /// the member's `channel_data` (its name as `user_id`) signed with the socket id.
    func authorize(_ request: ChannelAuthorizationRequest, user: String,
                   answer: @escaping @Sendable (Result<ChannelAuthorizationResponse, AuthorizationError>) -> Void) {
        simulation.after(.milliseconds(simulation.random(in: 1...30))) {
            let channelData = #"{"user_id":"\#(user)"}"#
            let signer = ChannelAuthorization(key: Self.app.key, secret: Self.app.secret)
            answer(.success(ChannelAuthorizationResponse(auth: signer.authorizeSubscription(socketID: request.socketID, channel: request.channelName,
                                                                                             channelData: channelData),
                                                         channelData: channelData)))
        }
    }

    /// A room token for `user`, valid for `lifetime` seconds on the simulation's wall clock.
    func token(room: String, user: String, lifetime: Int) -> String {
        let now = Int(simulation.wallMilliseconds / 1000)
        let claims = RoomClaims(subject: user, room: room, expiresAt: now + lifetime, issuedAt: now, info: nil, rule: Self.rule)
        return (try? JSONWebToken.sign(claims, secret: Self.app.secret)) ?? ""
    }

    /// What members kept for each room, epoch and id: every member must keep the same event
    /// there (the store's sequence for that epoch), whichever node it came through.
    private let seen = Locked<[String: String]>([:])

    /// Checks that `data` is what every other member kept at `room`, `position`.
    func agree(room: String, at position: RoomPosition, data: String, member: String) {
        let key = "\(room) \(position.epoch) \(position.id)"
        let other = seen.withLock { seen -> String? in
            if let kept = seen[key] { return kept }
            seen[key] = data
            return nil
        }
        if let other, other != data { violation("\(member) in \(room): \(position) is \(data), another member kept \(other) there") }
    }

    func violation(_ text: String) {
        let at = simulation.time
        state.withLock { $0.violations.append("t=\(at / 1_000_000) ms: \(text)") }
    }

    // MARK: - The schedule

    /// Runs the schedule: members connect and send for `activeSeconds` while faults happen, then
    /// the world settles with no fault for `settleSeconds` and every member must hold every event
    /// of each room's current epoch (nothing lost), on top of the checks made as events came.
    ///
    /// - Parameter only: the indexes in `plan` of the faults that happen (`nil`: all of them),
    ///   for replaying a shrunk schedule.
    package func run(only: Set<Int>? = nil, settleSeconds: Int = 8) -> Outcome {
        let members = state.withLock { $0.members }
        for member in members { member.start() }
        let active = Int64(activeSeconds) * 1_000_000_000
        // Sends: a member says something every 20-200 ms.
        for member in members { talk(member, until: active) }
        checkQueues(until: active + Int64(Self.maxSettleSeconds) * 1_000_000_000)
        for (index, planned) in plan.enumerated() where only?.contains(index) ?? true {
            simulation.after(.nanoseconds(planned.at)) { [self] in perform(planned.fault) }
        }
        // Then no fault: the clients back off up to 30 s after many drops, so the world runs a
        // second at a time past `settleSeconds` until every member is back in every room at the
        // room's position, for at most `maxSettleSeconds`.
        var end = active + Int64(settleSeconds) * 1_000_000_000
        var finished = simulation.run(until: end)
        while finished, end < active + Int64(Self.maxSettleSeconds) * 1_000_000_000, !settled(members) {
            end += 1_000_000_000
            finished = simulation.run(until: end)
        }
        if !finished { violation("the run went past \(Simulation.maxEvents) events") }
        check(members)
        let outcome = state.withLock { state in
            Outcome(faults: state.faults, events: simulation.events, kept: members.reduce(0) { $0 + $1.kept }, violations: state.violations,
                    trace: simulation.trace)
        }
        tearDown(members)
        return outcome
    }

    /// Lets the world go: the events still scheduled (sweeps, timers) and the references
    /// between hubs, connections and members form cycles that would keep every schedule's world
    /// in memory for the whole run.
    private func tearDown(_ members: [SimulatedMember]) {
        simulation.clear()
        for member in members { member.tearDown() }
        for node in 0..<nodeCount { bus.detach(node) }
        let executors = state.withLock { state in
            defer {
                state.members = []
                state.hubs = []
                state.executors = []
            }
            return state.executors
        }
        for executor in executors { executor.clear() }
    }

    private func talk(_ member: SimulatedMember, until end: Int64) {
        simulation.after(.milliseconds(simulation.random(in: 20...200))) { [self] in
            guard simulation.time < end else { return }
            member.sendSomething()
            talk(member, until: end)
        }
    }

    /// One fault of the plan.
    private func perform(_ fault: Fault) {
        let members = state.withLock { state -> [SimulatedMember] in
            state.faults += 1
            return state.members
        }
        simulation.note("fault \(fault)")
        switch fault {
        case .drop(let member): members[member].drop()
        case .busLost(let node, let milliseconds): bus.loseSubscription(node, for: .milliseconds(milliseconds))
        case .nodeRestart(let node): restart(node)
        case .historyLost(let room):
            let name = rooms[room]
            if let position = store.kept.peekPosition(app: Self.app.id, room: name) { state.withLock { $0.lostAt[name] = position } }
            store.lose(app: Self.app.id, room: name)
        case .serverClose(let member, let code): members[member].closeFromServer(code: code)
        case .freeze(let member, let milliseconds): members[member].freeze(for: .milliseconds(milliseconds))
        case .clientRestart(let member): members[member].restart()
        case .failover(let milliseconds):
            store.failOver(app: Self.app.id, room: rooms[0], losing: 0, for: .milliseconds(milliseconds), nodes: nodeCount)
        case .lossyFailover(let room, let losing, let milliseconds):
            // A window of the design, found here: a node whose subscription dropped before the
            // lost events reached it appends after the failover with what it saw (not them) and
            // is given their ids again, before the node that delivered them checks the room.
            store.failOver(app: Self.app.id, room: rooms[room], losing: losing, for: .milliseconds(milliseconds), nodes: nodeCount)
        }
    }

    /// Longest the world settles after the faults, in seconds: two backoff caps.
    static let maxSettleSeconds = 60

    /// Whether every member is connected, joined everywhere and at each room's position.
    private func settled(_ members: [SimulatedMember]) -> Bool {
        members.allSatisfy { member in
            member.isConnected && member.isJoinedEverywhere && rooms.allSatisfy { room in problem(member, room) == nil }
        } && presenceProblem(members) == nil
    }

    /// What is wrong with the members' view of presence, `nil` when nothing: each member
    /// connected lists exactly the members connected, in the lobby and in every room (presence
    /// converges).
    private func presenceProblem(_ members: [SimulatedMember]) -> String? {
        let connected = Set(members.filter(\.isConnected).map(\.name))
        for member in members where member.isConnected {
            guard let listed = member.lobbyMembers else { return "\(member.name) not subscribed to \(Self.lobby)" }
            guard Set(listed) == connected else { return "\(member.name) lists \(listed.sorted()) in \(Self.lobby), connected are \(connected.sorted())" }
            for room in rooms {
                let present = member.seen(room).members
                guard present == connected else { return "\(member.name) lists \(present.sorted()) in \(room), connected are \(connected.sorted())" }
            }
        }
        return nil
    }

    /// What is wrong with `member`'s view of `room` against the store's, `nil` when nothing:
    /// the app must have been given every event up to the room's position (the client's own
    /// position is not enough: it could move past events it never delivered). Reads the store
    /// without changing it.
    private func problem(_ member: SimulatedMember, _ room: String) -> String? {
        let seen = member.seen(room)
        let phase = member.phase(of: room)
        guard let current = store.kept.peekPosition(app: Self.app.id, room: room) else {
            // No stream: the history was lost and nothing used the room since.
            return phase == "joined" ? nil : "\(phase) after the settling"
        }
        guard let position = seen.position else { return "never joined (\(phase))" }
        // One node (no bus, no quiet checks) learns that its store lost a room's history from
        // the room's next event or join: with none since, its members stay where the loss found them.
        let lost = state.withLock { $0.lostAt[room] }
        if nodeCount == 1, current.id == 0, position.epoch != current.epoch, position == lost, phase == "joined" { return nil }
        if position != current || seen.holeTold {
            let gap = position.epoch == current.epoch && current.id > position.id ? "\(current.id - position.id) lost" : "behind"
            return "(\(phase)) the app at \(position)\(seen.holeTold ? " after a hole told" : ""), the room at \(current): \(gap)"
        }
        if member.positions[room] != current { return "the client at \(String(describing: member.positions[room] ?? nil)), its app and the room at \(current)" }
        return phase == "joined" ? nil : "\(phase) after the settling"
    }

    /// After the settling: every member connected, joined, and at each room's position.
    private func check(_ members: [SimulatedMember]) {
        for member in members {
            guard member.isConnected else {
                violation("\(member.name) not connected after the settling")
                continue
            }
            for room in rooms {
                if let problem = problem(member, room) { violation("\(member.name) in \(room): \(problem)") }
            }
        }
        if let problem = presenceProblem(members) { violation(problem) }
    }
}
