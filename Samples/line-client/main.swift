// line-client HOST PORT [--json] [--delay SECONDS] [--interval SECONDS]
// A TCPLineStream kept alive by a Reconnector. Standard input lines are sent; /disconnect,
// /connect and /quit are commands. One line per state change and per line received.
import Dispatch
import Foundation
import Reconnect
import ReachabilityNetlink
import SampleSupport
import LineStream

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("line-client: \(message)\n".utf8))
    exit(status)
}

/// Starts everything; returns what must live as long as the process.
func run() -> [Any] {
    let usage = "usage: line-client HOST PORT [--json] [--delay SECONDS] [--interval SECONDS]"
    var positional: [String] = []
    var json = false
    var configuration = ReconnectConfiguration()
    var arguments = CommandLine.arguments.dropFirst()
    while let argument = arguments.popFirst() {
        switch argument {
        case "--json": json = true
        case "--delay", "--interval":
            // Finite and at most a year: Duration arithmetic must not overflow.
            guard let seconds = arguments.popFirst().flatMap(Double.init), seconds >= 0, seconds <= 31_536_000 else { fail(usage, status: 2) }
            let duration = Duration.milliseconds(Int64(seconds * 1000))
            if argument == "--delay" { configuration.reconnectDelay = duration } else { configuration.reconnectTimerInterval = duration }
        case _ where argument.hasPrefix("--"): fail(usage, status: 2)
        default: positional.append(argument)
        }
    }
    guard positional.count == 2, let port = UInt16(positional[1]) else { fail(usage, status: 2) }

    // The drop-in: a stream, a reconnector attached to it, the app's connect.
    let stream = TCPLineStream(host: positional[0], port: port)
    let reconnector = Reconnector(configuration: configuration, reachability: { try NetworkReachability(host: $0) })
    reconnector.activate(stream)

    let log = EventLog(format: json ? .json : .text)
    let tokens = [log.observe(stream), log.observe(reconnector), stream.onLine { log.log("received", detail: $0) }]
    // Connect now, and keep trying if the server or the network is not there yet.
    reconnector.manualStart(immediately: true)

    Thread.detachNewThread {
        while let line = readLine() {
            switch line {
            case "/disconnect": stream.disconnect()
            case "/connect": stream.connect()
            case "/quit": exit(0)
            default: if !stream.send(line) { log.log("not-sent", detail: "not connected: \(line)") }
            }
        }
    }
    signal(SIGINT, SIG_IGN)
    let interrupt = DispatchSource.makeSignalSource(signal: SIGINT, queue: .main)
    interrupt.setEventHandler { exit(0) }
    interrupt.resume()
    return [tokens, interrupt, reconnector, stream, log]
}

// A global: kept for good, and still reachable (LeakSanitizer) once `dispatchMain()` has ended
// the main thread with `pthread_exit`, unlike the locals of a function that never returns.
let lifetime = run()
dispatchMain()
