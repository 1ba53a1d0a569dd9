// line-server --port PORT [--host ADDRESS]
// A TCP server of lines for line-client: answers PING with PONG, echoes every other line, logs
// connections to standard error, exits on SIGTERM or SIGINT. Port 0 picks a free port (logged).
import Dispatch
import Foundation
import SampleSupport

func fail(_ message: String, status: Int32) -> Never {
    FileHandle.standardError.write(Data("line-server: \(message)\n".utf8))
    exit(status)
}

/// Starts everything; returns what must live as long as the process.
func run() -> [Any] {
    var host = "127.0.0.1"
    var port: UInt16?
    var arguments = CommandLine.arguments.dropFirst()
    while let argument = arguments.popFirst() {
        switch (argument, arguments.popFirst()) {
        case ("--port", let value?) where UInt16(value) != nil: port = UInt16(value)
        case ("--host", let value?): host = value
        default: fail("usage: line-server --port PORT [--host ADDRESS]", status: 2)
        }
    }
    guard let port else { fail("usage: line-server --port PORT [--host ADDRESS]", status: 2) }

    let server = LineServer(host: host, port: port, log: { line in
        FileHandle.standardError.write(Data("line-server: \(line)\n".utf8))
    })
    do {
        try server.start()
    } catch {
        fail("\(error)", status: 1)
    }

    let signals = exitOnTermination { server.stop() }
    return [signals, server]
}

// A global: kept for good, and still reachable (LeakSanitizer) once `dispatchMain()` has ended
// the main thread with `pthread_exit`, unlike the locals of a function that never returns.
let lifetime = run()
dispatchMain()
