import Foundation
import RealtimeSimulation

// scripts/simulate: runs seeded schedules of the real hub and prints one line per
// failing seed, then `simulated N schedules, F faults, E events: V violations`.
//
//   simulate [--schedules N] [--seed S] [--verbose] [--lossy-failovers]
//
// Seeds run from S (1 by default) to S + N - 1; `--seed S --schedules 1` replays one exactly.
// Run it with SWIFT_DETERMINISTIC_HASHING=1 (scripts/simulate does): Swift's dictionaries
// otherwise iterate in an order seeded per process, and a seed's trace would differ by run.
var schedules = 100
var first: UInt64 = 1
var verbose = false
var lossyFailovers = false
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    switch argument {
    case "--schedules": schedules = arguments.popFirst().flatMap(Int.init) ?? schedules
    case "--seed": first = arguments.popFirst().flatMap(UInt64.init) ?? first
    case "--verbose": verbose = true
    case "--lossy-failovers": lossyFailovers = true
    case "--help", "-h":
        print("usage: simulate [--schedules N] [--seed S] [--verbose] [--lossy-failovers]")
        exit(0)
    default:
        FileHandle.standardError.write(Data("simulate: unknown argument \(argument)\n".utf8))
        exit(2)
    }
}
if ProcessInfo.processInfo.environment["SWIFT_DETERMINISTIC_HASHING"] == nil {
    FileHandle.standardError.write(Data("simulate: SWIFT_DETERMINISTIC_HASHING is not set: a seed's run may differ between processes\n".utf8))
}
var faults = 0
var events = 0
var violations = 0
for seed in first..<(first + UInt64(max(0, schedules))) {
    let outcome = SimulatedWorld(seed: seed, lossyFailovers: lossyFailovers).run()
    faults += outcome.faults
    events += outcome.events
    violations += outcome.violations.count
    if verbose || !outcome.violations.isEmpty {
        print("seed \(seed): \(outcome.faults) faults, \(outcome.events) events, \(outcome.kept) kept, trace \(String(outcome.trace, radix: 16)): \(outcome.violations.count) violations")
        for violation in outcome.violations.prefix(20) { print("  \(violation)") }
    }
}
print("simulated \(schedules) schedules, \(faults) faults, \(events) events: \(violations) violations")
exit(violations == 0 ? 0 : 1)
