import Foundation
import RealtimeProtocol
import RealtimeServer
import SystemSupport

/// A room member as a client speaks the protocol (docs/rooms-protocol.md): it joins its rooms
/// from the positions it reached, keeps every event once, in id order, rejoins after `resync`
/// and after each drop (on any node), sends events now and then; and checks what it is told
/// against the protocol's promise: each event one more than the last of its epoch, each hole
/// told first (`gap`, or a `joined` that says it did not recover).
final class SimulatedMember: Sendable {
    struct Room {
        /// The member's position: the epoch and the last id it kept, `nil` before its first join.
        var position: RoomPosition?
        var joined = false
        var joining = false
    }

    private struct State {
        var rooms: [String: Room] = [:]
        var socketID: String?
        var connection: MemberConnection?
        var kept = 0
        var sent = 0
    }

    let name: String
    private let world: SimulatedWorld
    private let state = Locked(State())

    init(name: String, rooms: [String], world: SimulatedWorld) {
        self.name = name
        self.world = world
        state.withLock { state in for room in rooms { state.rooms[room] = Room() } }
    }

    /// Events kept so far, over all rooms.
    var kept: Int { state.withLock { $0.kept } }

    /// Each room's position now.
    var positions: [String: RoomPosition?] { state.withLock { $0.rooms.mapValues(\.position) } }

    var isConnected: Bool { state.withLock { $0.socketID != nil } }

    /// Connects to node `node` (the connection's frames come after the network's delay).
    func connect(to node: Int) {
        let connection = MemberConnection(member: self, world: world)
        state.withLock { state in
            state.connection = connection
            state.socketID = nil
            for name in state.rooms.keys { state.rooms[name]?.joined = false; state.rooms[name]?.joining = false }
        }
        world.open(connection, on: node)
    }

    /// The member's connection drops (its side): the node hears a close, the member reconnects
    /// later, to any node.
    func drop() {
        guard let connection = state.withLock({ state -> MemberConnection? in
            defer { state.connection = nil; state.socketID = nil }
            return state.connection
        }) else { return }
        world.closeFromClient(connection)
        reconnectLater()
    }

    func reconnectLater() {
        world.simulation.after(.milliseconds(world.simulation.random(in: 20...400))) { [self] in
            guard state.withLock({ $0.connection == nil }) else { return }
            connect(to: world.simulation.random(in: 0...(world.nodeCount - 1)))
        }
    }

    /// Sends one event into a random room it is joined to.
    func sendSomething() {
        let target = state.withLock { state -> (MemberConnection, String)? in
            guard let connection = state.connection, state.socketID != nil else { return nil }
            let joined = state.rooms.filter { $0.value.joined }.keys.sorted()
            guard !joined.isEmpty else { return nil }
            state.sent += 1
            return (connection, joined[world.simulation.random(in: 0...(joined.count - 1))])
        }
        guard let (connection, room) = target else { return }
        let number = state.withLock { $0.sent }
        let payload = RoomSendRequest(room: room, event: "said", data: #"{"by":"\#(name)","n":\#(number)}"#)
        guard let text = try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomSend), payload: payload).text else { return }
        world.send(text, over: connection)
    }

    // MARK: - Frames from the node

    /// Ends the member's connection and lets go of its node (the end of a run).
    func tearDown() {
        let connection = state.withLock { state -> MemberConnection? in
            defer { state.connection = nil }
            return state.connection
        }
        _ = connection?.end()
        connection?.hub = nil
    }

    /// Node `index` was killed: a connection to it drops with no close frame.
    func nodeRestarted(_ index: Int) {
        guard let connection = state.withLock({ $0.connection }), connection.node == index, connection.end() else { return }
        closed(connection, code: nil)
    }

    /// The node closed the connection (a close code, or a drop).
    func closed(_ connection: MemberConnection, code: UInt16?) {
        let mine = state.withLock { state -> Bool in
            guard state.connection === connection else { return false }
            state.connection = nil
            state.socketID = nil
            return true
        }
        if mine { reconnectLater() }
    }

    func received(_ text: String, on connection: MemberConnection) {
        guard state.withLock({ $0.connection === connection }) else { return }
        guard let message = try? RealtimeMessage(parsing: text) else { return world.violation("\(name): a frame that does not parse: \(text.prefix(120))") }
        switch message.event {
        case ProtocolNamespace.bird.event(.connectionEstablished):
            let socketID = message.data.flatMap(StrictJSON.parse)?["socket_id"]?.string
            let rooms = state.withLock { state -> [String] in
                state.socketID = socketID
                return state.rooms.keys.sorted()
            }
            for room in rooms { join(room) }
        case ProtocolNamespace.bird.event(.ping):
            world.send(RealtimeMessage(event: ProtocolNamespace.bird.event(.pong), data: "{}").text, over: connection)
        case ProtocolNamespace.bird.event(.roomEvent):
            guard let room = message.channel, let data = message.data.flatMap(StrictJSON.parse) else {
                return world.violation("\(name): a room event without a room or data")
            }
            roomEvent(room, data)
        default:
            break
        }
    }

    private func join(_ room: String) {
        let request = state.withLock { state -> (MemberConnection, RoomPosition?)? in
            guard let connection = state.connection, state.socketID != nil, state.rooms[room]?.joining == false else { return nil }
            state.rooms[room]?.joining = true
            state.rooms[room]?.joined = false
            return (connection, state.rooms[room]?.position ?? nil)
        }
        guard let (connection, since) = request else { return }
        let payload = RoomJoinRequest(room: room, token: world.token(room: room, user: name), since: since)
        guard let text = try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomJoin), payload: payload).text else { return }
        world.send(text, over: connection)
    }

    private func roomEvent(_ room: String, _ data: JSONValue) {
        if let id = data["meta"]?["id"]?.number {
            return kept(room, id: UInt64(id), data: data["data"].flatMap { try? RealtimeMessage.jsonText($0) } ?? "", replayed: data["meta"]?["replayed"]?.bool == true)
        }
        let body = data["data"]
        switch data["event"]?.string {
        case RoomSystemEvent.joined:
            guard let epoch = body?["epoch"]?.string, let id = body?["id"]?.number else { return world.violation("\(name): joined without a position") }
            joined(room, at: RoomPosition(epoch: epoch, id: UInt64(id)), recovered: body?["recovered"]?.bool, reason: body?["reason"]?.string)
        case RoomSystemEvent.gap:
            guard let gap = body.flatMap(RoomGap.init(json:)) else { return world.violation("\(name): a gap that does not parse") }
            told(room, gap)
        case RoomSystemEvent.error:
            let code = body?["code"]?.string ?? "?"
            // `resync` ends the membership; another error ends a join on its way (a refused
            // send leaves a joined member joined).
            let rejoin = state.withLock { state -> Bool in
                guard code == "resync" || state.rooms[room]?.joining == true else { return false }
                state.rooms[room]?.joining = false
                state.rooms[room]?.joined = false
                return true
            }
            if rejoin {
                world.simulation.after(.milliseconds(code == "resync" ? 1 : world.simulation.random(in: 50...300))) { [self] in join(room) }
            }
        default:
            break
        }
    }

    /// An event of the room: one more than the last of its epoch, or a violation.
    private func kept(_ room: String, id: UInt64, data: String, replayed: Bool) {
        let problem = state.withLock { state -> String? in
            guard var record = state.rooms[room] else { return "an event of a room it never joined" }
            guard let position = record.position else { return "event \(id) before any position" }
            guard record.joined || record.joining else { return "event \(id) while not joined" }
            guard id == position.id + 1 else {
                return id <= position.id ? "event \(id) again (had \(position.id))" : "event \(id) after \(position.id): \(id - position.id - 1) missing, not told"
            }
            record.position = RoomPosition(epoch: position.epoch, id: id)
            state.rooms[room] = record
            state.kept += 1
            return nil
        }
        if let problem { world.violation("\(name) in \(room): \(problem)\(replayed ? " (replayed)" : "")") }
        if problem == nil, let position = state.withLock({ $0.rooms[room]?.position }) { world.agree(room: room, at: position, data: data, member: name) }
        world.simulation.note("\(name) \(room) #\(id)")
    }

    private func joined(_ room: String, at position: RoomPosition, recovered: Bool?, reason: String?) {
        let problem = state.withLock { state -> String? in
            guard var record = state.rooms[room] else { return "joined a room it never asked for" }
            defer { state.rooms[room] = record }
            record.joining = false
            record.joined = true
            guard let known = record.position else {
                record.position = position
                return nil
            }
            if known.epoch == position.epoch {
                // The replay brought it to the room's position; or the room is behind it in
                // its epoch (a failover lost writes it saw) and it is told so (`unknown_position`).
                if known.id > position.id, recovered == false, reason == "unknown_position" {
                    record.position = position
                    return nil
                }
                return known.id == position.id ? nil : "joined at \(position.id) with its replay at \(known.id) (recovered: \(recovered.map(String.init) ?? "-"))"
            }
            // Another epoch: told by a gap first, which moved the position there.
            record.position = position
            return "joined epoch \(position.epoch) from \(known.epoch) with no gap told"
        }
        if let problem { world.violation("\(name) in \(room): \(problem)") }
        world.simulation.note("\(name) \(room) joined \(position.epoch) \(position.id)")
    }

    private func told(_ room: String, _ gap: RoomGap) {
        let problem = state.withLock { state -> String? in
            guard var record = state.rooms[room], let position = record.position else { return "a gap with no position" }
            defer { state.rooms[room] = record }
            if gap.epoch == position.epoch {
                guard let missing = gap.missing, missing.lowerBound == position.id + 1 else { return "a gap \(String(describing: gap.missing)) after \(position.id)" }
                record.position = RoomPosition(epoch: gap.epoch, id: missing.upperBound)
                return nil
            }
            guard gap.previous == position else { return "a new epoch's gap from \(String(describing: gap.previous)), the member at \(position)" }
            record.position = RoomPosition(epoch: gap.epoch, id: gap.missing?.upperBound ?? 0)
            return nil
        }
        if let problem { world.violation("\(name) in \(room): \(problem)") }
        world.simulation.note("\(name) \(room) gap \(gap.epoch) \(String(describing: gap.missing))")
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
    }

    let member: SimulatedMember
    private let world: SimulatedWorld
    private let state = Locked(State())

    init(member: SimulatedMember, world: SimulatedWorld) {
        self.member = member
        self.world = world
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

    func send(text: String) {
        guard isOpen else { return }
        let at = arrival(after: Int64(world.simulation.random(in: 20...800)) * 1_000)
        world.simulation.after(.nanoseconds(at - world.simulation.time)) { [self] in
            guard isOpen else { return }
            member.received(text, on: self)
        }
    }

    func close(code: UInt16, reason: String) { world.closeFromServer(self, code: code) }

    func abort() { world.closeFromServer(self, code: nil) }
}
