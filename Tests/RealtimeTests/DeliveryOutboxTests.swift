import Dispatch
import SystemSupport
import Testing
@testable import Realtime

/// The delivery outbox's bounds: hops that leave the delivery queue to other work, and the
/// watermarks that pause and resume reading. Deterministic: the delivery queue is suspended
/// or serial, nothing waits on time except the bounded waits for queued blocks.
@Suite("Delivery outbox bounds")
struct DeliveryOutboxTests {
    /// Waits until everything queued on `queue` so far has run.
    static func settle(_ queue: DispatchQueue) async {
        await withCheckedContinuation { continuation in queue.async { continuation.resume() } }
    }

    @Test("a backlog of 5,000 is handed over 1,000 per hop: a block queued meanwhile runs between hops")
    func fairHops() async {
        let queue = DispatchQueue(label: "DeliveryOutboxTests.fair")
        let outbox = DeliveryOutbox(queue: queue)
        let handed = Locked(0)
        let seenByOther = Locked<Int?>(nil)
        queue.suspend()
        outbox.enqueue(contentsOf: (0..<5_000).map { _ in .work { handed.withLock { $0 += 1 } } })
        // Queued after the outbox's first hop: without hops it would run after all 5,000.
        queue.async { seenByOther.withLock { $0 = handed.withLock { $0 } } }
        queue.resume()
        while outbox.backlog > 0 { await Self.settle(queue) }
        #expect(handed.withLock { $0 } == 5_000)
        #expect(seenByOther.withLock { $0 } == DeliveryOutbox.maxItemsPerHop)
    }

    @Test("past the high watermark reading pauses once; back under the low one it resumes once, and order holds")
    func watermarks() async {
        let queue = DispatchQueue(label: "DeliveryOutboxTests.watermarks")
        let transitions = Locked<[(Bool, UInt64)]>([])
        let outbox = DeliveryOutbox(queue: queue) { paused, sequence in transitions.withLock { $0.append((paused, sequence)) } }
        let order = Locked<[Int]>([])
        queue.suspend()
        for index in 0..<(DeliveryOutbox.highWatermark + 500) {
            outbox.enqueue(contentsOf: [.work { order.withLock { $0.append(index) } }])
        }
        #expect(outbox.isReadingPaused)
        #expect(transitions.withLock { $0.map(\.0) } == [true])
        queue.resume()
        while outbox.backlog > 0 { await Self.settle(queue) }
        #expect(!outbox.isReadingPaused)
        #expect(transitions.withLock { $0.map(\.0) } == [true, false])
        #expect(transitions.withLock { $0.map(\.1) } == [1, 2])
        #expect(order.withLock { $0 } == Array(0..<(DeliveryOutbox.highWatermark + 500)))
    }

    @Test("16 MiB of event data pauses reading before the item count does")
    func byteWatermark() async {
        let queue = DispatchQueue(label: "DeliveryOutboxTests.bytes")
        let paused = Locked(false)
        let outbox = DeliveryOutbox(queue: queue) { value, _ in paused.withLock { $0 = value } }
        let channel = RealtimeChannel(name: "big", namespace: .bird, parts: .init(
            outbox: outbox, record: { _ in nil }, onUnsubscribe: { _ in }, onTrigger: { _, _, _ in false }))
        let data = String(repeating: "x", count: 1 << 20)
        queue.suspend()
        for _ in 0..<16 { outbox.enqueue(contentsOf: [.channel(channel, RealtimeEvent(event: "e", channel: "big", data: data))]) }
        #expect(!paused.withLock { $0 }, "16 MiB exactly is still under")
        outbox.enqueue(contentsOf: [.channel(channel, RealtimeEvent(event: "e", channel: "big", data: "y"))])
        #expect(paused.withLock { $0 })
        queue.resume()
        while outbox.backlog > 0 { await Self.settle(queue) }
        #expect(!paused.withLock { $0 })
    }

    @Test("a pause told after the resume that followed it is ignored: the socket is not left paused")
    func lateTransition() {
        final class Recorder: RealtimeSocket {
            let calls = Locked<[Bool]>([])
            func send(text: String) -> Bool { true }
            func close(code: UInt16, reason: String) {}
            func abort() {}
            func setReceiving(_ enabled: Bool) { calls.withLock { $0.append(enabled) } }
        }
        let control = ReadingControl()
        let socket = Recorder()
        control.attach(socket)
        control.setPaused(false, sequence: 2)
        control.setPaused(true, sequence: 1)
        #expect(socket.calls.withLock { $0 } == [true])
        control.setPaused(true, sequence: 3)
        let next = Recorder()
        control.attach(next)
        #expect(next.calls.withLock { $0 } == [false], "a socket opened while paused starts paused")
    }
}
