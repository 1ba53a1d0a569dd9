// reachability-monitor HOST... [--json]
// Prints the reachability of each host, then one line per change, until interrupted.
import Dispatch
import Foundation
import Reachability
import ReachabilityNetlink

let arguments = Array(CommandLine.arguments.dropFirst())
let json = arguments.contains("--json")
let hosts = arguments.filter { !$0.hasPrefix("--") }
guard !hosts.isEmpty, arguments.allSatisfy({ !$0.hasPrefix("--") || $0 == "--json" }) else {
    FileHandle.standardError.write(Data("usage: reachability-monitor HOST... [--json]\n".utf8))
    exit(2)
}

// Ctrl-C ends the program; set up before anything is printed, so a SIGINT sent as soon as
// output appears finds the source in place.
// Top-level code is main-actor isolated: the handler runs on the main queue.
signal(SIGINT, SIG_IGN)
let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
interrupt.setEventHandler { exit(0) }
interrupt.resume()

let output = OutputLine.Printer(json: json)
let queue = DispatchQueue(label: "reachability-monitor")
let monitor: ReachabilityMonitor
var watched: [NetworkReachability] = []
do {
    monitor = try ReachabilityMonitor(deliveryQueue: queue)
    for host in hosts { watched.append(try monitor.reachability(for: host)) }
} catch {
    FileHandle.standardError.write(Data("reachability-monitor: \(error)\n".utf8))
    if case .invalidHost = error { exit(2) }
    exit(1)
}

var observations: [ObservationToken] = []
queue.sync {
    for reachability in watched {
        // Observe first: `observe` takes the baseline later changes are compared with, so a
        // change between printing the initial state and observing would never be printed.
        // Changes are delivered on `queue`, so none is printed before the initial line.
        observations.append(reachability.observe { output.print(OutputLine($0, event: "change")) })
        output.print(OutputLine(reachability.currentReachability(), event: "initial"))
    }
}

dispatchMain()
