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
}
