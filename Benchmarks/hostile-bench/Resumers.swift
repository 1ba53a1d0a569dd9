import CurlHTTP
import Dispatch
import Foundation
import Glibc
import SystemSupport
import RealtimeProtocol

/// A WebSocket client on a raw socket that opens, sends one frame, and never reads again: its
/// receive buffer is 4 KiB, so what the server sends it stays queued on the server.
final class NonReadingSocket: Sendable {
    let descriptor: Int32

    /// Opens the connection and sends `firstFrame`; `smallReceiveBuffer` false keeps the
    /// kernel's default, for a socket read by `PagingSockets`.
    init?(port: Int, firstFrame: String, smallReceiveBuffer: Bool = true) {
        descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var small: Int32 = 4096
        if smallReceiveBuffer { setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size)) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard connected == 0 else { close(descriptor); return nil }
        let upgrade = "GET /app/\(appKey)?protocol=7 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        guard write(Array(upgrade.utf8)) else { close(descriptor); return nil }
        // The 101 and the handshake frame: read once, then never again.
        var buffer = [UInt8](repeating: 0, count: 2048)
        var timeout = timeval(tv_sec: 10, tv_usec: 0)
        setsockopt(descriptor, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard buffer.withUnsafeMutableBytes({ recv(descriptor, $0.baseAddress, $0.count, 0) }) > 0 else { close(descriptor); return nil }
        guard sendText(firstFrame) else { close(descriptor); return nil }
    }

    /// Sends a masked text frame (RFC 6455 §5.2) with a zero masking key, the payload as it
    /// is (under 64 KiB).
    func sendText(_ text: String) -> Bool {
        let payload = Array(text.utf8)
        var frame: [UInt8] = [0x81]
        if payload.count < 126 { frame.append(0x80 | UInt8(payload.count)) } else { frame += [0x80 | 126, UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)] }
        frame += [0, 0, 0, 0] + payload
        return write(frame)
    }

    private func write(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { send(descriptor, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    deinit { close(descriptor) }
}

/// Issue 47, item 3: 1,000 anonymous sockets resume a public room of 20,000 kept events from its
/// start and never read. Rows: the server's resident memory before, once the replays have
/// stalled (20 s), and 10 s after the sockets close; a good client's ping meanwhile.
func nonReadingResumers() {
    // The second run takes the node's replay rate out of the way, so the replay memory alone
    // bounds what the resumers hold.
    for (label, arguments) in [("", []), (", replay rate out of the way (--replay-rate 65536)", ["--replay-rate", "65536"])] {
        nonReadingResumers(label: label, arguments: arguments)
    }
}

func nonReadingResumers(label: String, arguments: [String]) {
    progress("resumers: 1,000 sockets resuming a room of 20,000 events and never reading\(label)")
    let (server, port) = startServer(arguments)
    let rule = RoomRule(history: 20_000, isPublic: true)
    let epoch = publishBacklog(port: port, room: "big:1", rule: rule, events: 20_000)
    guard let good = try? GoodClient(port: port) else { fail("good client: no connection") }
    let grant = (try? JSONWebToken.sign(RoomClaims(subject: nil, room: "big:{id}", expiresAt: Int(Date().timeIntervalSince1970) + 3600, rule: rule),
                                        secret: appSecret)) ?? ""
    let join = (try? RealtimeMessage(event: ProtocolNamespace.bird.event(.roomJoin),
                                     payload: RoomJoinRequest(room: "big:1", token: grant, since: RoomPosition(epoch: epoch, id: 0))).text) ?? ""
    Thread.sleep(forTimeInterval: 1)
    let before = residentBytes(server)
    var sockets: [NonReadingSocket] = []
    for _ in 0..<1_000 {
        guard let socket = NonReadingSocket(port: port, firstFrame: join) else { fail("resumer: no connection") }
        sockets.append(socket)
    }
    let times = good.roundTrips(for: 20)
    let stalled = residentBytes(server)
    // The peer hung up (POLLRDHUP, 0x2000 in Linux' poll.h): the server closed it with 4100.
    let survivors = sockets.filter { socket in
        var poller = pollfd(fd: socket.descriptor, events: 0x2000, revents: 0)
        return poll(&poller, 1, 0) == 0 || poller.revents & 0x2000 == 0
    }.count
    sockets.removeAll()
    Thread.sleep(forTimeInterval: 10)
    let after = residentBytes(server)
    let megabytes = { (bytes: Int) in String(format: "%.0f MB", Double(bytes) / 1e6) }
    record("server RSS before / with 1,000 non-reading resumers of a 20,000-event room (20 s) / 10 s after they close (\(survivors) still open at 20 s)\(label)",
           "\(megabytes(before)) / \(megabytes(stalled)) (+\(megabytes(stalled - before))) / \(megabytes(after))", "growth ≤ 300 MiB, back within 10 s")
    record("a good client's ping meanwhile", summary(times), "max ≤ 100 ms")
    _ = server.signal(SIGTERM)
    running.removeAll { $0 === server }
}

/// Publishes `events` events of about 50 + `padding` bytes (`{"n": …, "pad": …}`) into `room`
/// through the signed HTTP API, 100 a request (10 of 1 KB or more), and returns the room's epoch.
func publishBacklog(port: Int, room: String, rule: RoomRule, events count: Int, padding: Int = 250) -> String {
    var epoch = ""
    let pad = String(repeating: "x", count: padding)
    let size = padding < 1000 ? 100 : 10
    for batch in 0..<(count / size) {
        struct Event: Encodable { var name: String; var room: String; var data: String; var rule: RoomRule }
        struct Batch: Encodable { var batch: [Event] }
        let events = (0..<size).map { Event(name: "e", room: room, data: #"{"n":\#(batch * size + $0),"pad":"\#(pad)"}"#, rule: rule) }
        guard let body = try? RealtimeMessage.jsonText(Batch(batch: events)) else { fail("batch does not encode") }
        let path = "/apps/1/batch_room_events"
        let bytes = Array(body.utf8)
        let parameters = RESTSignature.signedParameters(method: "POST", path: path, body: bytes, key: appKey, secret: appSecret, timestamp: Int(Date().timeIntervalSince1970))
        var components = URLComponents(string: "http://127.0.0.1:\(port)\(path)")!
        components.queryItems = parameters.map { URLQueryItem(name: $0.key, value: $0.value) }
        guard case .success(let answer) = CurlHTTP.post(url: components.url!.absoluteString, body: bytes, headers: ["Content-Type: application/json", "Expect:"],
                                                        timeout: .seconds(30), maxResponseBytes: 1 << 22), answer.status == 200 else { fail("publish refused") }
        if epoch.isEmpty, let text = String(bytes: answer.body, encoding: .utf8), let range = text.range(of: #""epoch":""#) {
            epoch = String(text[range.upperBound...].prefix { $0 != "\"" })
        }
    }
    return epoch
}
