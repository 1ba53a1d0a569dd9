// reachability-bench: measures the netlink reachability monitor inside a private network
// namespace (root needed). Run: swift run -c release reachability-bench
import Dispatch
import Foundation
import Reachability
import ReachabilityNetlink
import ReconnectTesting
import SystemSupport
import Spawn
import NetworkLab

guard NetworkLab.unavailableReason == nil else {
    FileHandle.standardError.write(Data("reachability-bench: \(NetworkLab.unavailableReason!)\n".utf8))
    exit(1)
}

/// A namespace with veth0 192.0.2.2/24 towards a peer at 192.0.2.1.
func makeLab() throws -> NetworkLab {
    let lab = try NetworkLab()
    try lab.addVethLink("veth0", peer: "peer0")
    try lab.local.addAddress("192.0.2.2/24", to: "veth0")
    try lab.remote.addAddress("192.0.2.1/24", to: "peer0")
    return lab
}

/// Process CPU time (user + system) from getrusage(RUSAGE_SELF).
func cpuTime() -> Duration {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    func duration(_ value: timeval) -> Duration { .seconds(value.tv_sec) + .microseconds(value.tv_usec) }
    return duration(usage.ru_utime) + duration(usage.ru_stime)
}

func milliseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1000 + Double(duration.components.attoseconds) / 1e15
}

func percentile(_ sorted: [Duration], _ p: Double) -> Duration {
    sorted[min(sorted.count - 1, Int((Double(sorted.count) * p).rounded(.up)) - 1)]
}

nonisolated(unsafe) var rows: [(String, String, String)] = []
func record(_ name: String, _ value: String, _ target: String) {
    rows.append((name, value, target))
    FileHandle.standardError.write(Data("  \(name): \(value)\n".utf8))
}

/// `ip -batch -` kept open, so one change costs one line, not one process.
final class IPBatch {
    let process: ChildProcess
    init(namespace: String) throws {
        process = try ChildProcess(
            "/usr/sbin/ip",
            ["-n", namespace, "-force", "-batch", "-"],
            standardInput: .pipe,
            standardOutput: .nullDevice,
            standardError: .inherit
        )
    }
    func send(_ line: String) throws { try process.write(line + "\n") }
    func close() {
        process.closeStandardInput()
        process.waitUntilExit()
    }
}

// (a) change → notification latency over route flips.
do {
    let flips = 400
    let lab = try makeLab()
    let queue = DispatchQueue(label: "bench.latency")
    let reachability = try lab.local.run { try NetworkReachability(host: "198.51.100.7", deliveryQueue: queue) }
    let delivered = DispatchSemaphore(value: 0)
    let arrival = Locked((ContinuousClock.now, false))
    let observation = reachability.observe { value in
        arrival.withLock { $0 = (.now, value.isReachable) }
        delivered.signal()
    }
    let batch = try IPBatch(namespace: lab.local.name)
    var latencies: [Duration] = []
    for index in 0..<flips {
        let started = ContinuousClock.now
        try batch.send(index % 2 == 0 ? "route add 198.51.100.0/24 via 192.0.2.1" : "route del 198.51.100.0/24 via 192.0.2.1")
        guard delivered.wait(timeout: .now() + .seconds(2)) == .success else {
            FileHandle.standardError.write(Data("flip \(index) not notified within 2 s\n".utf8))
            exit(1)
        }
        let (time, reachable) = arrival.withLock { $0 }
        guard reachable == (index % 2 == 0) else {
            FileHandle.standardError.write(Data("flip \(index) notified the wrong state\n".utf8))
            exit(1)
        }
        latencies.append(time - started)
    }
    batch.close()
    observation.cancel()
    latencies.sort()
    record("(a) route flip → notification, median (\(flips) flips)", String(format: "%.3f ms", milliseconds(percentile(latencies, 0.5))), "≤ 5 ms")
    record("(a) route flip → notification, p99", String(format: "%.3f ms", milliseconds(percentile(latencies, 0.99))), "≤ 20 ms")
    lab.close()
}

// (b) a burst of 10,000 route messages while 10 hosts are watched.
do {
    let lab = try makeLab()
    let queue = DispatchQueue(label: "bench.burst")
    let monitor = try lab.local.run { try ReachabilityMonitor(deliveryQueue: queue) }
    let hosts = (1...10).map { "198.51.100.\($0)" }
    let counts = Locked([String: Int]())
    var watched: [(NetworkReachability, ObservationToken)] = []
    for host in hosts {
        let reachability = try monitor.reachability(for: host)
        watched.append((reachability, reachability.observe { value in counts.withLock { $0[value.host.description, default: 0] += 1 } }))
    }
    var script = ""
    for index in 0..<5000 {
        script += "route add 203.0.113.\(index % 250)/32 via 192.0.2.1 metric \(index / 250 + 1)\n"
    }
    for index in 0..<5000 {
        script += "route del 203.0.113.\(index % 250)/32 via 192.0.2.1 metric \(index / 250 + 1)\n"
    }
    script += "route add 198.51.100.0/24 via 192.0.2.1\n"
    let path = NSTemporaryDirectory() + "reachability-bench-\(getpid()).batch"
    try script.write(toFile: path, atomically: true, encoding: .utf8)
    defer { unlink(path) }
    let before = cpuTime()
    let statsBefore = monitor.statistics
    try lab.local.ip("-batch", path)
    monitor.synchronize()
    let cpu = cpuTime() - before
    let stats = monitor.statistics
    let perHost = counts.withLock { $0 }
    let allReachable = watched.allSatisfy { $0.0.currentReachability().isReachable }
    record("(b) burst of 10,001 route messages: monitor CPU", String(format: "%.3f s", milliseconds(cpu) / 1000), "≤ 0.5 s")
    record("(b) drains (re-evaluations) / datagrams / overruns", "\(stats.batches - statsBefore.batches) / \(stats.datagrams - statsBefore.datagrams) / \(stats.overruns - statsBefore.overruns)", "bounded")
    record("(b) notifications per watched host (10 hosts)", "max \(perHost.values.max() ?? 0), min \(perHost.values.min() ?? 0)", "1 (bounded)")
    record("(b) final state right (all 10 reachable)", allReachable ? "yes" : "NO", "yes")
    watched.forEach { $0.1.cancel() }
    lab.close()
}

// (c) idle CPU over 10 s with 10 hosts watched.
do {
    let lab = try makeLab()
    let monitor = try lab.local.run { try ReachabilityMonitor(deliveryQueue: DispatchQueue(label: "bench.idle")) }
    let watched = try (1...10).map { try monitor.reachability(for: "198.51.100.\($0)") }
    let observations = watched.map { $0.observe { _ in } }
    // Let the new link settle (IPv6 link-local DAD ends about a second after link up).
    Thread.sleep(forTimeInterval: 3)
    let statsBefore = monitor.statistics
    let before = cpuTime()
    Thread.sleep(forTimeInterval: 10)
    let cpu = cpuTime() - before
    let stats = monitor.statistics
    record("(c) idle CPU over 10 s (10 hosts watched)", String(format: "%.4f s", milliseconds(cpu) / 1000), "≈ 0")
    record("(c) kernel messages / notifications while idle", "\(stats.datagrams - statsBefore.datagrams) / \(stats.notifications - statsBefore.notifications)", "noise only / 0")
    observations.forEach { $0.cancel() }
    lab.close()
}

// (d) re-evaluating 1,000 watched addresses after one change.
do {
    let lab = try makeLab()
    try lab.local.addAddress("2001:db8::2/64", to: "veth0")
    let monitor = try lab.local.run { try ReachabilityMonitor(deliveryQueue: DispatchQueue(label: "bench.thousand")) }
    let hosts = (0..<500).map { "198.51.\(100 + $0 / 250).\($0 % 250 + 1)" } + (0..<500).map { "2001:db8:5::\(String($0 + 1, radix: 16))" }
    let watched = try hosts.map { try monitor.reachability(for: $0) }
    let observations = watched.map { $0.observe { _ in } }
    var durations: [Duration] = []
    for index in 0..<20 {
        try lab.local.ip("route", index % 2 == 0 ? "add" : "del", "198.51.100.0/24", "via", "192.0.2.1")
        monitor.synchronize()
        durations.append(monitor.statistics.lastEvaluationDuration)
    }
    precondition(monitor.statistics.evaluations >= 20 * hosts.count, "every change re-evaluated every host")
    durations.sort()
    record("(d) re-evaluate 1,000 watched addresses after one change, median of 20", String(format: "%.2f ms", milliseconds(percentile(durations, 0.5))), "—")
    observations.forEach { $0.cancel() }
    lab.close()
}

// (e) the reachability-monitor sample: `ip route del` → its JSON line, and back.
do {
    let sample = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("reachability-monitor").path
    guard FileManager.default.isExecutableFile(atPath: sample) else {
        FileHandle.standardError.write(Data("reachability-bench: build reachability-monitor too (swift build -c release)\n".utf8))
        exit(1)
    }
    let lab = try makeLab()
    try lab.local.addRoute("198.51.100.0/24", via: "192.0.2.1")
    let lines = Locked<[(ContinuousClock.Instant, String)]>([])
    let arrived = DispatchSemaphore(value: 0)
    let process = try ChildProcess(
        "/usr/sbin/ip",
        ["netns", "exec", lab.local.name, sample, "--json", "198.51.100.7"],
        standardError: .inherit,
        onLine: { _, line in
            lines.withLock { $0.append((.now, line)) }
            arrived.signal()
        }
    )
    func nextLine() -> (ContinuousClock.Instant, String) {
        guard arrived.wait(timeout: .now() + .seconds(2)) == .success else {
            FileHandle.standardError.write(Data("reachability-monitor printed nothing within 2 s\n".utf8))
            exit(1)
        }
        return lines.withLock { $0.removeFirst() }
    }
    _ = nextLine()
    var latencies: [Duration] = []
    for index in 0..<40 {
        let started = ContinuousClock.now
        try lab.local.ip("route", index % 2 == 0 ? "del" : "add", "198.51.100.0/24", "via", "192.0.2.1")
        let (time, line) = nextLine()
        precondition(line.contains("\"reachable\":\(index % 2 == 1)"), "unexpected line \(line)")
        latencies.append(time - started)
    }
    process.signal(SIGTERM)
    process.waitUntilExit()
    latencies.sort()
    record("(e) reachability-monitor --json: ip route del/add → line, median (40, incl. spawning ip)", String(format: "%.2f ms", milliseconds(percentile(latencies, 0.5))), "≤ 50 ms")
    record("(e) reachability-monitor --json: worst", String(format: "%.2f ms", milliseconds(latencies.last!)), "≤ 50 ms")
    lab.close()
}

print("| measurement | result | target |")
print("|---|---|---|")
for (name, value, target) in rows { print("| \(name) | \(value) | \(target) |") }
