import Foundation
import RealtimeSimulation

// scripts/simulate: runs seeded schedules of the real hubs and clients, prints each failing
// seed with its schedule shrunk to the fewest faults that still fail it, then
// `simulated N schedules, F faults, E events: V violations`.
//
//   simulate [--schedules N] [--seed S] [--only-faults I,J,…] [--until-failure] [--verbose]
//            [--lossy-failovers]
//
// Seeds run from S (1 by default) to S + N - 1; `--seed S --schedules 1` replays one exactly,
// and `--only-faults` its shrunk schedule (the indexes a failure prints). `--until-failure`
// stops at the first failing schedule and says how many ran. Run it with
// SWIFT_DETERMINISTIC_HASHING=1 (scripts/simulate does): Swift's dictionaries otherwise
// iterate in an order seeded per process, and a seed's trace would differ by run.
var schedules = 100
var first: UInt64 = 1
var verbose = false
var lossyFailovers = false
var untilFailure = false
var only: Set<Int>?
var arguments = CommandLine.arguments.dropFirst()
let usage = "usage: simulate [--schedules N] [--seed S] [--only-faults I,J,…] [--until-failure] [--verbose] [--lossy-failovers]"
while let argument = arguments.popFirst() {
    switch argument {
    case "--schedules": schedules = arguments.popFirst().flatMap(Int.init) ?? schedules
    case "--seed": first = arguments.popFirst().flatMap(UInt64.init) ?? first
    case "--only-faults": only = Set((arguments.popFirst() ?? "").split(separator: ",").compactMap { Int($0) })
    case "--until-failure": untilFailure = true
    case "--verbose": verbose = true
    case "--lossy-failovers": lossyFailovers = true
    case "--help", "-h":
        print(usage)
        exit(0)
    default:
        FileHandle.standardError.write(Data("simulate: unknown argument \(argument)\n\(usage)\n".utf8))
        exit(2)
    }
}
if ProcessInfo.processInfo.environment["SWIFT_DETERMINISTIC_HASHING"] == nil {
    FileHandle.standardError.write(Data("simulate: SWIFT_DETERMINISTIC_HASHING is not set: a seed's run may differ between processes\n".utf8))
}
var faults = 0
var events = 0
var violations = 0
var ran = 0
for seed in first..<(first + UInt64(max(0, schedules))) {
    let world = SimulatedWorld(seed: seed, lossyFailovers: lossyFailovers)
    let outcome = world.run(only: only)
    ran += 1
    faults += outcome.faults
    events += outcome.events
    violations += outcome.violations.count
    if verbose || !outcome.violations.isEmpty {
        print("seed \(seed): \(outcome.faults) faults, \(outcome.events) events, \(outcome.kept) kept, trace \(String(outcome.trace, radix: 16)): \(outcome.violations.count) violations")
        for violation in outcome.violations.prefix(20) { print("  \(violation)") }
    }
    guard !outcome.violations.isEmpty else { continue }
    if only == nil {
        let (kept, shrunk) = SimulatedWorld.shrink(seed: seed, faults: world.plan.count, failing: outcome, lossyFailovers: lossyFailovers)
        print("  shrunk to \(kept.count) of \(world.plan.count) faults (replay: simulate --seed \(seed) --schedules 1 --only-faults \(kept.map(String.init).joined(separator: ","))\(lossyFailovers ? " --lossy-failovers" : "")):")
        for index in kept { print("    [\(index)] \(world.plan[index])") }
        for violation in shrunk.violations.prefix(5) { print("    \(violation)") }
    }
    if untilFailure {
        print("first failing schedule: the \(ran)th (seed \(seed))")
        break
    }
}
print("simulated \(ran) schedules, \(faults) faults, \(events) events: \(violations) violations")
exit(violations == 0 ? 0 : 1)
