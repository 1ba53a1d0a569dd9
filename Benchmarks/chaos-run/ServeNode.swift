import Foundation
import Glibc
import RealtimeCluster
import RealtimeServer

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
    /// The three signals are blocked in every thread (the mask is set before any other thread
    /// starts, and threads inherit it) and taken with `sigwait(3)` on the main thread, which
    /// then never returns: no `dispatchMain()`, whose `pthread_exit` leaves the main frame's
    /// objects unreachable (LeakSanitizer) and its stack poisoned (AddressSanitizer reported
    /// libdispatch's signal thread writing there).
    ///
    /// - Parameter arguments: `realtime-server`'s options (`RealtimeServerOptions`).
    static func run(_ arguments: [String]) -> Never {
        var handled = sigset_t()
        sigemptyset(&handled)
        for number in [SIGUSR1, SIGUSR2, SIGTERM] { sigaddset(&handled, number) }
        pthread_sigmask(SIG_BLOCK, &handled, nil)
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
        func closeEveryClient(code: UInt16) {
            for app in appIDs {
                for socketID in server.hub.socketIDs(appID: app) {
                    server.hub.close(appID: app, socketID: socketID, code: code, reason: "chaos-run: \(code)")
                }
            }
        }
        FileHandle.standardOutput.write(Data("port \(server.port)\n".utf8))
        while true {
            var number: Int32 = 0
            guard sigwait(&handled, &number) == 0 else { continue }
            switch number {
            case SIGUSR1: closeEveryClient(code: 4201)
            case SIGUSR2: closeEveryClient(code: 4200)
            default:
                write("shutting down: closing clients with 4200")
                server.shutdown()
                exit(0)
            }
        }
    }
}
