import Dispatch
import Foundation
import CurlHTTP
import RealtimeServer
import SystemSupport
import WebSocket

/// What open operator's consoles cost a busy node: a `RealtimeServer` in this process (so the
/// firehose is published without HTTP) with a console token, a channel published at 20,000
/// events a second (`hub.publish` from a thread, 200 every 10 ms) to one reading subscriber, and
/// the good client pinging; 5 rounds alternate 10 s without consoles and 10 s with 10 consoles
/// each polling as the page does (the log and the snapshot every 500 ms, over HTTP with the
/// bearer token), after a 3 s warm-up with them.
func openConsoles() {
    progress("consoles: 10 open consoles beside a 20,000 events/s channel")
    let token = "hostile-console-token-0123456789"
    var options = RealtimeServerOptions(port: 0, apps: [RealtimeApp(id: "1", key: appKey, secret: appSecret)])
    options.consoleToken = token
    guard let server = try? RealtimeServer(options: options) else { fail("consoles: no in-process server") }
    defer { server.shutdown(grace: .zero) }
    let base = "http://127.0.0.1:\(server.port)"
    let received = Locked(0)
    let subscribed = DispatchSemaphore(value: 0)
    guard let subscriber = try? context.connect(url: server.url(appKey: appKey), onEvent: { event in
        guard case .text(let text) = event else { return }
        if text.contains("subscription_succeeded") { subscribed.signal() } else if text.contains("tick") { received.withLock { $0 += 1 } }
    }) else { fail("consoles: no subscriber") }
    Thread.sleep(forTimeInterval: 0.3)
    try? subscriber.send(text: #"{"event":"bird:subscribe","data":{"channel":"firehose"}}"#)
    guard subscribed.wait(timeout: .now() + 10) == .success else { fail("consoles: the subscriber was not subscribed") }
    guard let good = try? GoodClient(port: server.port) else { fail("consoles: good client: no connection") }

    let publishing = Locked(true)
    Thread.detachNewThread {
        let data = #"{"price":42.5,"symbol":"BIRD","seq":0}"#
        var next = ContinuousClock.now
        while publishing.withLock({ $0 }) {
            for _ in 0..<200 { _ = server.hub.publish(appID: "1", channels: ["firehose"], event: "tick", data: data) }
            next += .milliseconds(10)
            let wait = next - ContinuousClock.now
            if wait > .zero { Thread.sleep(forTimeInterval: milliseconds(wait) / 1000) }
        }
    }
    defer { publishing.withLock { $0 = false } }

    /// The process's CPU seconds so far: server, clients, publisher and consoles together.
    func processCPU() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
    /// Round trips for `seconds` with `consoles` consoles open, the events delivered meanwhile,
    /// the process's CPU µs per event, and the consoles' requests.
    func round(consoles: Int, seconds: Double) -> (times: [Duration], events: Int, cpuPerEvent: Double, requests: Int) {
        let open = Locked(true), requests = Locked(0), done = DispatchSemaphore(value: 0)
        for _ in 0..<consoles {
            Thread.detachNewThread {
                let headers = ["Authorization: Bearer \(token)"]
                var after = 0
                while open.withLock({ $0 }) {
                    // `next` found by a search, not a parse: this process holds the server, and its
                    // consoles should cost it as little as a browser elsewhere would.
                    guard case .success(let answer) = CurlHTTP.get(url: base + "/console/api/log?app=1&after=\(after)", headers: headers,
                                                                   timeout: .seconds(10), maxResponseBytes: 4 << 20),
                          let range = answer.body.firstRange(of: Array(#""next":"#.utf8)) else { fail("consoles: a log request failed") }
                    after = Int(String(decoding: answer.body[range.upperBound...].prefix { $0 >= 0x30 && $0 <= 0x39 }, as: UTF8.self)) ?? after
                    do {
                        guard case .success(let snapshot) = CurlHTTP.get(url: base + "/console/api/app?app=1", headers: headers,
                                                                         timeout: .seconds(10), maxResponseBytes: 4 << 20),
                              snapshot.status == 200 else { fail("consoles: a snapshot request failed") }
                    }
                    requests.withLock { $0 += 2 }
                    Thread.sleep(forTimeInterval: 0.5)
                }
                done.signal()
            }
        }
        Thread.sleep(forTimeInterval: 1)
        let events = received.withLock { $0 }, cpu = processCPU()
        let times = good.roundTrips(for: seconds)
        let delivered = received.withLock { $0 } - events
        let result = (times, delivered, (processCPU() - cpu) * 1e6 / Double(max(1, delivered)), requests.withLock { $0 })
        open.withLock { $0 = false }
        for _ in 0..<consoles { _ = done.wait(timeout: .now() + 15) }
        return result
    }

    _ = round(consoles: 10, seconds: 3)
    for index in 1...5 {
        for consoles in [0, 10] {
            let (times, events, cpu, requests) = round(consoles: consoles, seconds: 10)
            record("round \(index), \(consoles) consoles (\(requests) console requests): good client's ping, \(String(format: "%.0f", Double(events) / 10)) events/s delivered, \(String(format: "%.2f", cpu)) µs of process CPU per event",
                   summary(times) + String(format: ", p99 %.2f ms", milliseconds(times[min(times.count - 1, times.count * 99 / 100)])),
                   consoles == 0 ? "—" : "within the noise of the rounds without")
        }
    }
}
