import Foundation
import Glibc
import Testing
import WebSocket

/// A client frame as RFC 6455 §5.2 builds it, masked (with a fixed key).
func clientFrame(opcode: UInt8, _ payload: [UInt8]) -> [UInt8] {
    precondition(payload.count < 126)
    let key: [UInt8] = [0x37, 0xfa, 0x21, 0x3d]
    return [0x80 | opcode, 0x80 | UInt8(payload.count)] + key + payload.enumerated().map { $0.element ^ key[$0.offset % 4] }
}

/// What a server answers to close frames RFC 6455 forbids, over a raw socket (issue 31's
/// leftovers of the protocol hardening): each is a protocol error, answered with 1002.
/// (An unmasked client frame is not among them: libwebsockets 4.1.6 unmasks only masked frames,
/// delivers unmasked ones as they are, and exposes no frame's mask to the application.)
@Suite("Peer frames RFC 6455 forbids")
struct PeerFrameRulesTests {
    /// The code of the server's close frame after `frame`, or `nil` when none came.
    func closeCode(after frame: [UInt8]) throws -> UInt16? {
        let fixture = try ServerFixture(echo: false)
        let socket = try RawTCP.connect(port: fixture.server.port)
        defer { close(socket) }
        var reader = try RawFrameReader.upgrade(socket)
        try RawTCP.send(socket, frame)
        while true {
            guard let next = try? reader.next() else { return nil }
            guard next.opcode == 0x8 else { continue }
            guard next.payload.count >= 2 else { return 1005 }
            return UInt16(next.payload[0]) << 8 | UInt16(next.payload[1])
        }
    }

    @Test("a close frame with a code a peer may not send (RFC 6455 §7.4.1: 1005, 1006, 1015, below 1000, 5000 and up) is answered with 1002", .timeLimit(.minutes(1)),
          arguments: [999, 1004, 1005, 1006, 1015, 1016, 2999, 5000, 65535] as [UInt16])
    func forbiddenCloseCode(_ code: UInt16) throws {
        #expect(try closeCode(after: clientFrame(opcode: 0x8, [UInt8(code >> 8), UInt8(code & 0xff)])) == 1002)
    }

    @Test("a close frame whose payload is one byte (RFC 6455 §5.5.1: none, or a 2-byte code first) is answered with 1002", .timeLimit(.minutes(1)))
    func oneBytePayload() throws {
        #expect(try closeCode(after: clientFrame(opcode: 0x8, [0x03])) == 1002)
    }

    @Test("a close frame with a code a peer may send is answered with the same code", .timeLimit(.minutes(1)), arguments: [1000, 1001, 3000, 4999] as [UInt16])
    func allowedCloseCode(_ code: UInt16) throws {
        #expect(try closeCode(after: clientFrame(opcode: 0x8, [UInt8(code >> 8), UInt8(code & 0xff)])) == code)
    }
}
