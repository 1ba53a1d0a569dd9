import Dispatch
import Foundation
import Glibc
import TestSupport
import Testing
import SystemSupport
import RealtimeProtocol
@testable import RealtimeServer

/// A connection that checks, at every write, that the hub's lock is free: another thread asks
/// the hub something that takes its lock, and waits at most a second for the answer. A write
/// made under the lock would hold that thread until it is released (the writer waits for it),
/// so the answer would not come.
final class LockProbingOutput: ConnectionOutput {
    private let hub = Locked<RealtimeHub?>(nil)
    private let recorded = Locked((frames: [String](), closes: [UInt16](), underLock: [String]()))

    func attach(_ hub: RealtimeHub) { self.hub.withLock { $0 = hub } }

    func send(text: String) { probe(text) { $0.frames.append(text) } }
    func close(code: UInt16, reason: String) { probe("close \(code)") { $0.closes.append(code) } }
    func abort() { probe("abort") { _ in } }

    private func probe(_ what: String, record: (inout (frames: [String], closes: [UInt16], underLock: [String])) -> Void) {
        if let hub = hub.withLock({ $0 }) {
            let answered = DispatchSemaphore(value: 0)
            DispatchQueue.global().async {
                _ = hub.connectionCount
                answered.signal()
            }
            if answered.wait(timeout: .now() + 1) == .timedOut { recorded.withLock { $0.underLock.append(String(what.prefix(80))) } }
        }
        recorded.withLock { record(&$0) }
    }

    var events: [String] { recorded.withLock { $0.frames }.compactMap { try? RealtimeMessage(parsing: $0).event } }
    var closes: [UInt16] { recorded.withLock { $0.closes } }
    var writtenUnderLock: [String] { recorded.withLock { $0.underLock } }
}

@Suite("The hub's writes: decided under its lock, performed after it, in order (issue 31)")
struct HubOutboxTests {
    @Test("no frame is sent and no connection closed while the hub's lock is held: handshake, presence, client events, publishes, rooms, errors, closes", .timeLimit(.minutes(1)))
    func nothingWrittenUnderTheLock() async throws {
        let fixture = HubFixture { $0.maxProtocolErrors = 1 }
        let hub = fixture.hub
        func connect() throws -> (LockProbingOutput, String) {
            let output = LockProbingOutput()
            output.attach(hub)
            return (output, try #require(hub.open(appKey: HubFixture.app.key, namespace: .bird, output: output)))
        }
        let (a, idA) = try connect()
        let (b, idB) = try connect()
        for (id, user) in [(idA, "ana"), (idB, "bo")] {
            let data = #"{"user_id":"\#(user)"}"#
            fixture.subscribe(id, "presence-room", auth: fixture.signer.authorizeSubscription(socketID: id, channel: "presence-room", channelData: data), channelData: data)
        }
        fixture.send(idA, "client-hello", channel: "presence-room", ["n": 1])
        hub.publish(appID: HubFixture.app.id, channels: ["presence-room"], event: "news", data: "{}")
        let token = Tokens.make(room: "order:1", user: "ana", secret: HubFixture.app.secret)
        hub.receive(text: try RealtimeMessage(event: "bird:room_join", payload: RoomJoinRequest(room: "order:1", token: token)).text, from: idA)
        // The join finishes on the hub's lane.
        #expect(await eventually { hub.roomMembers(appID: HubFixture.app.id, room: "order:1").users.count == 1 })
        hub.receive(text: try RealtimeMessage(event: "bird:room_send", payload: RoomSendRequest(room: "order:1", event: "said", data: "{}")).text, from: idA)
        // `joined`, then the event sent.
        #expect(await eventually { a.events.filter { $0 == "bird:room_event" }.count == 2 })
        // Two protocol errors: an error frame, then the close (maxProtocolErrors is 1).
        hub.receive(text: "{\"event\":\"bird:nonsense\"}", from: idB)
        hub.receive(text: "{\"event\":\"bird:nonsense\"}", from: idB)
        #expect(hub.close(appID: HubFixture.app.id, socketID: idA, code: 4201, reason: "test"))

        #expect(b.events.contains("bird_internal:member_added") == false, "bo subscribed after ana: told of nobody")
        #expect(a.events.contains("bird_internal:member_added"))
        #expect(b.events.contains("client-hello") && b.events.contains("news") && a.events.contains("news"))
        #expect(b.events.contains("bird:error") && b.closes == [4300])
        #expect(a.closes == [4201])
        #expect(a.writtenUnderLock.isEmpty && b.writtenUnderLock.isEmpty, "\(a.writtenUnderLock) \(b.writtenUnderLock)")
    }

    @Test("webhook events reach the sink with the hub's lock free, in the order decided: occupied, member added, client event, member removed, vacated", .timeLimit(.minutes(1)))
    func webhooksAfterTheLock() throws {
        let app = RealtimeApp(id: "1", key: "app-key", secret: "app-secret", webhookURL: "http://127.0.0.1:9/hooks")
        let box = Locked<RealtimeHub?>(nil)
        let seen = Locked((names: [String](), underLock: 0))
        var configuration = RealtimeHub.Configuration(apps: [app])
        configuration.webhooks = { _, event in
            let answered = DispatchSemaphore(value: 0)
            let hub = box.withLock { $0 }
            DispatchQueue.global().async {
                _ = hub?.connectionCount
                answered.signal()
            }
            let timedOut = answered.wait(timeout: .now() + 1) == .timedOut
            seen.withLock { $0.names.append(event.name); if timedOut { $0.underLock += 1 } }
        }
        let hub = RealtimeHub(configuration: configuration)
        box.withLock { $0 = hub }
        let output = RecordingOutput()
        let id = try #require(hub.open(appKey: app.key, namespace: .bird, output: output))
        let data = #"{"user_id":"ana"}"#
        let signer = ChannelAuthorization(key: app.key, secret: app.secret)
        let subscribe = SubscribeRequest(channel: "presence-room", auth: signer.authorizeSubscription(socketID: id, channel: "presence-room", channelData: data), channelData: data)
        hub.receive(text: try RealtimeMessage(event: "bird:subscribe", payload: subscribe).text, from: id)
        hub.receive(text: #"{"event":"client-hi","channel":"presence-room","data":"{}"}"#, from: id)
        hub.closed(id)
        #expect(seen.withLock { $0.names } == ["channel_occupied", "member_added", "client_event", "member_removed", "channel_vacated"])
        #expect(seen.withLock { $0.underLock } == 0)
    }

    @Test("a caller that became the drainer performs a bounded share: writes that keep coming go on after it returned, in order", .timeLimit(.minutes(1)))
    func boundedShare() async throws {
        /// Publishes the next link of a chain of 200 from inside each `send`: with no bound,
        /// the first publisher would perform the whole chain before it returned.
        final class ChainOutput: ConnectionOutput {
            let hub = Locked<RealtimeHub?>(nil)
            let seen = Locked<[Int]>([])
            /// The publishing caller's thread, and how many links were sent on it.
            let caller = Locked((thread: pthread_t?.none, links: 0))
            func send(text: String) {
                guard let message = try? RealtimeMessage(parsing: text), message.event == "link",
                      let n = message.data.flatMap(Int.init) else { return }
                seen.withLock { $0.append(n) }
                caller.withLock { if let thread = $0.thread, pthread_equal(thread, pthread_self()) != 0 { $0.links += 1 } }
                if n < 199, let hub = hub.withLock({ $0 }) {
                    hub.publish(appID: HubFixture.app.id, channels: ["chain"], event: "link", data: String(n + 1))
                }
            }
            func close(code: UInt16, reason: String) {}
            func abort() {}
        }
        let fixture = HubFixture()
        let output = ChainOutput()
        output.hub.withLock { $0 = fixture.hub }
        let id = try #require(fixture.hub.open(appKey: HubFixture.app.key, namespace: .bird, output: output))
        fixture.subscribe(id, "chain")
        output.caller.withLock { $0.thread = pthread_self() }
        fixture.hub.publish(appID: HubFixture.app.id, channels: ["chain"], event: "link", data: "0")
        output.caller.withLock { $0.thread = nil }
        #expect(await eventually { output.seen.withLock { $0.count } == 200 })
        let onCaller = output.caller.withLock { $0.links }
        #expect(onCaller >= 1 && onCaller <= RealtimeHub.maxDrainRounds, "the caller performed \(onCaller) of the 200 links")
        #expect(output.seen.withLock { $0 } == Array(0..<200))
    }

    @Test("publishes from four threads at once reach every subscriber complete, each thread's in its order, and in one order for all", .timeLimit(.minutes(1)))
    func orderAcrossThreads() throws {
        let fixture = HubFixture()
        let hub = fixture.hub
        let subscribers = (0..<3).map { _ in fixture.connect() }
        for (_, id) in subscribers { fixture.subscribe(id, "orders") }
        let threads = 4, each = 500
        DispatchQueue.concurrentPerform(iterations: threads) { thread in
            for index in 0..<each {
                hub.publish(appID: HubFixture.app.id, channels: ["orders"], event: "placed", data: #"{"t":\#(thread),"i":\#(index)}"#)
            }
        }
        var orders: [[String]] = []
        for (output, _) in subscribers {
            let seen = output.events("placed").compactMap(\.data)
            #expect(seen.count == threads * each)
            for thread in 0..<threads {
                let mine = seen.filter { $0.hasPrefix(#"{"t":\#(thread),"#) }
                #expect(mine == (0..<each).map { #"{"t":\#(thread),"i":\#($0)}"# })
            }
            orders.append(seen)
        }
        #expect(Set(orders).count == 1, "every subscriber sees the one order the hub decided")
    }
}
