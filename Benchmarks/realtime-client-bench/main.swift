// realtime-client-bench: (a) events/s that BirdRealtime receives and hands to a bound handler,
// against a raw WebSocket client on the same stream; (b) link up → connected in private network
// namespaces (root), reachability-driven versus backoff-only at the backoff's cap; (c) rooms:
// events/s through a room's `on` and `bind` handlers against a raw client on the same stream,
// and reconnect → the last of 1,000 missed events delivered; (d) presence: 100,000 member_added
// on one channel, first → all listed.
// Run: swift run -c release realtime-client-bench [flips] [--backoff-flips N] [--events N] [--rounds N]
//      [--skip-throughput] [--skip-lab] [--skip-rooms] [--skip-presence] [--machine-only]
//      [--profile-consumer raw|on|bind]
import Foundation
import ReconnectTesting
import NetworkLab

/// The command line: `[flips] [--backoff-flips N] [--events N] [--rounds N] [--skip-throughput] [--skip-lab] [--skip-rooms] [--skip-presence] [--machine-only] [--profile-consumer raw|on|bind]`.
struct Arguments {
    /// Link flips of the reachability-driven client (10).
    var flips = 10
    /// Link flips of the backoff-only client (as many as `flips`).
    var backoffFlips: Int?
    /// Events per throughput run (200,000).
    var events = 200_000
    /// Throughput runs per client (3).
    var rounds = 3
    /// Whether part (a) runs.
    var throughput = true
    /// Whether part (b) runs.
    var lab = true
    /// Whether part (c) runs.
    var rooms = true
    /// Whether part (d) runs.
    var presence = true
    /// Whether part (c) times the connection's state machine alone (`rounds` times) and
    /// stops there: for work on the room event path.
    var machineOnly = false
    /// Whether part (c) runs one consumer's firehose `rounds` times and stops there, with no
    /// table: a run to record with `perf`, whose samples are then that consumer's alone.
    var profiledConsumer: RoomsBenchmark.Consumer?

    /// Parses `CommandLine.arguments`.
    ///
    /// - Throws: `BenchFailure` naming a bad argument.
    init() throws {
        var rest = CommandLine.arguments.dropFirst()[...]
        /// Takes the value of option `name`: a positive number.
        func number(_ name: String) throws -> Int {
            guard let text = rest.popFirst(), let value = Int(text), value > 0 else { throw BenchFailure("\(name) needs a positive number") }
            return value
        }
        while let argument = rest.popFirst() {
            switch argument {
            case "--backoff-flips": backoffFlips = try number(argument)
            case "--events": events = try number(argument)
            case "--rounds": rounds = try number(argument)
            case "--skip-throughput": throughput = false
            case "--skip-lab": lab = false
            case "--skip-rooms": rooms = false
            case "--skip-presence": presence = false
            case "--machine-only": machineOnly = true
            case "--profile-consumer":
                guard let name = rest.popFirst(), let consumer = RoomsBenchmark.Consumer.allCases.first(where: { "\($0)" == name }) else {
                    throw BenchFailure("--profile-consumer needs raw, on or bind")
                }
                profiledConsumer = consumer
            default:
                guard let value = Int(argument), value > 0 else {
                    throw BenchFailure("usage: realtime-client-bench [flips] [--backoff-flips N] [--events N] [--rounds N] [--skip-throughput] [--skip-lab] [--skip-rooms] [--skip-presence] [--machine-only] [--profile-consumer raw|on|bind]")
                }
                flips = value
            }
        }
        if events < 2 { throw BenchFailure("--events must be at least 2") }
    }
}

/// Runs the parts asked for and prints their tables; off the main thread, so that the main
/// queue serves the rooms' main-actor handlers.
func runBenchmarks() {
do {
    let arguments = try Arguments()
    if arguments.lab, let reason = NetworkLab.unavailableReason {
        throw BenchFailure("part (b) needs network namespaces (root): \(reason); use --skip-lab for part (a) alone")
    }
    if arguments.throughput {
        let benchmark = ThroughputBenchmark(events: arguments.events, rounds: arguments.rounds)
        let (firehose, server) = try benchmark.run()
        /// `median (min–max)` of `kind`'s rates.
        func cell(_ results: ThroughputResults, _ kind: ConsumerKind) -> String {
            guard let rates = results.samples[kind]?.map(\.rate).sorted(), !rates.isEmpty else { return "—" }
            return String(format: "%.0f (%.0f–%.0f)", median(rates), rates.first!, rates.last!)
        }
        /// BirdRealtime's median rate over the raw client's.
        func ratio(_ results: ThroughputResults) -> String {
            guard let bird = results.medianRate(.bird), let raw = results.medianRate(.raw) else { return "—" }
            return String(format: "%.1f %%", bird / raw * 100)
        }
        print("| events/s, \(arguments.events.formatted()) events per run, \(arguments.rounds) runs each: median (min–max) | raw WebSocket client | raw client + RealtimeMessage(parsing:) | BirdRealtime, bound handler | BirdRealtime / raw | target |")
        print("|---|---|---|---|---|---|")
        print("| firehose peer: pre-encoded frames in 64 KiB writes (the client is the bottleneck) | \(cell(firehose, .raw)) | \(cell(firehose, .rawParsing)) | \(cell(firehose, .bird)) | \(ratio(firehose)) | ≥ 30 % |")
        print("| RealtimeServer in-process: hub.publish from a thread, ≤ \(benchmark.credit.formatted()) outstanding | \(cell(server, .raw)) | — | \(cell(server, .bird)) | \(ratio(server)) | — |")
        /// The publisher's median rate and credit waits in the reference server runs of `kind`.
        func publisherCell(_ kind: ConsumerKind) -> String {
            let reports = (server.samples[kind] ?? []).compactMap(\.publisher)
            guard !reports.isEmpty else { return "—" }
            let rate = median(reports.map(\.rate).sorted()), waiting = median(reports.map(\.waitingShare).sorted())
            return String(format: "%.0f publishes/s, %.0f %% of the run waiting for credit", rate, waiting * 100)
        }
        /// The median memory growth of `kind`'s runs, in MiB.
        func memoryCell(_ results: ThroughputResults, _ kind: ConsumerKind) -> String {
            guard let growth = results.samples[kind]?.map(\.memoryGrowth).sorted(), !growth.isEmpty else { return "—" }
            return String(format: "%.1f MiB", Double(median(growth)) / 1024)
        }
        print("| firehose runs, process RSS growth from connect to last event (median) | \(memoryCell(firehose, .raw)) | \(memoryCell(firehose, .rawParsing)) | \(memoryCell(firehose, .bird)) | | |")
        print("| RealtimeServer runs, the publisher thread | \(publisherCell(.raw)) | — | \(publisherCell(.bird)) | | |")
        print()
    }
    if arguments.lab {
        let benchmark = LinkFlipBenchmark()
        let backoffFlips = arguments.backoffFlips ?? arguments.flips
        progress("reachability-driven, \(arguments.flips) link flips…")
        let driven = try benchmark.run(reachabilityDriven: true, flips: arguments.flips)
        progress("backoff-only, \(backoffFlips) link flips…")
        let backoff = try benchmark.run(reachabilityDriven: false, flips: backoffFlips)
        let drivenTimes = driven.times.sorted(), backoffTimes = backoff.times.sorted()
        let byReachability = driven.triggers.filter { $0 == .reachability }.count
        print("| link up → connected (backoff base = cap = 30 s) | flips | median | min | max | target |")
        print("|---|---|---|---|---|---|")
        print(String(format: "| reachability-driven (default; %d of %d attempts by reachability) | %d | %.1f ms | %.1f ms | %.1f ms | ≤ 50 ms median |",
                     byReachability, driven.triggers.count, drivenTimes.count,
                     median(drivenTimes).milliseconds, drivenTimes.first!.milliseconds, drivenTimes.last!.milliseconds))
        let untilAttempt = driven.untilAttempt.sorted()
        if !untilAttempt.isEmpty {
            print(String(format: "| reachability-driven, of that: link up → attempt started (ip, kernel report, route re-evaluation) | %d | %.1f ms | %.1f ms | %.1f ms | — |",
                         untilAttempt.count, median(untilAttempt).milliseconds, untilAttempt.first!.milliseconds, untilAttempt.last!.milliseconds))
        }
        print(String(format: "| backoff-only (watchesReachability = false) | %d | %.1f ms | %.1f ms | %.1f ms | — |",
                     backoffTimes.count, median(backoffTimes).milliseconds, backoffTimes.first!.milliseconds, backoffTimes.last!.milliseconds))
        print(String(format: "| speed-up of the median | | %.0f× | | | ≥ 100× |",
                     median(backoffTimes).milliseconds / max(median(drivenTimes).milliseconds, 0.001)))
    }
    if arguments.rooms {
        let benchmark = RoomsBenchmark(events: arguments.events, rounds: arguments.rounds)
        let probe = benchmark.machineCost()
        progress(String(format: "rooms: the state machine alone takes %.2f µs per room event (%d delivered)", probe.perEvent.milliseconds * 1000, probe.delivered))
        if arguments.machineOnly {
            let costs = (0..<arguments.rounds).map { _ in benchmark.machineCost().perEvent.milliseconds * 1000 }.sorted()
            print(String(format: "| the state machine alone, µs per room event, %d runs: median (min–max) | %.2f (%.2f–%.2f) |", costs.count, median(costs), costs.first!, costs.last!))
            exit(0)
        }
        if let consumer = arguments.profiledConsumer {
            let (rates, cpu) = try benchmark.throughput(consumers: [consumer])
            let values = rates[consumer, default: []].sorted(), micros = cpu[consumer, default: []].sorted()
            print("| \(consumer.label) alone, \(values.count) runs: events/s median (min–max), CPU µs per event | " + String(format: "%.0f (%.0f–%.0f) | %.2f |", median(values), values.first!, values.last!, median(micros)))
            exit(0)
        }
        let (rates, cpu) = try benchmark.throughput()
        func cell(_ consumer: RoomsBenchmark.Consumer, of table: [RoomsBenchmark.Consumer: [Double]] = rates, format: String = "%.0f (%.0f–%.0f)") -> String {
            guard let values = table[consumer]?.sorted(), !values.isEmpty else { return "—" }
            return String(format: format, median(values), values.first!, values.last!)
        }
        func ratio(_ consumer: RoomsBenchmark.Consumer) -> String {
            guard let raw = rates[.raw].map({ median($0.sorted()) }), let value = rates[consumer].map({ median($0.sorted()) }) else { return "—" }
            return String(format: "%.1f %%", value / raw * 100)
        }
        print("| room events/s, \(arguments.events.formatted()) events per run, \(arguments.rounds) runs each: median (min–max) | raw WebSocket client | Room.on (main actor) | Room.bind (delivery queue) | on / raw | bind / raw | target |")
        print("|---|---|---|---|---|---|---|")
        print("| firehose peer: pre-encoded room_event frames in 64 KiB writes | \(cell(.raw)) | \(cell(.on)) | \(cell(.bind)) | \(ratio(.on)) | \(ratio(.bind)) | on ≥ 40 % |")
        // Each round runs raw, on and bind back to back: their ratio within a round is what
        // the machine's drift between rounds moves least.
        func roundRatios(_ consumer: RoomsBenchmark.Consumer) -> String {
            guard let raw = rates[.raw], let values = rates[consumer], raw.count == values.count, !raw.isEmpty else { return "—" }
            let ratios = zip(values, raw).map { $0 / $1 * 100 }.sorted()
            return String(format: "%.1f %% (%.1f–%.1f %%)", median(ratios), ratios.first!, ratios.last!)
        }
        print("| the same, on / raw and bind / raw within each round: median (min–max) | | | | \(roundRatios(.on)) | \(roundRatios(.bind)) | on ≥ 40 % |")
        let micros = "%.2f (%.2f–%.2f)"
        print("| process CPU µs per event, all threads (peer included) | \(cell(.raw, of: cpu, format: micros)) | \(cell(.on, of: cpu, format: micros)) | \(cell(.bind, of: cpu, format: micros)) | | | |")
        progress("rooms: \(benchmark.resumes) resumes of \(benchmark.missed) missed events…")
        let times = try benchmark.resume().sorted()
        print()
        print("| reconnect → last replayed event delivered (RealtimeServer in process) | resumes | median | min | max | target |")
        print("|---|---|---|---|---|---|")
        print(String(format: "| connect() → the last of %d events published while away reaches the handler | %d | %.1f ms | %.1f ms | %.1f ms | ≤ 100 ms |",
                     benchmark.missed, times.count, median(times).milliseconds, times.first!.milliseconds, times.last!.milliseconds))
        print()
    }
    if arguments.presence {
        let benchmark = PresenceBenchmark()
        let results = try benchmark.run()
        let walls = results.map(\.wall).sorted(), cpus = results.map(\.cpu).sorted()
        print("| presence: \(benchmark.count.formatted()) member_added on one channel, first handed over → all listed | rounds | median | min | max | target |")
        print("|---|---|---|---|---|---|")
        print(String(format: "| wall time | %d | %.1f ms | %.1f ms | %.1f ms | < 1 s |", walls.count, median(walls).milliseconds, walls.first!.milliseconds, walls.last!.milliseconds))
        print(String(format: "| process CPU time, all threads | %d | %.1f ms | %.1f ms | %.1f ms | — |", cpus.count, median(cpus).milliseconds, cpus.first!.milliseconds, cpus.last!.milliseconds))
        print()
    }
} catch {
    progress("realtime-client-bench: \(error)")
    exit(1)
}
exit(0)
}

Thread { runBenchmarks() }.start()
dispatchMain()
