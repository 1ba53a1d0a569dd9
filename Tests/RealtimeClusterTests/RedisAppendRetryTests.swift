import Foundation
import Glibc
import Synchronization
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import TestSupport
import Testing

/// An append whose answer is lost is sent again and kept once (issue 31: the node's lane rides
/// out a Redis freeze instead of refusing, so an append may run and still time out).
@Suite("Redis room store: appends sent again")
struct RedisAppendRetryTests {
    @Test("the reply to an append is lost after Redis ran it: the store sends it again on a new connection and Redis keeps it once, with the id it was given", .timeLimit(.minutes(1)))
    func lostReplyKeptOnce() throws {
        let redis = try PrivateRedis()
        defer { redis.stop() }
        guard case .unix(let path) = redis.endpoint else { Issue.record("a private Redis on a unix socket"); return }
        let proxy = try ReplyDroppingProxy(redisPath: path)
        defer { proxy.stop() }
        let store = RedisRoomStore(redis: RedisConnection(endpoint: .tcp(host: "127.0.0.1", port: Int(proxy.port))))
        let rule = RoomRule(history: 100)
        let first = try store.append(app: "1", room: "r", event: "e", data: "1", from: nil, rule: rule, at: 1000)
        #expect(proxy.dropped == 1, "the proxy dropped the first append's reply")
        #expect(first.record.id == 1)
        let second = try store.append(app: "1", room: "r", event: "e", data: "2", from: nil, rule: rule, at: 1000)
        #expect(second.record.id == 2)
        let direct = RedisRoomStore(redis: RedisConnection(endpoint: redis.endpoint))
        #expect(try direct.page(app: "1", room: "r", before: nil, limit: 10, now: 1000).events.map(\.data) == ["1", "2"])
    }
}

/// A TCP proxy to a unix-socket Redis that runs the first `EVALSHA` it sees but closes the
/// client's connection instead of passing the reply on (an answer lost in a broken connection);
/// every other byte passes both ways.
final class ReplyDroppingProxy: Sendable {
    let port: UInt16
    private let listener: Int32
    private let state = Mutex(ProxyState())

    private struct ProxyState {
        var dropped = 0
        var armed = true
        var sockets: [Int32] = []
    }

    /// Replies dropped so far.
    var dropped: Int { state.withLock { $0.dropped } }

    init(redisPath: String) throws {
        listener = try TestSockets.listeningSocket(backlog: 16)
        port = try TestSockets.port(of: listener)
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                let server = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                var address = sockaddr_un()
                address.sun_family = sa_family_t(AF_UNIX)
                withUnsafeMutableBytes(of: &address.sun_path) { buffer in
                    for (index, byte) in redisPath.utf8.prefix(buffer.count - 1).enumerated() { buffer[index] = byte }
                }
                let connected = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }
                guard connected == 0 else { close(client); close(server); continue }
                state.withLock { $0.sockets += [client, server] }
                let dropThis = Mutex(false)
                Thread.detachNewThread { [self] in
                    pump(from: client, to: server) { bytes in
                        if String(decoding: bytes, as: UTF8.self).contains("EVALSHA") {
                            state.withLock { state in
                                if state.armed {
                                    state.armed = false
                                    dropThis.withLock { $0 = true }
                                }
                            }
                        }
                        return true
                    }
                }
                Thread.detachNewThread { [self] in
                    pump(from: server, to: client) { _ in
                        guard dropThis.withLock({ $0 }) else { return true }
                        state.withLock { $0.dropped += 1 }
                        shutdown(client, Int32(SHUT_RDWR))
                        shutdown(server, Int32(SHUT_RDWR))
                        return false
                    }
                }
            }
        }
    }

    /// Copies bytes until either side closes or `pass` says to stop.
    private func pump(from source: Int32, to destination: Int32, pass: ([UInt8]) -> Bool) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            let bytes = Array(buffer[0..<count])
            guard pass(bytes) else { break }
            TestSockets.write(destination, bytes)
        }
        shutdown(destination, Int32(SHUT_WR))
    }

    func stop() {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        for fd in state.withLock({ $0.sockets }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }
}
