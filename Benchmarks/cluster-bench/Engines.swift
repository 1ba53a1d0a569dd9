// cluster-bench (e): two nodes on one Redis against two nodes on a Redis Cluster, one run of
// each (main.swift runs both and prints the rows).
import Dispatch
import Foundation
import RealtimeServer
import SystemSupport

/// A process's CPU time (user + system) so far, in seconds (`/proc/<pid>/stat`, in clock ticks).
func cpuSeconds(_ pid: pid_t) -> Double {
    guard let text = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8), let close = text.lastIndex(of: ")") else { return 0 }
    let fields = text[text.index(after: close)...].split(separator: " ")
    // After the command: state is field 3, utime and stime fields 14 and 15.
    guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
    return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
}

/// One engine's figures: delivery latency at a paced rate, then the saturating run's rates and
/// each Redis process's CPU per event.
struct EngineRun {
    var p50 = 0.0, p99 = 0.0, publishes = 0.0, deliveries = 0.0
    /// Microseconds of each Redis process's CPU per published event in the saturating run.
    var cpuPerEvent: [Double] = []
}

/// Runs section (e) on `nodes`: 30 rooms with a member on each node, 2,000 events a second for
/// 3 s (latency), then 8 publishers back to back for 3 s (rates, and `redisProcesses`' CPU).
func engineRun(_ nodes: [RealtimeServer], redisProcesses: [pid_t], label: String) throws -> EngineRun {
    let rooms = (1...30).map { "eng-\(label):\($0)" }
    var members: [Member] = []
    for room in rooms {
        for (index, node) in nodes.enumerated() { members.append(try Member(port: node.port, room: room, user: "u\(index)", recordLatency: true)) }
    }
    usleep(500_000)
    var run = EngineRun()
    // Paced: each node's publisher 1,000 events/s, the rooms in turn.
    let pacedPerNode = 3000
    DispatchQueue.concurrentPerform(iterations: nodes.count) { index in
        let start = ContinuousClock.now
        for event in 0..<pacedPerNode {
            let due = start + .nanoseconds(Int64(event) * 1_000_000)
            let wait = due - ContinuousClock.now
            if wait > .zero { usleep(UInt32(nanoseconds(wait) / 1000)) }
            let stamp = nanoseconds(ContinuousClock.now - origin)
            _ = try? nodes[index].hub.publishRoom(appID: app.id, room: rooms[(event + index) % rooms.count], event: "tick", data: #"{"s":"t=\#(stamp)"}"#)
        }
    }
    let paced = pacedPerNode * nodes.count / rooms.count
    for member in members { guard member.wait(seconds: 60, { $0.kept >= paced }) else { fail("(e) a member missed paced events") } }
    let latencies = members.flatMap { $0.state.withLock { state in defer { state.latencies = [] }; return state.latencies } }.sorted()
    run.p50 = percentile(latencies, 0.5)
    run.p99 = percentile(latencies, 0.99)
    // Saturating: 4 publishers per node, back to back, for 3 s.
    let published = Locked([Int](repeating: 0, count: rooms.count))
    let cpuBefore = redisProcesses.map(cpuSeconds)
    let start = ContinuousClock.now
    let deadline = start + .seconds(3)
    DispatchQueue.concurrentPerform(iterations: 4 * nodes.count) { worker in
        var event = worker
        while ContinuousClock.now < deadline {
            let room = event % rooms.count
            if (try? nodes[worker % nodes.count].hub.publishRoom(appID: app.id, room: rooms[room], event: "tick", data: #"{"s":"x"}"#)) != nil {
                published.withLock { $0[room] += 1 }
            }
            event += 4 * nodes.count
        }
    }
    let publishedEnd = ContinuousClock.now
    let counts = published.withLock { $0 }
    for (index, member) in members.enumerated() {
        let expected = paced + counts[index / nodes.count]
        guard member.wait(seconds: 60, { $0.kept >= expected }) else { fail("(e) a member missed events") }
    }
    let elapsed = ContinuousClock.now - start
    let cpuAfter = redisProcesses.map(cpuSeconds)
    let total = counts.reduce(0, +)
    run.publishes = Double(total) / (Double(nanoseconds(publishedEnd - start)) / 1e9)
    run.deliveries = Double(total * nodes.count) / (Double(nanoseconds(elapsed)) / 1e9)
    run.cpuPerEvent = zip(cpuBefore, cpuAfter).map { ($1 - $0) * 1e6 / Double(max(1, total)) }
    members.forEach { $0.close() }
    return run
}
