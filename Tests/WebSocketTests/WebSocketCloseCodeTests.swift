import Testing
import WebSocket

@Suite("WebSocketCloseCode")
struct WebSocketCloseCodeTests {
    @Test(
        "codes that may be sent in a close frame (RFC 6455 §7.4)",
        arguments: [
            (999, false), (1000, true), (1001, true), (1002, true), (1003, true), (1004, false),
            (1005, false), (1006, false), (1007, true), (1008, true), (1009, true), (1010, true),
            (1011, true), (1012, true), (1013, true), (1014, true), (1015, false), (1016, false),
            (2999, false), (3000, true), (4000, true), (4001, true), (4100, true), (4200, true),
            (4999, true), (5000, false), (0, false), (65535, false),
        ] as [(UInt16, Bool)]
    )
    func sendable(code: UInt16, expected: Bool) {
        #expect(WebSocketCloseCode(code).isSendable == expected)
    }

    @Test("registered codes have their names, others just the number")
    func descriptions() {
        #expect(WebSocketCloseCode.messageTooBig.description == "1009 messageTooBig")
        #expect(WebSocketCloseCode.abnormalClosure.description == "1006 abnormalClosure")
        #expect(WebSocketCloseCode(4001).description == "4001")
        #expect(WebSocketCloseCode(rawValue: 1000) == .normalClosure)
    }
}
