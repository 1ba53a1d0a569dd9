import Foundation
import Spawn
import Testing
import TestSupport

/// The seeded simulation of the real hub (issue 51, `Sources/RealtimeSimulation`,
/// `scripts/simulate`): a short run every time, and a seed's run the same twice.
@Suite("The seeded simulation of the hub")
struct SimulationTests {
    static func simulate(_ arguments: [String]) throws -> ChildProcess.Result {
        try ChildProcess.run(BuiltProduct.path("simulate"), arguments, environment: ["SWIFT_DETERMINISTIC_HASHING": "1"], timeout: .seconds(100))
    }

    @Test("300 schedules of two or three nodes, members dropping and rejoining, a bus that loses a node's subscription, nodes killed and started again, rooms whose history is lost: every member holds each room's events once, in order, each hole told, and at the end every event of the current epoch", .timeLimit(.minutes(2)))
    func shortRun() throws {
        let run = try Self.simulate(["--schedules", "300"])
        let last = run.standardOutput.split(separator: "\n").last.map(String.init) ?? ""
        #expect(run.status == 0, "\(run.standardOutput.suffix(4000))\(run.standardError.suffix(2000))")
        #expect(last.hasPrefix("simulated 300 schedules, ") && last.hasSuffix(": 0 violations"), "\(last)")
    }

    @Test("the same seed gives the same trace twice, another seed another", .timeLimit(.minutes(1)))
    func sameSeedSameTrace() throws {
        let first = try Self.simulate(["--seed", "42", "--schedules", "1", "--verbose"]).standardOutput
        let second = try Self.simulate(["--seed", "42", "--schedules", "1", "--verbose"]).standardOutput
        let other = try Self.simulate(["--seed", "43", "--schedules", "1", "--verbose"]).standardOutput
        #expect(first.contains("trace "))
        #expect(first == second)
        #expect(first != other)
    }
}
