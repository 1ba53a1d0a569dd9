import Dispatch
import Foundation
import Glibc
import SystemSupport
import WebSocket

/// A webhook backend on loopback that answers every request `200` after `delay`: one thread per
/// connection, keep-alive honoured.
final class SlowWebhookBackend: Sendable {
    let port: Int
    let requests = Locked(0)
    private let listener: Int32

    init(delay: Duration) {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(descriptor, 128) == 0 else { fail("webhook backend: bind failed") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(descriptor, $0, &length) } }
        port = Int(UInt16(bigEndian: address.sin_port))
        listener = descriptor
        let requests = self.requests
        Thread.detachNewThread {
            while true {
                let client = accept(descriptor, nil, nil)
                guard client >= 0 else { return }
                Thread.detachNewThread { Self.serve(client, delay: delay, requests: requests) }
            }
        }
    }

    /// Reads requests (headers, then `Content-Length` bytes of body) and answers each.
    private static func serve(_ client: Int32, delay: Duration, requests: Locked<Int>) {
        defer { close(client) }
        var pending: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while true {
            let read = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
            guard read > 0 else { return }
            pending += buffer[..<read]
            while let end = pending.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: pending[..<end.lowerBound], as: UTF8.self).lowercased()
                let length = head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                guard pending.count >= end.upperBound + length else { break }
                pending.removeFirst(end.upperBound + length)
                requests.withLock { $0 += 1 }
                Thread.sleep(forTimeInterval: Double(delay.components.attoseconds) / 1e18 + Double(delay.components.seconds))
                let answer = Array("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n".utf8)
                guard answer.withUnsafeBytes({ send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == answer.count else { return }
            }
        }
    }
}

/// Issue 47, item 2: four anonymous connections subscribe to and unsubscribe from fresh public
/// channels, 1,800 frames a second each (every one a `channel_occupied` or `channel_vacated`
/// webhook), while the backend answers each request in 50 ms; a good client pings beside them.
/// Rows: the good client's ping with no webhook, with an instant webhook and with the slow one,
/// and the server's CPU in each.
func webhookChurn() {
    progress("webhooks: four churning connections beside a good client")
    let instant = SlowWebhookBackend(delay: .zero)
    let slow = SlowWebhookBackend(delay: .milliseconds(50))
    for (label, backend) in [("no webhook", nil), ("a webhook answering at once", instant), ("a webhook answering in 50 ms", slow)] as [(String, SlowWebhookBackend?)] {
        let (server, port) = startServer(backend.map { ["--webhook", "http://127.0.0.1:\($0.port)/hook"] } ?? [])
        guard let good = try? GoodClient(port: port) else { fail("good client: no connection") }
        let churning = Locked(true)
        let sent = Locked(0)
        let done = DispatchSemaphore(value: 0)
        for churner in 0..<4 {
            guard let connection = try? context.connect(url: "ws://127.0.0.1:\(port)/app/\(appKey)", onEvent: { _ in }) else { fail("churner: no connection") }
            Thread.sleep(forTimeInterval: 0.2)
            // 9 channels subscribed and unsubscribed every 10 ms: 1,800 frames a second.
            sendLoop(connection, burst: 9, every: 0.01, running: churning, sent: sent, done: done) { index in
                let channel = "fresh-\(churner)-\(index)"
                return [#"{"event":"bird:subscribe","data":{"channel":"\#(channel)"}}"#, #"{"event":"bird:unsubscribe","data":{"channel":"\#(channel)"}}"#]
            }
        }
        Thread.sleep(forTimeInterval: 0.5)
        let cpuBefore = cpuSeconds(server)
        let times = good.roundTrips(for: 10)
        let cpu = cpuSeconds(server) - cpuBefore
        churning.withLock { $0 = false }
        for _ in 0..<4 { done.wait() }
        record("a good client's ping beside the churn (\(sent.withLock { $0 } * 2) frames), \(label); server CPU in the 10 s", summary(times) + String(format: ", CPU %.2f s", cpu), "max ≤ 100 ms")
        _ = server.signal(SIGTERM)
        running.removeAll { $0 === server }
    }
    progress("webhook requests answered: at once \(instant.requests.withLock { $0 }), in 50 ms \(slow.requests.withLock { $0 })")
}
