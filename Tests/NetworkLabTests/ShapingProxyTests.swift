import Foundation
import Glibc
import NetworkLab
import Testing

/// The shaping proxy forwards every byte both ways, counts them, and passes a close on.
/// Its pacing is a rate measured by the benchmark that uses it, not asserted here (no timed
/// tests).
@Suite("ShapingProxy", .timeLimit(.minutes(1)))
struct ShapingProxyTests {
    @Test("200 KB each way arrive intact through the proxy and are counted; the target's close reaches the client")
    func forwards() throws {
        let server = try EchoServer()
        let proxy = try ShapingProxy(targetPort: server.port, bytesPerSecond: 50_000_000)
        defer { proxy.stop() }
        let client = try connectLoopback(proxy.port)
        defer { close(client) }
        var generator = SystemRandomNumberGenerator()
        let sent = (0..<200_000).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let writer = Thread {
            var offset = 0
            while offset < sent.count {
                let written = sent.withUnsafeBytes { write(client, $0.baseAddress! + offset, min(8192, sent.count - offset)) }
                guard written > 0 else { return }
                offset += written
            }
            shutdown(client, Int32(SHUT_WR))
        }
        writer.start()
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 8192)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(client, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            received += buffer.prefix(count)
        }
        #expect(received.count == sent.count)
        #expect(received == sent)
        #expect(proxy.bytesUp == sent.count)
        #expect(proxy.bytesDown == sent.count)
    }
}

/// One connection's bytes sent back until it half-closes, then closed.
private final class EchoServer: Sendable {
    let port: Int

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ready = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, length) == 0 && listen(listener, 1) == 0 && getsockname(listener, $0, &length) == 0
            }
        }
        guard ready else { throw POSIXError(.EADDRNOTAVAIL) }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread {
            let connection = accept(listener, nil, nil)
            close(listener)
            guard connection >= 0 else { return }
            var buffer = [UInt8](repeating: 0, count: 8192)
            while true {
                let count = buffer.withUnsafeMutableBytes { read(connection, $0.baseAddress, $0.count) }
                guard count > 0 else { break }
                var offset = 0
                while offset < count {
                    let written = buffer.withUnsafeBytes { write(connection, $0.baseAddress! + offset, count - offset) }
                    guard written > 0 else { break }
                    offset += written
                }
            }
            close(connection)
        }.start()
    }
}

private func connectLoopback(_ port: Int) throws -> Int32 {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = UInt16(port).bigEndian
    address.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
    let connected = withUnsafePointer(to: &address) { pointer in
        pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    }
    guard connected == 0 else { throw POSIXError(.ECONNREFUSED) }
    return descriptor
}
