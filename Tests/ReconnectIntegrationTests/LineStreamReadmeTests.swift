import Foundation
import LineStream
import ReachabilityNetlink
import Reconnect
import SampleSupport
import SystemSupport
import Testing

/// The line-client README's drop-in, as written (but for its closing `dispatchMain()` and the
/// port), against a real `LineServer` on loopback.
@Suite("The LineStream README example")
struct LineStreamReadmeTests {
    @Test("it compiles with the LineStream product, connects and receives a line")
    func dropIn() async throws {
        let server = LineServer()
        try server.start()
        defer { server.stop() }
        let received = Locked([String]())

        // From Samples/line-client/README.md:
        let stream = TCPLineStream(host: "127.0.0.1", port: server.port)
        let reconnector = Reconnector(reachability: { try NetworkReachability(host: $0) })
        reconnector.activate(stream)

        let tokens = [reconnector.onEvent { print("reconnector:", $0) }, stream.onLine { print("received", $0) }]

        reconnector.manualStart(immediately: true)    // connect now; keep trying until ready

        let extra = stream.onLine { line in received.withLock { $0.append(line) } }
        defer { (tokens + [extra]).forEach { $0.cancel() } }
        // `send` is refused until the stream is connected.
        var sent = false
        for _ in 0..<250 where !sent {
            sent = stream.send("hello")
            if !sent { try await Task.sleep(for: .milliseconds(20)) }
        }
        #expect(sent)
        for _ in 0..<250 where received.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(20)) }
        #expect(received.withLock { $0 }.contains { $0.contains("hello") })
        stream.disconnect()
    }
}
