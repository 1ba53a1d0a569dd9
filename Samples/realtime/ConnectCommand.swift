import Dispatch
import Foundation
import Realtime

/// `realtime connect`: a `BirdRealtime` client whose state changes, channel events, errors
/// and scheduled reconnects are printed as lines until SIGINT or SIGTERM, or until the
/// connection reaches `failed` (exit 1: nothing will ever happen after it).
///
/// Every handler runs on the main queue (the client's delivery queue), so lines come out in
/// the order the client reported them. Used from the main thread only (`main.swift`).
final class ConnectCommand {
    /// The client.
    let bird: BirdRealtime
    /// What to subscribe to and how to print.
    let options: ConnectOptions
    /// How long a signal waits after `disconnect()` before the process exits, so the close
    /// frame reaches the server (200 ms; loopback needs under 5 ms).
    static let closeGracePeriod: DispatchTimeInterval = .milliseconds(200)
    /// Kept so the sources live as long as the command.
    private let signalSources: [any DispatchSourceSignal]

    /// Creates the client and installs the SIGINT and SIGTERM handlers (disconnect, then exit
    /// 0); nothing is printed or opened until `run()`.
    ///
    /// Installing the handlers here, before any output, means a signal sent as soon as the
    /// first line appears finds them in place.
    ///
    /// - Parameter options: the parsed command line.
    /// - Throws: `RealtimeError` (kind `.transport`) when the URL is not
    ///   `ws(s)://host[:port]/app/KEY`.
    init(options: ConnectOptions) throws(RealtimeError) {
        var clientOptions = try BirdRealtime.Options(url: options.url)
        clientOptions.deliveryQueue = .main
        let bird = BirdRealtime(options: clientOptions)
        self.bird = bird
        self.options = options
        signalSources = Self.installSignalHandlers(disconnecting: bird)
    }

    /// Subscribes, connects and serves the main queue forever; the signal handlers end the
    /// process.
    func run() -> Never {
        let printer = LinePrinter(json: options.json)
        Self.printConnection(bird, printer: printer, quietErrors: options.quietErrors)
        for name in options.channels {
            bird.subscribe(name).bindAll { event in printer.print(.event(event, at: .now())) }
        }
        bird.connect()
        dispatchMain()
    }

    /// The queue of the signal handlers: not main, where lines are printed, so a signal is
    /// obeyed even while main is blocked writing to a standard output nobody reads.
    static let signalQueue = DispatchQueue(label: "realtime.signals")

    /// SIGINT and SIGTERM: `disconnect()`, then exit 0 after the close grace period, however
    /// far behind the printing is (issue 14: with a slow reader on the pipe the client printed
    /// on for 20 s after SIGTERM, and never exited when nobody read the pipe).
    ///
    /// - Returns: the sources, to keep alive.
    static func installSignalHandlers(disconnecting bird: BirdRealtime, beforeExit: (@Sendable () -> Void)? = nil) -> [any DispatchSourceSignal] {
        var sources: [any DispatchSourceSignal] = []
        for number in [SIGINT, SIGTERM] {
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: signalQueue)
            source.setEventHandler {
                // On the main queue, where the client's lines are printed (`join --state` saves
                // its positions and prints what it held back).
                if let beforeExit { DispatchQueue.main.sync(execute: beforeExit) }
                bird.disconnect()
                // The close frame (1000) is written by the socket's service thread and the
                // client reports no completion for it: without this grace period the server
                // saw 1006 instead of 1000 (checked by hand, see README). The
                // `-> disconnected` line is queued on main and printed if main gets to it.
                signalQueue.asyncAfter(deadline: .now() + closeGracePeriod) { exitNow(0) }
            }
            source.resume()
            sources.append(source)
        }
        return sources
    }

    /// Prints the connection's state changes, errors (unless `quietErrors`) and scheduled
    /// reconnects, and exits 1 when the state reaches `failed`.
    static func printConnection(_ bird: BirdRealtime, printer: LinePrinter, quietErrors: Bool) {
        bird.onConnectionStateChange { previous, current in
            let socket = current == .connected ? bird.connection.connectionId : nil
            printer.print(.state(previous, current, socket: socket, at: .now()))
            if current == .failed { exitSoon(1, message: "the connection failed: the server refused it and it will not be retried") }
        }
        if !quietErrors {
            bird.onError { error in printer.print(.error(error, at: .now())) }
        }
        _ = bird.reconnector.onEvent { event in
            // Called synchronously on the reconnector's thread: hop to the main queue, where
            // the client's own lines are printed, and stamp it there like them, so times
            // never go backwards from one line to the next.
            let attempt: Int, delay: Duration?
            switch event {
            case .scheduled(let number, let wait): (attempt, delay) = (number, wait)
            case .waitingForReachability(let number): (attempt, delay) = (number, nil)
            default: return
            }
            DispatchQueue.main.async { printer.print(.reconnect(attempt: attempt, delay: delay, at: .now())) }
        }
    }

    /// Exits with `status` once the lines already queued on main are printed; a `message` goes
    /// to standard error first as `realtime: message`.
    static func exitSoon(_ status: Int32, message: String?) {
        DispatchQueue.main.async {
            if let message { FileHandle.standardError.write(Data("realtime: \(message)\n".utf8)) }
            exitNow(status)
        }
    }

    /// Flushes standard output and ends the process without running exit handlers: `exit()`
    /// runs C++ static destructors and curl's cleanup while URLSession's and libwebsockets'
    /// threads may still be working (an auth request in flight), which crashed the process
    /// (SIGSEGV, seen on `join` refused with 4001 while its room token was being asked for).
    static func exitNow(_ status: Int32) -> Never {
        // A reader that stopped reading must not keep the process: flush for 0.5 s at most.
        let flushed = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            fflush(nil)
            flushed.signal()
        }
        _ = flushed.wait(timeout: .now() + .milliseconds(500))
        _exit(status)
    }
}
