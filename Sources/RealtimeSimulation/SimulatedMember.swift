import Foundation
import Realtime
import RealtimeProtocol
import RealtimeServer
import Reconnect
import ReconnectTesting
import SystemSupport

/// A room member running the real client's machines (`ClientMachines`: the connection's
/// lifecycle, its rooms, the reconnector's backoff) on the simulation's clock: its sockets are
/// `MemberConnection`s to the nodes, its timers the simulation's events, its room auth requests
/// answered by the world's backend. What the client hands its app is checked against the
/// protocol's promise (docs/rooms-protocol.md "Invariants"): each kept event one more than the
/// last of its epoch, each hole told first (`not_recovered`, with its gap when the server knows
/// it), every member keeping the same event at each epoch and id; and no two attempts closer
/// than the reconnector's floor (the storm bound).
final class SimulatedMember: Sendable {
    /// What the app saw of a room, kept apart from the client's own bookkeeping.
    struct Seen {
        /// The epoch and the last id the app was given.
        var position: RoomPosition?
        /// A hole was told (`not_recovered` with no gap): the next position may jump.
        var holeTold = false
        /// The room's members as the app keeps them: `joined`'s list, then each `join` and `leave`.
        var members: Set<String> = []
    }

    private struct State {
        var machines: ClientMachines
        /// Bumped when the client's process restarts: the old process's timers and sockets are gone.
        var process = 0
        var connection: MemberConnection?
        var timers: [ClientMachines.Timer: UInt64] = [:]
        var lastTimerToken: UInt64 = 0
        var seen: [String: Seen] = [:]
        /// When the last socket was opened, nanoseconds, in this process.
        var lastOpen: Int64?
        /// The process is stopped (SIGSTOP, an app in the background) until then, nanoseconds.
        var frozenUntil: Int64 = 0
        /// What came while frozen, in order, and whether a thaw is scheduled to run it.
        var deferred: [@Sendable () -> Void] = []
        var thawScheduled = false
        var kept = 0
        var sent = 0
    }

    let name: String
    let rooms: [String]
    private let world: SimulatedWorld
    private let state: Locked<State>

    init(name: String, rooms: [String], world: SimulatedWorld) {
        self.name = name
        self.rooms = rooms
        self.world = world
        state = Locked(State(machines: Self.machines(world)))
    }

    private static func machines(_ world: SimulatedWorld) -> ClientMachines {
        let seed = UInt64(world.simulation.random(in: 0...Int.max))
        return ClientMachines(options: BirdRealtime.Options(appKey: SimulatedWorld.app.key), random: SeededRandomNumberGenerator(seed: seed))
    }

    /// Events kept so far, over all rooms.
    var kept: Int { state.withLock { $0.kept } }

    /// The client's position in each room.
    var positions: [String: RoomPosition?] {
        state.withLock { state in Dictionary(uniqueKeysWithValues: rooms.map { ($0, state.machines.position(of: $0)) }) }
    }

    var isConnected: Bool { state.withLock { $0.machines.state == .connected } }

    /// What the app was given of `room`.
    func seen(_ room: String) -> Seen { state.withLock { $0.seen[room] ?? Seen() } }

    /// The room's state in the client (`joined`, `joining`, `failed`).
    func phase(of room: String) -> String {
        state.withLock { state in state.machines.isJoined(room) ? "joined" : state.machines.hasFailed(room) ? "failed" : "joining" }
    }

    /// The lobby's members as the app reads them, `nil` while it is not subscribed.
    var lobbyMembers: [String]? { state.withLock { $0.machines.members(of: SimulatedWorld.lobby) } }

    /// Whether every room is joined now.
    var isJoinedEverywhere: Bool { state.withLock { state in rooms.allSatisfy { state.machines.isJoined($0) } } }

    // MARK: - The app

    /// `connect()` and `join` for each room.
    func start() {
        let now = world.simulation.instant
        perform { machines in
            var steps = machines.connect(now: now)
            steps += machines.subscribe(SimulatedWorld.lobby, now: now)
            for room in rooms { steps += machines.join(room, now: now) }
            return steps
        }
    }

    /// Sends one event into a random room it is joined to.
    func sendSomething() {
        guard !isFrozen else { return }
        let now = world.simulation.instant
        let (room, number) = state.withLock { state -> (String, Int) in
            state.sent += 1
            return (rooms[world.simulation.random(in: 0...(rooms.count - 1))], state.sent)
        }
        perform { machines in machines.send(room, event: "said", data: #"{"by":"\#(name)","n":\#(number)}"#, now: now).1 }
    }

    // MARK: - Faults

    /// The member's socket drops (its side: a phone's network went): the node hears the close
    /// after the network's delay, the client a 1006.
    func drop() {
        guard let connection = state.withLock({ $0.connection }), connection.end() else { return }
        world.closedFromClient(connection)
        closed(connection, code: nil)
    }

    /// Node `index` was killed: a connection to it drops with no close frame.
    func nodeRestarted(_ index: Int) {
        guard let connection = state.withLock({ $0.connection }), connection.node == index, connection.end() else { return }
        closed(connection, code: nil)
    }

    /// The node closes the connection with `code` (4200: reconnect now; 4201: the server's ping
    /// went unanswered), as its own sweep or an operator would.
    func closeFromServer(code: UInt16) {
        guard let connection = state.withLock({ $0.connection }) else { return }
        world.closeFromServer(connection, code: code)
    }

    /// The process stops for `duration` (SIGSTOP, an app in the background): nothing it receives
    /// or arms runs until then, and its timers then fire late.
    func freeze(for duration: Duration) {
        let until = world.simulation.time + Simulation.nanoseconds(duration)
        state.withLock { $0.frozenUntil = max($0.frozenUntil, until) }
    }

    /// The process is killed and started again (the CLI's `--state`): a new client that joins
    /// each room from the position the last one saved; the old socket drops with no close.
    func restart() {
        let old = state.withLock { state -> (MemberConnection?, [String: RoomPosition]) in
            defer {
                state.process += 1
                state.connection = nil
                state.timers = [:]
                state.lastOpen = nil
                state.frozenUntil = 0
                state.deferred = []
                // The old process's pending thaw finds nothing; a new freeze schedules its own.
                state.thawScheduled = false
                state.machines = Self.machines(world)
            }
            var saved: [String: RoomPosition] = [:]
            for room in rooms { saved[room] = state.machines.position(of: room) }
            return (state.connection, saved)
        }
        if let connection = old.0, connection.end() { world.closedFromClient(connection) }
        let now = world.simulation.instant
        perform { machines in
            var steps = machines.connect(now: now)
            steps += machines.subscribe(SimulatedWorld.lobby, now: now)
            for room in rooms { steps += machines.join(room, from: old.1[room], now: now) }
            return steps
        }
    }

    // MARK: - What the owner reports

    /// The connection ended: `code` from the node's close frame, `nil` when it dropped.
    func closed(_ connection: MemberConnection, code: UInt16?) {
        deliver { [self] in
            // A socket of a process since restarted, or one the client already left, is no news.
            guard state.withLock({ $0.connection === connection }) else { return }
            let now = world.simulation.instant
            perform { machines in machines.closed(generation: connection.generation, code: code ?? 1006, reason: "", now: now) }
        }
    }

    func received(_ text: String, on connection: MemberConnection) {
        if Simulation.printsNotes, text.contains("presence-") { world.simulation.note("\(name) gets \(text)") }
        deliver { [self] in
            guard state.withLock({ $0.connection === connection }) else { return }
            let now = world.simulation.instant
            perform { machines in machines.received(text, generation: connection.generation, now: now) }
        }
    }

    /// Ends the member's connection and lets go of its node (the end of a run).
    func tearDown() {
        let connection = state.withLock { state -> MemberConnection? in
            defer {
                state.connection = nil
                state.timers = [:]
            }
            return state.connection
        }
        _ = connection?.end()
        connection?.hub = nil
    }

    // MARK: - Performing

    private var isFrozen: Bool { state.withLock { world.simulation.time < $0.frozenUntil } }

    /// Runs `work` now, or when the process thaws, after the work that waited before it (in the
    /// order the work came, however many freezes it waited through).
    private func deliver(_ work: @escaping @Sendable () -> Void) {
        let now = world.simulation.time
        let (runNow, thawAt) = state.withLock { state -> (Bool, Int64?) in
            guard now < state.frozenUntil || !state.deferred.isEmpty else { return (true, nil) }
            state.deferred.append(work)
            guard !state.thawScheduled else { return (false, nil) }
            state.thawScheduled = true
            return (false, state.frozenUntil)
        }
        if runNow { return work() }
        if let thawAt { world.simulation.after(.nanoseconds(max(0, thawAt - now))) { [self] in thaw() } }
    }

    /// The process thawed: the work that waited runs in order; frozen again meanwhile, it waits
    /// for that thaw.
    private func thaw() {
        while true {
            let now = world.simulation.time
            let next = state.withLock { state -> (work: (@Sendable () -> Void)?, refrozen: Int64?) in
                if now < state.frozenUntil { return (nil, state.frozenUntil) }
                guard !state.deferred.isEmpty else {
                    state.thawScheduled = false
                    return (nil, nil)
                }
                return (state.deferred.removeFirst(), nil)
            }
            if let refrozen = next.refrozen {
                world.simulation.after(.nanoseconds(refrozen - now)) { [self] in thaw() }
                return
            }
            guard let work = next.work else { return }
            work()
        }
    }

    /// The rooms a batch of steps gave `joined`: those whose position it moved must be told a
    /// hole (`not_recovered`) in the same batch.
    struct Batch {
        var joined: Set<String> = []
        var untold: Set<String> = []
    }

    /// Applies an event to the client's machines and performs the steps it returns, in order.
    private func perform(_ event: (inout ClientMachines) -> [ClientMachines.Step]) {
        let (steps, process) = state.withLock { state in (event(&state.machines), state.process) }
        var batch = Batch()
        for step in steps { perform(step, process: process, batch: &batch) }
        for room in batch.untold.sorted() { world.violation("\(name) in \(room): joined moved its position with no hole told") }
    }

    private func perform(_ step: ClientMachines.Step, process: Int, batch: inout Batch) {
        let simulation = world.simulation
        switch step {
        case .open(let generation):
            let connection = MemberConnection(member: self, world: world, generation: generation)
            let (tooSoon, floor, ghost) = state.withLock { state -> (Int64?, Duration, MemberConnection?) in
                let ghost = state.connection
                let floor = state.machines.attemptFloor
                defer {
                    state.connection = connection
                    state.lastOpen = simulation.time
                }
                guard let last = state.lastOpen, simulation.time - last < Simulation.nanoseconds(floor) else { return (nil, floor, ghost) }
                return (simulation.time - last, floor, ghost)
            }
            // A socket the client forgot (it ended by itself) and never closed: the node hears it go.
            if let ghost, ghost.end() { world.closedFromClient(ghost) }
            if let tooSoon { world.violation("\(name): an attempt \(tooSoon / 1_000) µs after the last, under the reconnector's floor of \(floor)") }
            simulation.note("\(name) open \(generation)")
            world.open(connection, on: simulation.random(in: 0...(world.nodeCount - 1)))
        case .send(let text, let generation):
            guard let connection = state.withLock({ $0.connection }), connection.generation == generation, connection.isOpen else { return }
            world.send(text, over: connection)
        case .close(_, let generation), .abort(let generation):
            guard let connection = state.withLock({ state -> MemberConnection? in
                guard let connection = state.connection, connection.generation == generation else { return nil }
                state.connection = nil
                return connection
            }), connection.end() else { return }
            world.closedFromClient(connection)
        case .schedule(let timer, let at):
            let token = state.withLock { state -> UInt64 in
                state.lastTimerToken += 1
                state.timers[timer] = state.lastTimerToken
                return state.lastTimerToken
            }
            simulation.after(at - simulation.instant) { [self] in
                deliver { [self] in
                    let due = state.withLock { state -> Bool in
                        guard state.process == process, state.timers[timer] == token else { return false }
                        state.timers[timer] = nil
                        return true
                    }
                    guard due else { return }
                    let now = world.simulation.instant
                    perform { machines in machines.fire(timer, now: now) }
                }
            }
        case .cancel(let timer):
            state.withLock { _ = $0.timers.removeValue(forKey: timer) }
        case .authorizeRooms(let rooms, let request):
            world.authorize(rooms, user: name) { [self] result in
                deliver { [self] in
                    guard state.withLock({ $0.process == process }) else { return }
                    let now = world.simulation.instant
                    perform { machines in machines.roomsAuthorized(request: request, result, now: now) }
                }
            }
        case .authorizeChannel(let request, let id):
            world.authorize(request, user: name) { [self] result in
                deliver { [self] in
                    guard state.withLock({ $0.process == process }) else { return }
                    let now = world.simulation.instant
                    perform { machines in machines.channelAuthorized(request.channelName, request: id, result, now: now) }
                }
            }
        case .roomEvent(let room, let event, let data, let meta):
            roomEvent(room, event: event, data: data, meta: meta, batch: &batch)
        case .roomSettled(let room, let error):
            simulation.note("\(name) \(room) settled \(error?.code.rawValue ?? "joined")")
            if error != nil { joinAgain(room, process: process) }
        case .state(let current):
            simulation.note("\(name) \(current)")
        case .report(let text) where text == ClientMachines.unsettled:
            world.violation("\(name): \(text)")
        case .reconnect, .report:
            break
        }
    }

    /// A room that failed for good (too many holes in a row, a refusal) is joined again a
    /// second later from the position the client kept, as an app that saves `room.position`
    /// does; a join already on its way is left alone.
    private func joinAgain(_ room: String, process: Int) {
        world.simulation.after(.seconds(1)) { [self] in
            deliver { [self] in
                let (current, failed, position) = state.withLock { ($0.process == process, $0.machines.hasFailed(room), $0.machines.position(of: room)) }
                guard current, failed else { return }
                world.simulation.note("\(name) \(room) joined again from \(String(describing: position))")
                let now = world.simulation.instant
                perform { machines in machines.join(room, from: position, now: now) }
            }
        }
    }

    /// What the app is given of a room, checked.
    private func roomEvent(_ room: String, event: String, data: String, meta: RoomEventMeta, batch: inout Batch) {
        if meta.isKept {
            guard let epoch = meta.epoch else { return world.violation("\(name) in \(room): event \(meta.id) with no epoch") }
            let problem = state.withLock { state -> String? in
                var seen = state.seen[room, default: Seen()]
                defer { state.seen[room] = seen }
                let next = RoomPosition(epoch: epoch, id: meta.id)
                if let position = seen.position, !seen.holeTold {
                    guard epoch == position.epoch, meta.id == position.id + 1 else {
                        seen.position = next
                        if epoch != position.epoch { return "event \(epoch)/\(meta.id) after \(position) with no new epoch told" }
                        return meta.id <= position.id ? "event \(meta.id) again (had \(position.id))" : "event \(meta.id) after \(position.id): \(meta.id - position.id - 1) missing, not told"
                    }
                } else if let position = seen.position, epoch == position.epoch, meta.id <= position.id {
                    // After a hole told the position may jump, never go back.
                    seen.position = next
                    seen.holeTold = false
                    return "event \(meta.id) again after a hole told (had \(position.id))"
                }
                seen.position = next
                seen.holeTold = false
                state.kept += 1
                return nil
            }
            if let problem { world.violation("\(name) in \(room): \(problem)\(meta.replayed ? " (replayed)" : "")") }
            world.agree(room: room, at: RoomPosition(epoch: epoch, id: meta.id), data: data, member: name)
            world.simulation.note("\(name) \(room) #\(meta.id)")
            return
        }
        let body = StrictJSON.parse(data)
        switch event {
        case RoomSystemEvent.joined:
            guard let epoch = body?["epoch"]?.string, let id = body?["id"]?.number else { return world.violation("\(name) in \(room): joined without a position") }
            let position = RoomPosition(epoch: epoch, id: UInt64(id))
            let jumped = state.withLock { state -> Bool in
                var seen = state.seen[room, default: Seen()]
                defer { state.seen[room] = seen }
                let jumped = seen.position != nil && seen.position != position && !seen.holeTold
                seen.position = position
                seen.holeTold = false
                seen.members = Set((body?["members"]?.array ?? []).compactMap { $0["id"]?.string })
                return jumped
            }
            // A position that moved must be told by the `not_recovered` that follows in the same step.
            batch.joined.insert(room)
            if jumped { batch.untold.insert(room) }
            world.simulation.note("\(name) \(room) joined \(epoch) \(id)")
        case RoomSystemEvent.join, RoomSystemEvent.leave:
            guard let user = body?["id"]?.string else { return world.violation("\(name) in \(room): \(event) without an id") }
            state.withLock { state in
                if event == RoomSystemEvent.join { state.seen[room, default: Seen()].members.insert(user) } else { state.seen[room, default: Seen()].members.remove(user) }
            }
        case RoomSystemEvent.error:
            guard body?["code"]?.string == RoomErrorCode.notRecovered.rawValue else { return }
            if batch.untold.remove(room) != nil { return }
            guard let gap = body?["gap"].flatMap(RoomGap.init(json:)) else {
                // Told after this batch's `joined`, which settled the position: nothing jumps later.
                if !batch.joined.contains(room) { state.withLock { $0.seen[room, default: Seen()].holeTold = true } }
                return
            }
            let problem = state.withLock { state -> String? in
                var seen = state.seen[room, default: Seen()]
                defer { state.seen[room] = seen }
                guard let position = seen.position else { return "a gap with no position" }
                if gap.epoch == position.epoch {
                    guard let missing = gap.missing, missing.lowerBound == position.id + 1 else { return "a gap \(String(describing: gap.missing)) after \(position.id)" }
                    seen.position = RoomPosition(epoch: gap.epoch, id: missing.upperBound)
                    seen.holeTold = false
                    return nil
                }
                guard gap.previous == position || seen.holeTold else { return "a new epoch's gap from \(String(describing: gap.previous)), the app at \(position)" }
                if let missing = gap.missing, missing.lowerBound != 1 { return "a new epoch's gap \(missing) that does not start at 1" }
                seen.position = RoomPosition(epoch: gap.epoch, id: gap.missing?.upperBound ?? 0)
                seen.holeTold = false
                return nil
            }
            if let problem { world.violation("\(name) in \(room): \(problem)") }
            world.simulation.note("\(name) \(room) gap \(gap.epoch) \(String(describing: gap.missing))")
        default:
            break
        }
    }
}

/// One WebSocket connection between a member and a node, as the hub sees it (`ConnectionOutput`):
/// what the hub sends reaches the member after the network's delay, in order.
final class MemberConnection: ConnectionOutput {
    private struct State {
        var socketID: String?
        var node = 0
        var open = true
        /// Weak: the world holds the nodes it runs; a killed node's hub goes with its last job.
        weak var hub: RealtimeHub?
        /// When the last frame to the member, and to the node, arrives: frames keep their order.
        var lastArrival: Int64 = 0
        var lastArrivalAtNode: Int64 = 0
        /// The requests the node received and has not answered, each with the token of its
        /// last asking (`SimulatedWorld.request(in:)`).
        var waiting: [String: UInt64] = [:]
        var lastToken: UInt64 = 0
    }

    let member: SimulatedMember
    /// The client's socket generation this connection is.
    let generation: UInt64
    private let world: SimulatedWorld
    private let state = Locked(State())

    init(member: SimulatedMember, world: SimulatedWorld, generation: UInt64) {
        self.member = member
        self.world = world
        self.generation = generation
    }

    var socketID: String? { state.withLock { $0.socketID } }
    var node: Int { state.withLock { $0.node } }
    var isOpen: Bool { state.withLock { $0.open } }

    /// The node that accepted the connection, once it did.
    var hub: RealtimeHub? {
        get { state.withLock { $0.hub } }
        set { state.withLock { $0.hub = newValue } }
    }

    func opened(socketID: String?, node: Int) { state.withLock { $0.socketID = socketID; $0.node = node } }

    /// The node the connection is opened to, before it accepts it.
    func aim(at node: Int) { state.withLock { $0.node = node } }

    /// When a frame the member sends now arrives at the node, after the ones before it.
    func arrivalAtNode(after delay: Int64) -> Int64 {
        state.withLock { state in
            state.lastArrivalAtNode = max(world.simulation.time + delay, state.lastArrivalAtNode + 1)
            return state.lastArrivalAtNode
        }
    }

    /// Ends the connection on both sides; returns whether it was open.
    func end() -> Bool {
        state.withLock { state in
            defer { state.open = false }
            return state.open
        }
    }

    /// When a frame sent now arrives, after the ones before it.
    func arrival(after delay: Int64) -> Int64 {
        state.withLock { state in
            state.lastArrival = max(world.simulation.time + delay, state.lastArrival + 1)
            return state.lastArrival
        }
    }

    /// The node received `request`: returns the token of this asking.
    func asked(_ request: String) -> UInt64 {
        state.withLock { state in
            state.lastToken += 1
            state.waiting[request] = state.lastToken
            return state.lastToken
        }
    }

    /// Whether the asking `token` of `request` is still unanswered.
    func isWaiting(for request: String, token: UInt64) -> Bool { state.withLock { $0.waiting[request] == token } }

    func send(text: String) {
        guard isOpen else { return }
        if let answered = SimulatedWorld.answer(in: text) { state.withLock { _ = $0.waiting.removeValue(forKey: answered) } }
        let at = arrival(after: Int64(world.simulation.random(in: 20...800)) * 1_000)
        world.simulation.after(.nanoseconds(at - world.simulation.time)) { [self] in
            guard isOpen else { return }
            member.received(text, on: self)
        }
    }

    func close(code: UInt16, reason: String) { world.closeFromServer(self, code: code) }

    func abort() { world.closeFromServer(self, code: nil) }
}
