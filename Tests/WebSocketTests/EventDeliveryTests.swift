import SystemSupport
import Testing
@testable import WebSocket

@Suite("Event delivery")
struct EventDeliveryTests {
    @Test("events before any consumer are kept for the first handler, and nothing follows the terminal one")
    func buffersForHandler() {
        let delivery = EventDelivery()
        delivery.deliver(.open, terminal: false)
        delivery.deliver(.text("a"), terminal: false)
        let seen = Locked<[WebSocketEvent]>([])
        delivery.setHandler { event in seen.withLock { $0.append(event) } }
        delivery.deliver(.closed(code: .normalClosure, reason: ""), terminal: true)
        delivery.deliver(.text("late"), terminal: false)
        #expect(seen.withLock { $0 } == [.open, .text("a"), .closed(code: .normalClosure, reason: "")])
        #expect(delivery.isFinished)
    }

    @Test("the stream gets the kept events and finishes after the terminal one")
    func stream() async {
        let delivery = EventDelivery()
        delivery.deliver(.open, terminal: false)
        let stream = delivery.stream
        delivery.deliver(.binary([1]), terminal: false)
        delivery.deliver(.failed(.cancelled), terminal: true)
        var events: [WebSocketEvent] = []
        for await event in stream { events.append(event) }
        #expect(events == [.open, .binary([1]), .failed(.cancelled)])
    }

    @Test("the handler is released after the terminal event")
    func releasesHandler() {
        final class Probe: Sendable {}
        weak var weakProbe: Probe?
        let delivery = EventDelivery()
        do {
            let probe = Probe()
            weakProbe = probe
            delivery.setHandler { _ in _ = probe }
        }
        #expect(weakProbe != nil)
        delivery.deliver(.closed(code: .abnormalClosure, reason: ""), terminal: true)
        #expect(weakProbe == nil)
    }
}
