import Foundation
@testable import Realtime
import RealtimeProtocol

/// The client's connection state machine as a hostile server drives it: frames, drops,
/// reconnects, time passing and app calls, in any order. The harness plays the owner
/// (`RealtimeConnection`): it keeps the timers, answers every auth request at once and follows
/// each room's deliveries. Invariants, whatever the server sends:
/// - every frame the client sends is a protocol message;
/// - a room's kept events reach the app in increasing id order, each once, and a gap in ids
///   comes after a `not_recovered` error on that room (never a silent hole);
/// - data left as text for the delivery queue is JSON the client can build;
/// - a bounded number of actions per input (no loop between the machine and its owner).
let clientFramesTarget = FuzzTarget(name: "client-frames", summary: "everything a server sends the client: ConnectionStateMachine") { bytes in
    var harness = ClientHarness()
    var reader = FuzzReader(bytes)
    while !reader.isAtEnd { harness.step(&reader) }
}

/// One input's client state machine and the owner's part (`clientFramesTarget`): timers,
/// answers to auth requests, and what each room delivered.
struct ClientHarness {
    typealias Machine = ConnectionStateMachine
    typealias Action = Machine.Action

    static let start = ContinuousClock.now
    static let configuration = Machine.Configuration(
        namespace: .bird, activityTimeout: .seconds(120), pongTimeout: .seconds(30),
        pathChangePongTimeout: .seconds(1), authTimeout: .seconds(10))
    static let rooms = ["r0", "r1", "r2"]
    static let channels = ["presence-a", "private-b", "c", "private-encrypted-d"]
    /// The backend's clock, far from the client's (token expiry is read in its time).
    static let serverTime: Int64 = 1_000_000_000_000
    /// Most actions one input may cause: far more than any real sequence needs.
    static let maxActions = 200_000

    var machine = Machine(configuration: configuration)
    var now = start
    var timers: [Machine.TimerID: ContinuousClock.Instant] = [:]
    var generation: UInt64 = 0
    var socketID = "1.1"
    var actionCount = 0
    /// Per room: the id of the last kept event delivered (or of `joined`'s position).
    var lastKept: [String: UInt64] = [:]
    /// Rooms told `not_recovered` since their last kept event.
    var holeTold: Set<String> = []

    init() {
        for name in Self.channels.prefix(3) { run(machine.subscribe(name, now: now)) }
        for name in Self.rooms.prefix(2) { run(machine.joinRoom(name, now: now).actions) }
        run(machine.prepareConnect().actions)
        run(machine.startAttempt())
    }

    /// One step of the input: a control byte 0x01–0x05 and its operand, or a text frame.
    mutating func step(_ reader: inout FuzzReader) {
        let chunk = reader.chunk()
        guard let first = chunk.first else { return }
        let operand = chunk.dropFirst().first ?? 0
        switch first {
        case 0x01: advance(by: .milliseconds(Int(operand) * Int(operand) * 50))
        case 0x02:
            socketID = "1.\(operand)"
            let data = #"{\"socket_id\":\"\#(socketID)\",\"activity_timeout\":\#(Int(operand) % 130)}"#
            run(machine.textReceived(generation: generation, text: #"{"event":"bird:connection_established","data":"\#(data)"}"#, now: now))
        case 0x03:
            // The socket ends (its close code from the operand), and the Reconnector starts again.
            let codes: [UInt16] = [1000, 1001, 1006, 4000, 4100, 4200, 4201, 4300, 4301]
            run(machine.socketClosed(generation: generation, code: codes[Int(operand) % codes.count], reason: "fuzz"))
            run(machine.prepareConnect().actions)
            run(machine.startAttempt())
        case 0x04: appCall(operand, String(decoding: chunk.dropFirst(2), as: UTF8.self))
        case 0x05:
            // The process was frozen: timers fire late.
            now += .seconds(Int(operand) * 10)
            run(machine.resumedAfterFreeze(now: now))
        default:
            run(machine.textReceived(generation: generation, text: String(decoding: chunk, as: UTF8.self), now: now))
        }
    }

    mutating func appCall(_ operand: UInt8, _ text: String) {
        let room = Self.rooms[Int(operand >> 4) % Self.rooms.count]
        let channel = Self.channels[Int(operand >> 4) % Self.channels.count]
        switch operand % 8 {
        case 0: run(machine.joinRoom(room, now: now).actions)
        case 1: run(machine.leaveRoom(room)); lastKept[room] = nil; holeTold.remove(room)
        case 2: run(machine.subscribe(channel, now: now))
        case 3: run(machine.unsubscribe(channel))
        case 4: run(machine.requestHistory(room, before: operand > 128 ? UInt64(operand) : nil, limit: Int(operand % 120), request: machine.nextRequest(), now: now))
        case 5: run(machine.sendToRoom(room, event: "e", data: text.isEmpty ? "1" : text).1)
        case 6: run(machine.trigger("client-e", data: text, on: channel).actions)
        default: run(machine.signin(now: now))
        }
    }

    mutating func advance(by duration: Duration) {
        now += duration
        for _ in 0..<1_000 {
            guard let (id, _) = timers.filter({ $0.value <= now }).min(by: { $0.value < $1.value }) else { return }
            timers[id] = nil
            run(machine.timerFired(id, now: now))
        }
    }

    mutating func run(_ actions: [Action]) {
        var pending = actions[...]
        while let action = pending.popFirst() {
            actionCount += 1
            require(actionCount <= Self.maxActions, "more than \(Self.maxActions) actions for one input")
            pending.append(contentsOf: perform(action))
        }
    }

    /// Performs one action as the owner would; returns the machine's answer's actions.
    mutating func perform(_ action: Action) -> [Action] {
        switch action {
        case .open(let new):
            generation = new
        case .send(let text, _):
            require((try? RealtimeMessage(parsing: text)) != nil, "the client sent a frame that is not a protocol message: \(text.debugDescription)")
        case .schedule(let id, let at):
            timers[id] = at
        case .cancel(let id):
            timers[id] = nil
        case .authorize(let request, let number):
            let member = request.channelName.hasPrefix("presence-") ? #"{"user_id":"u1","user_info":{"n":1}}"# : nil
            let secret = request.channelName.hasPrefix("private-encrypted-") ? Data(repeating: 7, count: 32).base64EncodedString() : nil
            let answer = ChannelAuthorizationResponse(auth: "app-key:\(String(repeating: "0", count: 64))", channelData: member, sharedSecret: secret)
            return machine.authorizationAnswered(channel: request.channelName, request: number, .success(answer))
        case .authenticate(_, let number):
            return machine.signinAuthenticated(request: number, .success(UserAuthenticationResponse(auth: "app-key:00", userData: #"{"id":"u1"}"#)), now: now)
        case .authorizeRooms(let names, let number):
            var entries: [String: RoomAuthorizationResponse.Entry] = [:]
            for name in names { entries[name] = .init(token: "token-\(name)", expires: Self.serverTime + 3_600_000) }
            return machine.roomsAuthorized(request: number, .success(RoomAuthorizationResponse(time: Self.serverTime, rooms: entries)), now: now)
        case .deliverRoom(let delivery):
            follow(delivery)
        default:
            break
        }
        return []
    }

    mutating func follow(_ delivery: RoomDelivery) {
        if case .text(let text) = delivery.payload {
            require(StrictJSON.parse(text) != nil, "room data handed over as text that does not build: \(text.debugDescription)")
        }
        let room = delivery.room
        if delivery.meta.id > 0 {
            if let last = lastKept[room] {
                require(delivery.meta.id > last, "\(room): event \(delivery.meta.id) delivered after \(last)")
                require(delivery.meta.id == last + 1 || holeTold.contains(room), "\(room): a silent hole from \(last) to \(delivery.meta.id)")
            }
            lastKept[room] = delivery.meta.id
            holeTold.remove(room)
            return
        }
        switch delivery.event {
        case RoomSystemEvent.joined:
            if let id = delivery.data["id"]?.number { lastKept[room] = UInt64(id) }
            holeTold.remove(room)
        case RoomSystemEvent.error where delivery.data["code"]?.string == RoomErrorCode.notRecovered.rawValue:
            holeTold.insert(room)
        default:
            _ = delivery.data
        }
    }
}
