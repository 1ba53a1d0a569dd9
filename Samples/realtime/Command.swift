/// The `realtime` command line, parsed: a subcommand and its options.
enum Command: Sendable, Equatable {
    /// `--help`, `-h` or `help`: print `usage` and exit 0.
    case help
    /// `realtime connect URL …`.
    case connect(ConnectOptions)
    /// `realtime publish --api URL …`.
    case publish(PublishOptions)
    /// `realtime join URL ROOM… --auth-endpoint URL …`.
    case join(RoomOptions)
    /// `realtime history URL ROOM --auth-endpoint URL …`.
    case history(RoomOptions)

    /// The text `--help` prints.
    static let usage = """
        usage: realtime connect URL [--subscribe CHANNEL]... [--json] [--quiet-errors]
               realtime join URL ROOM... --auth-endpoint URL [--header 'K: V']... [--subscribe CHANNEL]... [--state FILE]
                             [--json] [--quiet-errors]
               realtime history URL ROOM --auth-endpoint URL [--before ID] [--limit N]
                                [--header 'K: V']... [--json]
               realtime publish --api URL --app-id ID --key KEY --secret SECRET
                                (--channel CHANNEL... | --room ROOM...) --event NAME --data JSON
               realtime --help

        connect   opens a realtime connection to URL (ws://host:port/app/KEY) and prints one line
                  per state change, channel event, connection error and scheduled reconnect,
                  until SIGINT or SIGTERM (then it disconnects and exits 0); exit 1 when the
                  connection fails (the server refused it: it is never retried)
                  --subscribe CHANNEL  subscribe to CHANNEL (repeatable)
                  --json               one JSON object per line instead of text
                  --quiet-errors       do not print connection errors
        join      joins the rooms (tokens from the auth route, one request for all) and prints
                  one line per state change, room event (kind room, with meta id, at, from,
                  replayed), member event (kind member), room state (joined, count, kicked)
                  and error, until SIGINT or SIGTERM; rejoins from each room's position after
                  every reconnect; exit 1 when the connection or every room fails
                  --auth-endpoint URL  the app's room auth route (POST {"rooms": [...]})
                  --header 'K: V'      a header for the auth route (repeatable)
                  --state FILE         keep each room's position in FILE (JSON, written atomically
                                       at most every 100 ms and at exit) and rejoin from it when
                                       started again: the events missed meanwhile come replayed;
                                       a position is saved only after its line was printed, so
                                       after a SIGKILL nothing is lost and the last 100 ms may
                                       be printed again (same meta.id: drop them by id)
        history   joins ROOM and prints one history page, oldest first, then a page line
                  (more: older events are kept); exit 1 when the room or request is refused
                  --before ID          only events older than ID
                  --limit N            1 to 100 events (50)
        publish   publishes one event through the server's HTTP API (Pusher's signed REST API,
                  POST URL/apps/ID/events, or POST URL/apps/ID/room_events with --room) and
                  prints the server's answer; exit 1 when the server refuses it, cannot be
                  reached or does not answer within 10 s
        """

    /// Parses the arguments after the program name. Options take their value as the next
    /// argument or after `=` (`--subscribe=prices`).
    ///
    /// - Parameter arguments: `CommandLine.arguments.dropFirst()`.
    /// - Returns: the command.
    /// - Throws: `UsageError` for a missing or unknown subcommand, an unknown option, an option
    ///   without its value, a missing required option or a stray argument.
    static func parse(_ arguments: [String]) throws(UsageError) -> Command {
        guard let subcommand = arguments.first else { throw UsageError("no subcommand (connect, join, history or publish)") }
        let rest = Array(arguments.dropFirst())
        if ["--help", "-h", "help"].contains(subcommand) || rest.contains("--help") || rest.contains("-h") { return .help }
        switch subcommand {
        case "connect": return .connect(try ConnectOptions(parsing: rest))
        case "publish": return .publish(try PublishOptions(parsing: rest))
        case "join": return .join(try RoomOptions(parsing: rest, history: false))
        case "history": return .history(try RoomOptions(parsing: rest, history: true))
        default: throw UsageError("unknown subcommand \(subcommand) (connect, join, history or publish)")
        }
    }
}
