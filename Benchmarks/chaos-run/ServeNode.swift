import Dispatch
import Foundation
import RealtimeCluster
import RealtimeServer
import SystemSupport

/// `chaos-run --serve-node OPTIONS…`: one node of the run's cluster, started by
/// `PrivateCluster` as `realtime-server --redis …` would run (`ClusterNode`), with two changes
/// for the fault schedule:
///
/// - a pong timeout of ``pongTimeout`` instead of 30 s, so that a client frozen for a few
///   seconds is past the server's timeouts (activity timeout, then no pong: closed with 4201);
/// - SIGUSR1 closes every client with 4201 (reconnect now) and SIGUSR2 with 4200 (reconnect
///   now, the node stays up): the close codes of the realtime-connection-lifecycle seed, sent
///   without a shutdown. SIGTERM shuts down as `realtime-server` does (every client closed with
///   4200, then exit).
enum ServeNode {
    /// How long a ping may go unanswered before the node closes the connection with 4201.
    static let pongTimeout: Duration = .seconds(3)

    /// Runs the node until SIGTERM or SIGKILL; prints `port N` on standard output once it listens.
    ///
    /// - Parameter arguments: `realtime-server`'s options (`RealtimeServerOptions`).
    static func run(_ arguments: [String]) -> Never {
        let options: RealtimeServerOptions
        do {
            options = try RealtimeServerOptions(arguments: arguments)
        } catch {
            FileHandle.standardError.write(Data("chaos-run --serve-node: \(error)\n".utf8))
            exit(2)
        }
        let prefix = "node \(options.node ?? "?"): "
        let write: @Sendable (String) -> Void = { line in FileHandle.standardError.write(Data((prefix + line + "\n").utf8)) }
        let server: RealtimeServer
        do {
            server = try ClusterNode.start(options: options, log: write, warn: write) { $0.pongTimeout = pongTimeout }
        } catch {
            write("cannot start: \(error)")
            exit(2)
        }
        let appIDs = options.apps.map(\.id)
        @Sendable func closeEveryClient(code: UInt16) {
            for app in appIDs {
                for socketID in server.hub.socketIDs(appID: app) {
                    server.hub.close(appID: app, socketID: socketID, code: code, reason: "chaos-run: \(code)")
                }
            }
        }
        let queue = DispatchQueue(label: "chaos-run.node.signals")
        let actions: [(Int32, @Sendable () -> Void)] = [
            (SIGUSR1, { closeEveryClient(code: 4201) }),
            (SIGUSR2, { closeEveryClient(code: 4200) }),
            (SIGTERM, {
                write("shutting down: closing clients with 4200")
                server.shutdown()
                exit(0)
            }),
        ]
        // Kept in a static: `withExtendedLifetime(sources) { dispatchMain() }` let a release
        // build free them before `dispatchMain()` (it never returns), and the signals did nothing.
        signalSources.withLock { sources in
            for (number, action) in actions {
                signal(number, SIG_IGN)
                let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
                source.setEventHandler(handler: action)
                source.resume()
                sources.append(source)
            }
        }
        FileHandle.standardOutput.write(Data("port \(server.port)\n".utf8))
        dispatchMain()
    }

    /// The node's signal sources, for the life of the process.
    private static let signalSources = Locked<[any DispatchSourceSignal]>([])
}
