// realtime-server: the reference realtime server (Pusher Channels protocol 7 shape, `bird:`
// and `pusher:` namespaces). See RealtimeServerOptions for the command line.
import Dispatch
import Foundation
import RealtimeCluster
import RealtimeProtocol
import RealtimeServer
import Redis
import WebSocket

let options: RealtimeServerOptions
do {
    options = try RealtimeServerOptions(arguments: Array(CommandLine.arguments.dropFirst()))
} catch .helpRequested {
    FileHandle.standardOutput.write(Data((RealtimeServerOptions.usage + "\n").utf8))
    exit(0)
} catch {
    FileHandle.standardError.write(Data("realtime-server: \(error)\n\(RealtimeServerOptions.usage)\n".utf8))
    exit(2)
}

let prefix = options.node.map { "realtime-server[\($0)]: " } ?? "realtime-server: "
let (format, node) = (options.logFormat, options.node)
@Sendable func writeLog(_ line: String) {
    switch format {
    case .text:
        FileHandle.standardError.write(Data("\(prefix)\(line)\n".utf8))
    case .json:
        var fields = ["message": line, "time": Date().formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))]
        fields["node"] = node
        let text = (try? RealtimeMessage.jsonText(fields)) ?? #"{"message":"unencodable log line"}"#
        FileHandle.standardError.write(Data("\(text)\n".utf8))
    }
}
let log: (@Sendable (String) -> Void)? = options.quiet ? nil : writeLog
// libwebsockets' own errors and warnings in the same format (JSON lines stay JSON), `--quiet`
// or not, as the server's warnings are.
WebSocketLog.setWriter { line in writeLog("libwebsockets: \(line)") }

// With --redis (or --redis-cluster), one node of a cluster (ClusterNode): a Redis that is down is reported and tried
// again on each use (the bus reconnects with backoff and catches its rooms up); room requests
// meanwhile are refused with `store_full`, which clients retry with backoff.
let server: RealtimeServer
do {
    server = try ClusterNode.start(options: options, log: log, warn: writeLog)
} catch let error as RedisError {
    FileHandle.standardError.write(Data("\(prefix)\(options.redisCluster == nil ? "--redis" : "--redis-cluster"): \(error)\n".utf8))
    exit(2)
} catch let error as RoomStoreError {
    // The folder is named in the error; the default one says how to choose another.
    let choice = options.dataDirectoryIsDefault ? "the default data folder (choose one with --data DIR, or --memory)" : "--data"
    FileHandle.standardError.write(Data("\(prefix)\(choice): \(error)\n".utf8))
    exit(2)
} catch {
    FileHandle.standardError.write(Data("realtime-server: \(error)\n".utf8))
    exit(1)
}
log?("listening on \(options.host):\(server.port) for app id(s) \(options.apps.map(\.id).joined(separator: ", "))")
// The port on stdout, so a parent process (a test, the demo) can read it when it asked for 0.
FileHandle.standardOutput.write(Data("port \(server.port)\n".utf8))

// Top-level code is main-actor isolated: the handlers run on the main queue.
var sources: [any DispatchSourceSignal] = []
for signalNumber in [SIGINT, SIGTERM] {
    signal(signalNumber, SIG_IGN)
    let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .main)
    source.setEventHandler {
        log?("shutting down: closing clients with 4200")
        server.shutdown()
        exit(0)
    }
    source.resume()
    sources.append(source)
}
dispatchMain()
