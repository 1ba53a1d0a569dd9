import Dispatch
import Foundation
import SystemSupport
import Testing
@testable import Realtime
@testable import RealtimeProtocol

/// `MainQueue.isCurrent`: the main queue whichever thread serves it. After `dispatchMain()`
/// (every CLI and sample here) a worker thread serves it and `Thread.isMainThread` is false
/// there; a room's main-actor handler that checked the thread was queued to main a second
/// time, behind the deliveries after it.
@Suite("The main queue, whichever thread serves it")
struct MainQueueTests {
    @Test("true in a block on the main queue, false on another queue")
    func current() async {
        let onMain = await withCheckedContinuation { continuation in
            DispatchQueue.main.async { continuation.resume(returning: MainQueue.isCurrent) }
        }
        #expect(onMain)
        #expect(DispatchQueue(label: "MainQueueTests").sync { MainQueue.isCurrent } == false)
    }

    @Test("with .main as the delivery queue a room's on handler runs in order with what the outbox delivers after it")
    func roomHandlerInOrder() async {
        let outbox = DeliveryOutbox(queue: .main)
        let parts = Room.Parts(
            outbox: outbox, record: { _ in nil }, members: { _ in [:] }, leave: { _ in }, send: { _, _, _ in nil },
            history: { _, _, _ in .failure(RoomError(.left, "")) }, report: { _ in }, isCurrent: { _ in true }, stalled: { nil })
        let room = Room(name: "order:1", parts: parts)
        let order = Locked<[String]>([])
        room.on("tick") { data, _ in order.withLock { $0.append("tick \(Int(data["n"]?.number ?? -1))") } }
        var items: [DeliveryOutbox.Item] = []
        for n in 1...3 {
            let meta = RoomEventMeta(id: UInt64(n), at: 0, from: nil, replayed: false)
            items.append(.room(room, RoomDelivery(room: "order:1", event: "tick", data: .object(["n": .number(Double(n))]), meta: meta)))
            items.append(.work { order.withLock { $0.append("work \(n)") } })
        }
        outbox.enqueue(contentsOf: items)
        // Two hops of the main queue: anything a handler queued again would run by then.
        for _ in 0..<2 { await withCheckedContinuation { continuation in DispatchQueue.main.async { continuation.resume() } } }
        #expect(order.withLock { $0 } == ["tick 1", "work 1", "tick 2", "work 2", "tick 3", "work 3"])
    }
}
