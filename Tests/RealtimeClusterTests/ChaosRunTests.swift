import Foundation
import NetworkLab
import Spawn
import TestSupport
import Testing

/// The chaos run (`Benchmarks/chaos-run`, `scripts/chaos`) kept working: a short schedule of one
/// fault of each kind, its real processes (two nodes, Redis, nginx, room-backend, four
/// `realtime join` clients) in network namespaces, and its table read back.
@Suite("The chaos run, one fault of each kind", .serialized, .enabled(if: NetworkLab.shouldRunTests, "needs root and ip netns: \(NetworkLab.unavailableReason ?? "")"))
struct ChaosRunTests {
    /// A row's cells, for the row whose first cell is `label`.
    static func row(_ label: String, in output: String) -> [String]? {
        output.split(separator: "\n").lazy.map { $0.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) } }
            .first { $0.first == label }
    }

    @Test("9 faults (one of each kind): every one took effect and recovered; nothing lost, duplicated or reordered; events replayed; one epoch per room")
    func oneOfEachKind() async throws {
        let run = try await ChildProcess.runDetached(BuiltProduct.path("chaos-run"), ["--faults", "9", "--seed", "1"], timeout: .seconds(300))
        let output = run.standardOutput
        #expect(run.termination == .exited(0), "\(output.suffix(3000)) \(run.standardError.suffix(2000))")
        for kind in ["node SIGKILL, restarted", "node move (SIGTERM, 4200)", "Redis SIGKILL, restarted", "4201 close (node's clients)",
                     "4200 close (node's clients)", "link flap (1-4 s down)", "carrier loss (1-4 s)", "client SIGSTOP 8 s, SIGCONT",
                     "client SIGKILL, restarted with --state"] {
            let cells = Self.row(kind, in: output)
            // count, clients reconnected, without effect, worst, median, not recovered
            #expect(cells?[1] == "1" && cells?[3] == "0" && cells?[6] == "0", "\(kind): run once, took effect and recovered: \(cells ?? [])")
        }
        for zero in ["lost", "duplicated", "reordered", "rejoins not recovered"] {
            #expect(Self.row(zero, in: output)?[1] == "0", "\(zero): \(Self.row(zero, in: output) ?? [])")
        }
        let replayed = Int(Self.row("replayed", in: output)?[1] ?? "") ?? 0
        let received = Int(Self.row("received", in: output)?[1] ?? "") ?? 0
        let expected = Int(Self.row("to deliver (each client, each of its rooms)", in: output)?[1] ?? "") ?? -1
        #expect(replayed > 0, "the frozen client and the moved ones came back with what they missed")
        // A restarted client may print again the killed process's last lines (at least once).
        let again = Int(Self.row("printed again by a restarted client, at its start (at least once across a SIGKILL: not counted as duplicated)", in: output)?[1] ?? "") ?? -1
        #expect(again >= 0 && again <= 30, "printed again: \(again)")
        #expect(received == expected + again && received > 1000, "received \(received) of \(expected) (\(again) printed again)")
        #expect(Self.row("epochs seen per room", in: output)?[1] == "3 over 3 rooms", "Redis kept its data: one epoch per room")
        #expect(output.contains("freezes after which the client reconnected: 1 of 1"))
    }
}
