import Foundation
import Glibc
import class Spawn.ChildProcess
import TestSupport
import Testing

/// The main job as a user runs it: the `realtime-demo` binary end to end, both parts (the
/// embedded server's faults, then the room on two nodes over a private Redis behind nginx).
@Suite("The main job: realtime-demo")
struct DemoTests {
    static var demoPath: String {
        BuiltProduct.path("realtime-demo")
    }

    @Test("exits 0 and both rooms lines read lost 0, duplicated 0, out of order 0; the client moved twice between nodes")
    func demo() throws {
        // Its own process group: should it hang, the demo and the cluster it started (Redis,
        // nodes, nginx: all its children) are killed together.
        let run = try ChildProcess(Self.demoPath, [], newProcessGroup: true)
        defer { if run.isRunning { _ = run.signal(SIGKILL, toProcessGroup: true) } }
        let termination = try run.waitUntilExit(timeout: .seconds(120))
        let output = run.outputLines
        #expect(termination.status == 0, "\(output.suffix(30).joined(separator: "\n"))\n\(run.errorLines.suffix(10).joined(separator: "\n"))")
        let rooms = output.first { $0.hasPrefix("rooms: published ") }
        let cluster = output.first { $0.hasPrefix("rooms on two nodes: published ") }
        #expect(rooms?.hasSuffix("lost 0, duplicated 0, out of order 0") == true, "\(rooms ?? "no rooms line")")
        #expect(cluster?.hasSuffix("lost 0, duplicated 0, out of order 0") == true, "\(cluster ?? "no two-node line")")
        #expect(output.filter { $0.contains("client on node") && $0.contains("(move ") }.count == 2)
        #expect(output.contains { $0.contains("lost 0, duplicated 0") && $0.hasPrefix("published ") })
    }
}
