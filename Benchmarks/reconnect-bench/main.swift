// reconnect-bench: link up → stream ready, with the Reconnector driven by netlink reachability
// versus by its timer alone, in the same run, inside private network namespaces (root needed).
// Run: swift run -c release reconnect-bench [iterations]
import Dispatch
import Foundation
import SystemSupport
import Reachability
import ReachabilityNetlink
import Reconnect
import ReconnectTesting
import SampleSupport
import NetworkLab
import LineStream

guard NetworkLab.unavailableReason == nil else {
    FileHandle.standardError.write(Data("reconnect-bench: \(NetworkLab.unavailableReason!)\n".utf8))
    exit(1)
}
let iterations = CommandLine.arguments.dropFirst().first.flatMap(Int.init) ?? 20

/// Waits for reconnector events matching a predicate.
final class EventWaiter: Sendable {
    private let events = Locked<[ReconnectEvent]>([])
    private let arrived = DispatchSemaphore(value: 0)
    func record(_ event: ReconnectEvent) {
        events.withLock { $0.append(event) }
        arrived.signal()
    }
    var count: Int { events.withLock { $0.count } }
    /// Waits until an event after index `after` matches, for at most `seconds`.
    func wait(after: Int, seconds: Int, _ match: (ReconnectEvent) -> Bool) -> ReconnectEvent? {
        let deadline = DispatchTime.now() + .seconds(seconds)
        while true {
            if let found = events.withLock({ Array($0.dropFirst(after)) }).first(where: match) { return found }
            if arrived.wait(timeout: deadline) == .timedOut { return nil }
        }
    }
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

/// One variant: `iterations` link flips, returning link-up → ready times.
func measure(reachabilityDriven: Bool) throws -> [Duration] {
    let lab = try NetworkLab()
    try lab.addVethLink("veth0", peer: "peer0")
    try lab.local.addAddress("192.0.2.2/24", to: "veth0")
    try lab.remote.addAddress("192.0.2.1/24", to: "peer0")
    let server = LineServer(host: "192.0.2.1", openSocket: { family in
        try lab.remote.run { socket(family, Int32(SOCK_STREAM.rawValue), 0) }
    })
    try server.start()
    defer { server.stop() }
    let stream = TCPLineStream(host: "192.0.2.1", port: server.port, openSocket: { family in
        try lab.local.run { socket(family, Int32(SOCK_STREAM.rawValue), 0) }
    })
    stream.pingTimeout = .milliseconds(200)
    var configuration = ReconnectConfiguration()
    configuration.reconnectDelay = .seconds(1)
    configuration.reconnectTimerInterval = .seconds(1)
    let queue = DispatchQueue(label: "bench.reachability")
    var makeReachability: (@Sendable (String) throws -> any ReachabilitySource)?
    if reachabilityDriven {
        makeReachability = { host in try lab.local.run { try NetworkReachability(host: host, deliveryQueue: queue) } }
    }
    let reconnector = Reconnector(configuration: configuration, reachability: makeReachability)
    let waiter = EventWaiter()
    let token = reconnector.onEvent { waiter.record($0) }
    defer { token.cancel() }
    let ready = DispatchSemaphore(value: 0)
    let readyToken = stream.reconnectEvents.observe { if case .ready = $0 { ready.signal() } }
    defer { readyToken.cancel() }
    reconnector.activate(stream)
    stream.connect()
    guard ready.wait(timeout: .now() + .seconds(5)) == .success else { throw BenchFailure("first connect failed") }

    var results: [Duration] = []
    for index in 0..<iterations {
        let mark = waiter.count
        try lab.local.setLink("veth0", up: false)
        // The reachability-driven reconnector probes by itself; the timer-only one has no
        // trigger, so the same probe is made by hand (either way a dead socket is found).
        if !reachabilityDriven { stream.verifyConnection() }
        guard waiter.wait(after: mark, seconds: 5, { if case .accidentalDisconnect = $0 { true } else { false } }) != nil else {
            throw BenchFailure("iteration \(index): link down not detected")
        }
        // Stay down past the kernel's linkwatch rate limit (1 s), so the link-up carrier
        // change is reported at once rather than deferred.
        Thread.sleep(forTimeInterval: 1.1 + Double.random(in: 0...0.5))
        let upMark = waiter.count
        let started = ContinuousClock.now
        try lab.local.setLink("veth0", up: true)
        guard waiter.wait(after: upMark, seconds: 10, { if case .succeeded = $0 { true } else { false } }) != nil else {
            throw BenchFailure("iteration \(index): not reconnected within 10 s")
        }
        results.append(ContinuousClock.now - started)
    }
    reconnector.deactivate()
    lab.close()
    return results.sorted()
}

struct BenchFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

do {
    FileHandle.standardError.write(Data("reachability-driven, \(iterations) link flips…\n".utf8))
    let driven = try measure(reachabilityDriven: true)
    FileHandle.standardError.write(Data("timer-only (1 s interval), \(iterations) link flips…\n".utf8))
    let timer = try measure(reachabilityDriven: false)
    func median(_ values: [Duration]) -> Duration { values[values.count / 2] }
    print("| link up → stream ready (\(iterations) flips each) | median | min | max | target |")
    print("|---|---|---|---|---|")
    print(String(format: "| reachability-driven (netlink) | %.1f ms | %.1f ms | %.1f ms | ≤ 50 ms median |", milliseconds(median(driven)), milliseconds(driven.first!), milliseconds(driven.last!)))
    print(String(format: "| timer-only (reconnectTimerInterval 1 s) | %.1f ms | %.1f ms | %.1f ms | — |", milliseconds(median(timer)), milliseconds(timer.first!), milliseconds(timer.last!)))
    print(String(format: "| speed-up of the median | %.0f× | | | |", milliseconds(median(timer)) / max(milliseconds(median(driven)), 0.001)))
} catch {
    FileHandle.standardError.write(Data("reconnect-bench: \(error)\n".utf8))
    exit(1)
}
