import Testing
@testable import WebSocket

@Suite("WebSocketContext.Options")
struct WebSocketContextOptionsTests {
    @Test(
        "the timeout is whole seconds for lws, rounded up, at least 1",
        arguments: [(Duration.seconds(20), 20), (.milliseconds(1500), 2), (.milliseconds(1), 1), (.zero, 1)] as [(Duration, UInt32)]
    )
    func timeoutSeconds(timeout: Duration, seconds: UInt32) {
        #expect(WebSocketContext.Options(timeout: timeout).timeoutSeconds == seconds)
    }

    @Test(
        "the read buffer is 4 KiB…1 MiB for lws",
        arguments: [(4 << 10, 4 << 10), (64 << 10, 64 << 10), (0, 4 << 10), (-1, 4 << 10), (8 << 20, 1 << 20)] as [(Int, Int)]
    )
    func readBufferSize(asked: Int, used: Int) {
        #expect(WebSocketContext.Options(readBufferSize: asked).clampedReadBufferSize == used)
    }
}
