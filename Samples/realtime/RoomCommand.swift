import Dispatch
import Foundation
import Realtime

/// `realtime join` and `realtime history`: a `BirdRealtime` client in rooms, printing a line per
/// state change, room event, member event and error (`join`, until SIGINT or SIGTERM), or one
/// history page (`history`, then exit).
///
/// Every handler runs on the main queue (the client's delivery queue), so lines come out in
/// the order the client reported them. Used from the main thread only (`main.swift`).
final class RoomCommand {
    /// The client.
    let bird: BirdRealtime
    /// What to join and how to print.
    let options: RoomOptions
    private let printer: LinePrinter
    private let journal: PositionJournal?
    private let signalSources: [any DispatchSourceSignal]

    /// Creates the client and installs the SIGINT and SIGTERM handlers (disconnect, then exit
    /// 0); nothing is printed or opened until `join()` or `history()`.
    ///
    /// - Throws: `RealtimeError` (kind `.transport`) when the URL is not
    ///   `ws(s)://host[:port]/app/KEY`; `UsageError` when `--state` names an unreadable file.
    init(options: RoomOptions) throws {
        var clientOptions = try BirdRealtime.Options(url: options.url)
        clientOptions.deliveryQueue = .main
        clientOptions.roomAuthEndpoint = options.authEndpoint
        clientOptions.authHeaders = options.headers
        let bird = BirdRealtime(options: clientOptions)
        self.bird = bird
        self.options = options
        var journal: PositionJournal?
        if let path = options.statePath { journal = try PositionJournal(path: path) }
        self.journal = journal
        printer = LinePrinter(json: options.json)
        var beforeExit: (@Sendable () -> Void)?
        if let journal { beforeExit = { journal.flush() } }
        signalSources = ConnectCommand.installSignalHandlers(disconnecting: bird, beforeExit: beforeExit)
    }

    /// Joins the rooms (and subscribes to `--subscribe` channels) and prints until a signal ends
    /// the process; exits 1 when the connection reaches `failed` or every room has failed
    /// (nothing will ever happen after that).
    func join() -> Never {
        let printer = printer
        let bird = bird
        ConnectCommand.printConnection(bird, printer: printer, quietErrors: options.quietErrors)
        let names = options.rooms
        let journal = journal
        for name in names {
            let room = bird.join(name, from: journal?.position(of: name))
            room.onAny { event, data, meta in
                let line = OutputLine.room(name, event: event, data: data, meta: meta, at: .now())
                // Printed, then the room's position after this event recorded (the client moves
                // it before handlers run): the file never holds a position past what was printed.
                printer.print(line)
                journal?.advance(room: name, to: room.position)
                if room.state == .failed, names.allSatisfy({ bird.room($0)?.state == .failed }) {
                    ConnectCommand.exitSoon(1, message: "every room failed")
                }
            }
        }
        for name in options.channels {
            bird.subscribe(name).bindAll { event in printer.print(.event(event, at: .now())) }
        }
        bird.connect()
        dispatchMain()
    }

    /// Joins the room, prints one history page (a line per event, then a `page` line) and
    /// exits 0; exits 1 with the reason when the room fails or the request is refused.
    func history() -> Never {
        let printer = printer
        let bird = bird
        let options = options
        let name = options.rooms[0]
        bird.onConnectionStateChange { _, current in
            if current == .failed { ConnectCommand.exitSoon(1, message: "the connection failed") }
        }
        let room = bird.join(name)
        bird.connect()
        Task { @MainActor in
            do {
                let page = try await room.history(before: options.before, limit: options.limit)
                for event in page.events {
                    printer.print(.room(name, event: event.event, data: event.data, meta: event.meta, at: .now()))
                }
                printer.print(.page(name, more: page.more, at: .now()))
                bird.disconnect()
                ConnectCommand.exitSoon(0, message: nil)
            } catch {
                ConnectCommand.exitSoon(1, message: "history of \(name): \(error)")
            }
        }
        dispatchMain()
    }
}
