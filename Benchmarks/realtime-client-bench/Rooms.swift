import Dispatch
import Foundation
import SystemSupport
import Realtime
import RealtimeBackend
import RealtimeProtocol
import RealtimeServer
import Synchronization
import WebSocket

/// Part (c), rooms: (1) room events/s handed to a room's `on` handler (main actor, the delivery
/// queue being `.main`) and to a `bind` handler (its own delivery queue), against a raw
/// WebSocket client on the same firehose of `room_event` frames; (2) reconnect → the last
/// replayed event delivered, for 1,000 events published while the client was away, against
/// the reference server in process.
struct RoomsBenchmark {
    var events: Int
    var rounds: Int
    var missed = 1000
    var resumes = 20

    enum Consumer: CaseIterable {
        case raw, on, bind
        var label: String {
            switch self {
            case .raw: "raw client"
            case .on: "Room.on (main actor)"
            case .bind: "Room.bind (delivery queue)"
            }
        }
    }

    private static let app = RealtimeApp(id: "bench", key: "bench-key", secret: "bench-secret")
    private static let room = "bench:1"

    /// Firehose rates by consumer, events/s per run, and the process's CPU µs per event;
    /// `consumers` take turns in each round.
    func throughput(consumers: [Consumer] = Consumer.allCases) throws -> (rates: [Consumer: [Double]], cpu: [Consumer: [Double]]) {
        let peer = try FirehosePeer()
        let full = FirehosePeer.roomFrames(count: events, room: Self.room)
        let warmUp = FirehosePeer.roomFrames(count: min(events, 20_000), room: Self.room)
        var rates: [Consumer: [Double]] = [:]
        var cpu: [Consumer: [Double]] = [:]
        for round in 0...rounds {
            for consumer in consumers {
                let count = round == 0 ? min(events, 20_000) : events
                if round > 0 { progress("rooms throughput round \(round)/\(rounds): \(consumer.label), \(count) events…") }
                let counter = ReceiveCounter(target: count)
                let failure = Locked<(any Error)?>(nil)
                let served = DispatchSemaphore(value: 0)
                let stream = round == 0 ? warmUp : full
                let thread = Thread {
                    do { try peer.serve(stream) } catch { failure.withLock { $0 = error } }
                    served.signal()
                }
                thread.start()
                let close = try start(consumer, port: peer.port, counter: counter)
                let complete = counter.wait(seconds: 120)
                close()
                guard served.wait(timeout: .now() + .seconds(10)) == .success else { throw BenchFailure("rooms firehose: the client did not close") }
                if let error = failure.withLock({ $0 }) { throw error }
                guard complete else { throw BenchFailure("\(consumer.label): \(counter.received) of \(count) room events after 120 s") }
                if round > 0 {
                    rates[consumer, default: []].append(counter.rate)
                    cpu[consumer, default: []].append(counter.cpuPerEvent)
                }
            }
        }
        return (rates, cpu)
    }

    /// Starts a consumer joined to the room; returns how to close it.
    private func start(_ consumer: Consumer, port: Int, counter: ReceiveCounter) throws -> () -> Void {
        var options = BirdRealtime.Options(appKey: Self.app.key, host: "127.0.0.1", port: port)
        options.watchesReachability = false
        options.roomAuthorizer = { rooms in
            RoomAuthorizationResponse(time: 0, rooms: Dictionary(uniqueKeysWithValues: rooms.map { ($0, .init(token: "bench", expires: 3_600_000)) }))
        }
        switch consumer {
        case .raw:
            let raw = try RawRoomConsumer(url: options.endpoint, room: Self.room, counter: counter)
            return raw.close
        case .on, .bind:
            let queue = DispatchQueue(label: "bench.rooms.delivery")
            options.deliveryQueue = consumer == .on ? .main : queue
            let bird = BirdRealtime(options: options)
            let room = bird.join(Self.room)
            if consumer == .on {
                room.on("tick") { _, _ in counter.record() }
            } else {
                room.bind("tick") { _, _ in counter.record() }
            }
            bird.connect()
            let deadline = ContinuousClock.now + .seconds(10)
            while room.state != .joined {
                guard ContinuousClock.now < deadline else { throw BenchFailure("\(consumer.label): not joined (\(bird.connectionState))") }
                usleep(1000)
            }
            return {
                bird.disconnect()
                queue.sync {}
            }
        }
    }

    /// `connect()` → the last of `missed` replayed events delivered to the handler, `resumes`
    /// times: the client is disconnected, `missed` events are published, then it connects.
    func resume() throws -> [Duration] {
        let server = try RealtimeServer(options: RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: [Self.app]))
        defer { server.shutdown(grace: .zero) }
        let backend = RealtimeBackend(appKey: Self.app.key, appSecret: Self.app.secret)
        try backend.room("bench:{id}", history: 1000)
        var options = BirdRealtime.Options(appKey: Self.app.key, host: "127.0.0.1", port: server.port)
        options.watchesReachability = false
        let queue = DispatchQueue(label: "bench.resume.delivery")
        options.deliveryQueue = queue
        options.roomAuthorizer = { rooms in await backend.authorizeRooms(rooms, user: "bench") }
        let bird = BirdRealtime(options: options)
        let room = bird.join(Self.room)
        let last = Atomic<UInt64>(0)
        let arrived = Locked<(target: UInt64, at: ContinuousClock.Instant?, replayed: Int)>((0, nil, 0))
        room.bind("tick") { _, meta in
            last.store(meta.id, ordering: .relaxed)
            arrived.withLock { state in
                if meta.replayed { state.replayed += 1 }
                if meta.id == state.target { state.at = .now }
            }
        }
        bird.connect()
        try waitFor("joined") { room.state == .joined }
        var times: [Duration] = []
        for round in 0...resumes {
            bird.disconnect()
            try waitFor("disconnected") { room.state == .joining }
            var id: UInt64 = 0
            for seq in 0..<missed {
                id = try server.hub.publishRoom(appID: Self.app.id, room: Self.room, event: "tick", data: "{\"seq\":\(seq),\"p\":1.5}").record.id
            }
            arrived.withLock { $0 = (id, nil, 0) }
            let start = ContinuousClock.now
            bird.connect()
            try waitFor("the last replayed event", detail: {
                let state = arrived.withLock { $0 }
                return "round \(round): last id \(last.load(ordering: .relaxed)) of \(state.target), \(state.replayed) replayed, room \(room.state), connection \(bird.connectionState)"
            }) { arrived.withLock { $0.at != nil } }
            let state = arrived.withLock { $0 }
            guard state.replayed == missed else { throw BenchFailure("resume: \(state.replayed) of \(missed) events replayed") }
            if round > 0 { times.append(state.at! - start) }
        }
        bird.disconnect()
        return times
    }

    private func waitFor(_ what: String, detail: () -> String = { "" }, _ condition: () -> Bool) throws {
        let deadline = ContinuousClock.now + .seconds(20)
        while !condition() {
            guard ContinuousClock.now < deadline else { throw BenchFailure("rooms: timed out waiting for \(what) \(detail())") }
            usleep(200)
        }
    }
}

/// A raw WebSocket client of the room protocol: joins, then counts every frame after `joined`.
final class RawRoomConsumer: Sendable {
    private let context: WebSocketContext
    private let connection: WebSocketConnection

    init(url: String, room: String, counter: ReceiveCounter) throws {
        context = try WebSocketContext(options: rawClientContextOptions)
        // 0: waiting for the handshake, 1: for joined, 2: counting.
        let phase = Atomic<Int>(0)
        let handshaken = DispatchSemaphore(value: 0)
        let joined = DispatchSemaphore(value: 0)
        connection = try context.connect(url: url) { event in
            guard case .text(let text) = event else { return }
            switch phase.load(ordering: .acquiring) {
            case 2:
                counter.record()
            case 0 where text.contains("connection_established"):
                phase.store(1, ordering: .releasing)
                handshaken.signal()
            case 1 where text.contains("joined"):
                phase.store(2, ordering: .releasing)
                joined.signal()
            default:
                break
            }
        }
        guard handshaken.wait(timeout: .now() + .seconds(10)) == .success else { throw BenchFailure("raw room client: no handshake") }
        try connection.send(text: try RealtimeMessage(event: ProtocolNamespace.bird.event(.roomJoin), payload: RoomJoinRequest(room: room, token: "bench")).text)
        guard joined.wait(timeout: .now() + .seconds(10)) == .success else { throw BenchFailure("raw room client: not joined") }
    }

    func close() {
        try? connection.close()
        context.shutdown()
    }
}

extension RoomsBenchmark {
    /// The machine's share of a room event: `RoomHotPathProbe` over the firehose's frames.
    func machineCost() -> (perEvent: Duration, delivered: Int) {
        var frames: [String] = []
        frames.reserveCapacity(events)
        for seq in 0..<events {
            let record = RoomEventRecord(id: UInt64(seq + 1), at: 1_764_579_200_000, event: "tick", data: "{\"seq\":\(seq),\"p\":1.5}", from: nil)
            frames.append(RoomFrame.event(record, room: "bench:1", namespace: .bird))
        }
        let (elapsed, delivered) = RoomHotPathProbe.run(room: "bench:1", frames: frames)
        return (elapsed / events, delivered)
    }
}
