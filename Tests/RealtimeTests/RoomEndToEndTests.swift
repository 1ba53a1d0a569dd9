import Dispatch
import Foundation
import SystemSupport
@testable import Realtime
import RealtimeBackend
import RealtimeServer
import Reconnect
import Testing

/// A `BirdRealtime` client in rooms on the real reference server over real sockets, its tokens
/// from a real `RealtimeBackend` (the auth route's logic) through `roomAuthorizer`.
final class RoomTestBed: Sendable {
    static let app = RealtimeApp(id: "rooms", key: "rooms-key", secret: "rooms-secret")
    static let masterKey = [UInt8](repeating: 7, count: 32)

    let store = InMemoryRoomStore()
    let server: Locked<RealtimeServer>
    let port: Int
    let backend: RealtimeBackend
    let queue = DispatchQueue(label: "RoomTestBed.delivery")
    /// Every auth request the client made: the rooms it named.
    let authRequests = Locked<[[String]]>([])
    let errors = Locked<[RealtimeError]>([])
    let bird: BirdRealtime

    init(user: String = "ann", configure: (inout BirdRealtime.Options) -> Void = { _ in }) throws {
        let store = store
        let first = try RealtimeServer(options: RealtimeServerOptions(port: 0, apps: [Self.app])) { $0.roomStore = store }
        port = first.port
        server = Locked(first)
        backend = RealtimeBackend(appKey: Self.app.key, appSecret: Self.app.secret, encryptionMasterKey: Self.masterKey)
        try backend.room("order:{id}", history: 1000)
        try backend.room("chat:{id}", history: 100, presence: true, membersSend: true)
        try backend.room("quiet:{id}", history: 0)
        try backend.room("sealed:{id}", history: 100, sealed: true)
        try backend.room("secret:{id}", history: 10) { _, _ in false }
        try backend.room("news:{topic}", history: 10, isPublic: true)
        var options = BirdRealtime.Options(appKey: Self.app.key, host: "127.0.0.1", port: first.port)
        options.deliveryQueue = queue
        options.watchesReachability = false
        options.backoff = ExponentialBackoff(base: .milliseconds(20), cap: .milliseconds(100))
        let backend = backend
        let authRequests = authRequests
        options.roomAuthorizer = { names in
            authRequests.withLock { $0.append(names) }
            return await backend.authorizeRooms(names, user: user, info: .object(["name": .string(user)]))
        }
        configure(&options)
        bird = BirdRealtime(options: options)
        let errors = errors
        bird.onError { error in errors.withLock { $0.append(error) } }
    }

    deinit {
        bird.disconnect()
        server.withLock { $0.shutdown(grace: .zero) }
    }

    var hub: RealtimeHub { server.withLock { $0.hub } }

    /// Publishes from the app's server; returns the kept id.
    @discardableResult
    func publish(_ room: String, _ data: String, event: String = "updated") throws -> UInt64 {
        try hub.publishRoom(appID: Self.app.id, room: room, event: event, data: data).record.id
    }

    /// Drops the client's socket without a close frame (a network drop seen by the server).
    func drop() -> Bool {
        guard let socketID = bird.connection.connectionId else { return false }
        return hub.drop(appID: Self.app.id, socketID: socketID)
    }

    /// Stops the server and starts another on the same port with the same history store (a
    /// restart of a node whose store outlives it, as Redis does), or with an empty one
    /// (`losingHistory`: a single node kept in memory, every room's epoch changes).
    func restart(losingHistory: Bool = false) throws {
        server.withLock { $0.shutdown(grace: .zero) }
        let store = losingHistory ? InMemoryRoomStore() : store
        var lastError: (any Error)?
        for _ in 0..<50 {
            do {
                let next = try RealtimeServer(options: RealtimeServerOptions(port: UInt16(port), apps: [Self.app])) { $0.roomStore = store }
                server.withLock { $0 = next }
                return
            } catch {
                lastError = error
                Thread.sleep(forTimeInterval: 0.1)
            }
        }
        throw lastError!
    }

    /// Waits until every handler queued so far has run.
    func drain() { queue.sync {} }
}

/// What a room handler saw.
struct Seen: Sendable, Equatable {
    var event: String
    var n: Int?
    var id: UInt64
    var replayed: Bool
    var from: String?
}

@Suite("Rooms in the client, end to end", .serialized)
struct RoomEndToEndTests {
    /// Everything a room's handlers saw, with whole metas.
    typealias Recorded = Locked<[(event: String, data: JSONValue, meta: RoomEventMeta)]>

    /// Joins `name` on `bed`'s client, recording every event, and waits until it is joined.
    static func joinedRecording(_ name: String, bed: RoomTestBed) async throws -> (Room, Recorded) {
        let room = bed.bird.join(name)
        let seen = Recorded([])
        room.bindAll { event, data, meta in seen.withLock { $0.append((event, data, meta)) } }
        bed.bird.connect()
        try await room.ready()
        return (room, seen)
    }

    /// The `updated` events recorded: their `n` and meta.
    static func updated(_ seen: Recorded) -> [(n: Int?, meta: RoomEventMeta)] {
        seen.withLock { $0.filter { $0.event == "updated" }.map { ($0.data["n"]?.number.map { Int($0) }, $0.meta) } }
    }

    static func record(_ room: Room, into seen: Locked<[Seen]>) {
        room.bindAll { event, data, meta in
            seen.withLock { $0.append(Seen(event: event, n: data["n"]?.number.map { Int($0) }, id: meta.id, replayed: meta.replayed, from: meta.from)) }
        }
    }

    @Test("join, handlers, ready: events arrive with meta; the same room for the same name; history pages oldest first; no_history thrown")
    func joinAndHistory() async throws {
        let bed = try RoomTestBed()
        let order = bed.bird.join("order:1042")
        #expect(bed.bird.join("order:1042") === order)
        #expect(bed.bird.room("order:1042") === order && bed.bird.room("order:1") == nil)
        let seen = Locked<[Seen]>([])
        RoomEndToEndTests.record(order, into: seen)
        #expect(order.state == .joining)
        bed.bird.connect()
        try await order.ready()
        #expect(order.state == .joined)
        for n in 1...120 { try bed.publish("order:1042", #"{"n":\#(n),"status":"paid"}"#) }
        #expect(await eventually("the rooms to catch up") { seen.withLock { $0.filter { $0.event == "updated" }.count } == 120 })
        let events = seen.withLock { $0.filter { $0.event == "updated" } }
        #expect(events.map(\.id) == Array(1...120) && events.allSatisfy { $0.from == nil && !$0.replayed })
        #expect(seen.withLock { $0.first?.event } == "joined")

        let page = try await order.history(limit: 50)
        #expect(page.events.map(\.meta.id) == Array(71...120) && page.more)
        let older = try await order.history(before: page.events.first?.meta.id, limit: 50)
        #expect(older.events.map(\.meta.id) == Array(21...70) && older.events.first?.data["status"]?.string == "paid")
        let oldest = try await order.history(before: older.events.first?.meta.id, limit: 50)
        #expect(oldest.events.map(\.meta.id) == Array(1...20) && !oldest.more)

        let quiet = bed.bird.join("quiet:1")
        await #expect(throws: RoomError.self) { _ = try await quiet.history(limit: 10) }
        do {
            _ = try await quiet.history(limit: 10)
        } catch {
            #expect(error.code == .noHistory)
        }
        await #expect(throws: RoomError.self) { _ = try await order.history(limit: 101) }
    }

    @Test("ready() throws disconnected when the connection fails (a wrong app key: 4001) or disconnect() is called, instead of waiting forever; connect() then joins", .timeLimit(.minutes(1)))
    func readyThrowsWhenTheConnectionWillNotComeBack() async throws {
        let bed = try RoomTestBed { $0.appKey = "not-the-app-key" }
        let order = bed.bird.join("order:1042")
        bed.bird.connect()
        do {
            try await order.ready()
            Issue.record("ready() returned on a connection refused with 4001")
        } catch {
            // Settled by the failure (its close code told), or asked after it: answered at once.
            #expect(error.code == .disconnected && error.message.contains("the connection failed"), "\(error)")
        }
        #expect(bed.bird.connectionState == .failed && order.state == .joining)
        // Asked after the failure (the settlement already ran): answered at once, not left waiting.
        await #expect(throws: RoomError.self) { try await order.ready() }

        let good = try RoomTestBed()
        let chat = good.bird.join("chat:1")
        good.bird.disconnect()
        await #expect(throws: RoomError.self) { try await chat.ready() }
        await #expect(throws: RoomError.self) { try await chat.ready() }
        good.bird.connect()
        try await chat.ready()
        #expect(chat.state == .joined)
    }

    @Test("the rooms seed's statements on a real server: onAny hears the room's own events and kept ones, off stops a handler, count is the room's users, leave() forgets the room and ready() then throws left", .timeLimit(.minutes(1)))
    func seedRoomStatements() async throws {
        let bed = try RoomTestBed()
        let order = bed.bird.join("order:5")
        let any = Locked<[String]>([])
        let named = Locked<[Int]>([])
        order.onAny { event, _, _ in any.withLock { $0.append(event) } }
        let listener = order.on("updated") { data, _ in named.withLock { $0.append(Int(data["n"]?.number ?? -1)) } }
        bed.bird.connect()
        try await order.ready()
        try bed.publish("order:5", #"{"n":1}"#)
        #expect(await eventually("n=1 through on and onAny") { named.withLock { $0 } == [1] && any.withLock { $0.contains("updated") } })
        #expect(any.withLock { $0.first } == "joined", "the room's own joined reaches onAny first")
        #expect(order.count == 1, "one user in the room: \(String(describing: order.count))")
        order.off(listener)
        try bed.publish("order:5", #"{"n":2}"#)
        #expect(await eventually("n=2 through onAny") { any.withLock { $0.filter { $0 == "updated" }.count } == 2 })
        #expect(named.withLock { $0 } == [1], "off(listener) stopped the handler")
        order.leave()
        #expect(bed.bird.room("order:5") == nil && order.state == .left)
        await #expect(throws: RoomError.self) { try await order.ready() }
        #expect(await eventually("the server saw the leave") { bed.hub.roomMembers(appID: RoomTestBed.app.id, room: "order:5").connections == 0 })
    }

    @Test("five drop/reconnect cycles in a row, each missing events: every id once, in order, the missed ones replayed")
    func fiveDrops() async throws {
        let bed = try RoomTestBed()
        let room = bed.bird.join("order:5")
        let seen = Locked<[Seen]>([])
        RoomEndToEndTests.record(room, into: seen)
        bed.bird.connect()
        try await room.ready()
        var published = 0
        var replayedPerCycle: [Int] = []
        for _ in 0..<5 {
            let before = seen.withLock { $0.filter(\.replayed).count }
            #expect(bed.drop())
            // Published while the client is away: it has not rejoined yet (it needs a new socket).
            for _ in 0..<20 {
                published += 1
                try bed.publish("order:5", #"{"n":\#(published)}"#)
            }
            let away = published
            #expect(await eventually("the rooms to catch up") { room.state == .joined && seen.withLock { $0.filter { $0.event == "updated" }.count } == away })
            for _ in 0..<5 {
                published += 1
                try bed.publish("order:5", #"{"n":\#(published)}"#)
            }
            let total = published
            #expect(await eventually("the rooms to catch up") { seen.withLock { $0.filter { $0.event == "updated" }.count } == total })
            replayedPerCycle.append(seen.withLock { $0.filter(\.replayed).count } - before)
        }
        let ids = seen.withLock { $0.filter { $0.event == "updated" }.map(\.id) }
        #expect(ids == (1...UInt64(published)).map { $0 })
        #expect(replayedPerCycle.allSatisfy { $0 > 0 }, "every cycle missed events and got them replayed: \(replayedPerCycle)")
        #expect(bed.authRequests.withLock { $0.count } == 1, "the token is reused by every reconnect")
    }

    @Test("a slow handler during a drop delivers each event once")
    func slowHandler() async throws {
        let bed = try RoomTestBed()
        let room = bed.bird.join("order:slow")
        let ids = Locked<[UInt64]>([])
        room.bind("updated") { _, meta in
            Thread.sleep(forTimeInterval: 0.005)
            ids.withLock { $0.append(meta.id) }
        }
        bed.bird.connect()
        try await room.ready()
        for n in 1...40 { try bed.publish("order:slow", #"{"n":\#(n)}"#) }
        #expect(bed.drop())
        for n in 41...80 { try bed.publish("order:slow", #"{"n":\#(n)}"#) }
        #expect(await eventually("the rooms to catch up") { ids.withLock { $0.count } >= 80 })
        try await Task.sleep(for: .milliseconds(100))
        #expect(ids.withLock { $0 } == Array(1...80))
    }

    @Test("join and on called again, then three reconnects: one delivery per handler")
    func handlersNotDoubled() async throws {
        let bed = try RoomTestBed()
        let first = bed.bird.join("order:h")
        let a = Locked(0), b = Locked(0)
        first.bind("updated") { _, _ in a.withLock { $0 += 1 } }
        bed.bird.connect()
        try await first.ready()
        let again = bed.bird.join("order:h")
        again.bind("updated") { _, _ in b.withLock { $0 += 1 } }
        for _ in 1...3 {
            let old = bed.bird.connection.connectionId
            #expect(bed.drop())
            #expect(await eventually("the rooms to catch up") {
                let id = bed.bird.connection.connectionId
                return id != nil && id != old && again.state == .joined
            })
        }
        try bed.publish("order:h", #"{"n":1}"#)
        #expect(await eventually("the rooms to catch up") { a.withLock { $0 } == 1 && b.withLock { $0 } == 1 })
        try await Task.sleep(for: .milliseconds(100))
        #expect(a.withLock { $0 } == 1 && b.withLock { $0 } == 1)
    }

    @Test("40 rooms joined in one moment: one auth request; a forbidden room fails alone; a reconnect with valid tokens asks nothing")
    func batchedAuth() async throws {
        let bed = try RoomTestBed()
        bed.bird.connect()
        #expect(await eventually("the rooms to catch up") { bed.bird.connectionState == .connected })
        let rooms = (0..<40).map { bed.bird.join("order:b\($0)") }
        let secret = bed.bird.join("secret:1")
        for room in rooms { try await room.ready() }
        await #expect(throws: RoomError.self) { try await secret.ready() }
        #expect(secret.state == .failed && secret.error?.code == .forbidden)
        #expect(bed.authRequests.withLock { $0 }.map(\.count) == [41], "one request names every room")

        let old = bed.bird.connection.connectionId
        #expect(bed.drop())
        #expect(await eventually("the rooms to catch up") { bed.bird.connection.connectionId.map { $0 != old } == true && rooms.allSatisfy { $0.state == .joined } })
        for room in rooms { try await room.ready() }
        #expect(bed.authRequests.withLock { $0.count } == 1, "the reconnect used the kept tokens")
        #expect(secret.state == .failed, "a refused room is not rejoined")
    }

    @Test("a server restart with its store kept: the client rejoins and replays what was published meanwhile")
    func serverRestart() async throws {
        let bed = try RoomTestBed()
        let room = bed.bird.join("order:r")
        let seen = Locked<[Seen]>([])
        RoomEndToEndTests.record(room, into: seen)
        bed.bird.connect()
        try await room.ready()
        for n in 1...10 { try bed.publish("order:r", #"{"n":\#(n)}"#) }
        #expect(await eventually("the rooms to catch up") { seen.withLock { $0.filter { $0.event == "updated" }.count } == 10 })
        try bed.restart()
        // The new node has no members yet: these are kept and replayed on the rejoin.
        for n in 11...20 { try bed.publish("order:r", #"{"n":\#(n)}"#) }
        #expect(await eventually("the rooms to catch up") { seen.withLock { $0.filter { $0.event == "updated" }.count } == 20 })
        let updated = seen.withLock { $0.filter { $0.event == "updated" } }
        #expect(updated.map(\.id) == Array(1...20))
        #expect(updated.suffix(10).allSatisfy { $0.replayed })
    }

    @Test("a position older than the kept history: the gap told first with its exact ids, then the kept events replayed in order, then live; meta carries the epoch", .timeLimit(.minutes(1)))
    func gapBeforeReplay() async throws {
        let bed = try RoomTestBed()
        try bed.backend.room("short:{id}", history: 5)
        let rule = RoomRule(history: 5)
        let (room, seen) = try await RoomEndToEndTests.joinedRecording("short:1", bed: bed)
        @Sendable func updated() -> [(n: Int?, meta: RoomEventMeta)] { RoomEndToEndTests.updated(seen) }
        for n in 1...2 { try bed.hub.publishRoom(appID: RoomTestBed.app.id, room: "short:1", event: "updated", data: #"{"n":\#(n)}"#, rule: rule) }
        #expect(await eventually("2 events") { updated().count == 2 })
        let epoch = try #require(room.position?.epoch)
        bed.bird.disconnect()
        // 10 published while away; the room keeps 5: ids 3…7 are gone, 8…12 kept.
        for n in 3...12 { try bed.hub.publishRoom(appID: RoomTestBed.app.id, room: "short:1", event: "updated", data: #"{"n":\#(n)}"#, rule: rule) }
        bed.bird.connect()
        #expect(await eventually("7 events") { updated().count == 7 })
        try bed.hub.publishRoom(appID: RoomTestBed.app.id, room: "short:1", event: "updated", data: #"{"n":13}"#, rule: rule)
        #expect(await eventually("8 events") { updated().count == 8 })
        bed.drain()
        let events = updated()
        #expect(events.map(\.n) == [1, 2, 8, 9, 10, 11, 12, 13])
        #expect(events.map(\.meta.id) == [1, 2, 8, 9, 10, 11, 12, 13])
        #expect(events.map(\.meta.replayed) == [false, false, true, true, true, true, true, false])
        #expect(events.allSatisfy { $0.meta.epoch == epoch })
        // The gap, told once, before the first replayed event.
        let order = seen.withLock { $0.filter { $0.event != "joined" }.map { $0.event == "error" ? "gap" : "#\($0.meta.id)" } }
        #expect(order == ["#1", "#2", "gap", "#8", "#9", "#10", "#11", "#12", "#13"], "\(order)")
        let told = seen.withLock { $0.first { $0.event == "error" }?.data }
        #expect(told?["code"]?.string == "not_recovered" && told?["reason"]?.string == "expired")
        #expect(told?["gap"]?["first"]?.number == 3 && told?["gap"]?["last"]?.number == 7 && told?["gap"]?["epoch"]?.string == epoch)
        #expect(room.error?.gap?.missing == 3...7)
        #expect(room.error?.gap?.before == events[2].meta.at, "every missing event was kept before the first replayed one")
    }

    @Test("an epoch change (a single node restarted without its history): the gap told with the lost epoch, then every event the new epoch keeps, replayed, then live", .timeLimit(.minutes(1)))
    func epochChangeReplaysTheNewEpoch() async throws {
        let bed = try RoomTestBed()
        let rule = RoomRule(history: 1000)
        let (room, seen) = try await RoomEndToEndTests.joinedRecording("order:e", bed: bed)
        @Sendable func updated() -> [(n: Int?, meta: RoomEventMeta)] { RoomEndToEndTests.updated(seen) }
        for n in 1...3 { try bed.publish("order:e", #"{"n":\#(n)}"#) }
        #expect(await eventually("3 events") { updated().count == 3 })
        let old = try #require(room.position)
        bed.bird.disconnect()
        try bed.restart(losingHistory: true)
        // Published on the restarted node before the member is back: ids 1…4 of a new epoch.
        for n in 4...7 { try bed.hub.publishRoom(appID: RoomTestBed.app.id, room: "order:e", event: "updated", data: #"{"n":\#(n)}"#, rule: rule) }
        bed.bird.connect()
        #expect(await eventually("7 events") { updated().count == 7 })
        try bed.hub.publishRoom(appID: RoomTestBed.app.id, room: "order:e", event: "updated", data: #"{"n":8}"#, rule: rule)
        #expect(await eventually("8 events") { updated().count == 8 })
        bed.drain()
        let events = updated()
        let newEpoch = try #require(room.position?.epoch)
        #expect(newEpoch != old.epoch)
        #expect(events.map(\.n) == Array(1...8))
        #expect(events.map(\.meta.id) == [1, 2, 3, 1, 2, 3, 4, 5], "ids start again in the new epoch")
        #expect(events.map(\.meta.epoch) == Array(repeating: old.epoch, count: 3) + Array(repeating: newEpoch, count: 5))
        #expect(events.map(\.meta.replayed) == [false, false, false, true, true, true, true, false])
        let told = seen.withLock { $0.first { $0.event == "error" }?.data }
        #expect(told?["reason"]?.string == "epoch_changed")
        #expect(room.error?.gap == RoomGap(reason: "epoch_changed", epoch: newEpoch, missing: nil, before: events[3].meta.at, previous: old))
        #expect(seen.withLock { $0.filter { $0.event == "error" }.count } == 1, "told once")
    }

    @Test("members send into a room whose rule allows it, with meta.from; presence members listed; sealed rooms are opened before any handler")
    func sendPresenceSealed() async throws {
        let bed = try RoomTestBed()
        let chat = bed.bird.join("chat:1")
        let seen = Locked<[Seen]>([])
        RoomEndToEndTests.record(chat, into: seen)
        bed.bird.connect()
        try await chat.ready()
        #expect(chat.members.map(\.id) == ["ann"])
        #expect(chat.members.first?.info?["name"]?.string == "ann")
        try chat.send("message", data: .object(["n": .number(1), "file": .binary([0, 1, 255])]))
        #expect(await eventually("the rooms to catch up") { seen.withLock { $0.contains { $0.event == "message" } } })
        #expect(seen.withLock { $0.first { $0.event == "message" }?.from } == "ann")
        #expect(throws: RoomError.self) { try chat.send("joined", data: .null) }

        let sealed = bed.bird.join("sealed:1")
        let opened = Locked<[JSONValue]>([])
        sealed.bind("updated") { data, _ in opened.withLock { $0.append(data) } }
        try await sealed.ready()
        let key = try #require(bed.backend.roomKey("sealed:1"))
        let box = try SecretBox.seal(Array(#"{"status":"paid","blob":{"$binary":"AAH/"}}"#.utf8), key: key)
        try bed.publish("sealed:1", try RealtimeMessage.jsonText(box))
        #expect(await eventually("the rooms to catch up") { opened.withLock { $0.count } == 1 })
        #expect(opened.withLock { $0.first?["status"]?.string } == "paid")
        #expect(opened.withLock { $0.first?["blob"]?.data } == [0, 1, 255])
        // A value sealed under another key is reported on the room, never delivered.
        let wrong = try SecretBox.seal(Array(#"{"status":"x"}"#.utf8), key: [UInt8](repeating: 1, count: 32))
        let errors = Locked<[String]>([])
        sealed.bind("error") { data, _ in errors.withLock { $0.append(data["code"]?.string ?? "") } }
        try bed.publish("sealed:1", try RealtimeMessage.jsonText(wrong))
        #expect(await eventually("the rooms to catch up") { errors.withLock { $0 } == ["bad_data"] })
        #expect(opened.withLock { $0.count } == 1)
    }

    struct OrderUpdate: Decodable, Sendable { let status: String }

    @Test("events(_:as:) decodes each, skips and reports one that does not decode, and ends with its task")
    func asyncSequences() async throws {
        let bed = try RoomTestBed()
        let order = bed.bird.join("order:seq")
        bed.bird.connect()
        try await order.ready()
        let task = Task { () -> [String] in
            var statuses: [String] = []
            for await (update, _) in order.events("updated", as: OrderUpdate.self) {
                statuses.append(update.status)
                if statuses.count == 2 { break }
            }
            return statuses
        }
        let raw = Task { () -> [UInt64] in
            var ids: [UInt64] = []
            for await (_, meta) in order.events("updated") {
                ids.append(meta.id)
                if ids.count == 3 { break }
            }
            return ids
        }
        try await Task.sleep(for: .milliseconds(50))
        try bed.publish("order:seq", #"{"status":"paid"}"#)
        try bed.publish("order:seq", #"{"nope":1}"#)
        try bed.publish("order:seq", #"{"status":"shipped"}"#)
        #expect(await task.value == ["paid", "shipped"])
        #expect(await raw.value == [1, 2, 3])
        #expect(await eventually("the rooms to catch up") { bed.errors.withLock { $0.contains { $0.kind == .room && $0.message.contains("does not decode") } } })
        let cancelled = Task { for await _ in order.events("updated") {} }
        try await Task.sleep(for: .milliseconds(20))
        #expect(order.listenerCount == 1)
        cancelled.cancel()
        #expect(await eventually("the rooms to catch up") { order.listenerCount == 0 }, "the sequence's handler ends with its task")
    }

    @Test("leave: room_leave sent, no rejoin after a reconnect, waiters end with left; a public room joins with its grant and no request")
    func leaveAndGrants() async throws {
        let backend = RealtimeBackend(appKey: RoomTestBed.app.key, appSecret: RoomTestBed.app.secret)
        try backend.room("news:{topic}", history: 10, isPublic: true)
        // The rooms seed's names: grants in RealtimeOptions.
        let bed = try RoomTestBed { (options: inout RealtimeOptions) in options.grants = backend.config() }
        let news = bed.bird.join("news:sport")
        bed.bird.connect()
        try await news.ready()
        #expect(bed.authRequests.withLock { $0.isEmpty }, "joined with the grant")
        bed.bird.leave("news:sport")
        #expect(news.state == .left && bed.bird.room("news:sport") == nil)
        #expect(await eventually("the rooms to catch up") { bed.hub.roomMembers(appID: RoomTestBed.app.id, room: "news:sport").connections == 0 })
        await #expect(throws: RoomError.self) { try await news.ready() }
    }

    @Test("a client released while a room is still joining answers its ready() waiters")
    func releasedClient() async throws {
        var options = BirdRealtime.Options(appKey: "k", host: "127.0.0.1", port: 9)
        options.watchesReachability = false
        options.deliveryQueue = DispatchQueue(label: "released.delivery")
        options.roomAuthorizer = { _ in throw AuthorizationError.httpStatus(503, body: "") }
        var bird: BirdRealtime? = BirdRealtime(options: options)
        let room = try #require(bird?.join("order:1"))
        let waiter = Task { () -> RoomErrorCode? in
            do {
                try await room.ready()
                return nil
            } catch let error as RoomError {
                return error.code
            } catch {
                return RoomErrorCode(rawValue: "\(error)")
            }
        }
        try await Task.sleep(for: .milliseconds(50))
        bird = nil
        #expect(await waiter.value == .disconnected)
        #expect(room.state == .left)
    }
}
