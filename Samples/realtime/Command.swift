/// The `realtime` command line, parsed: a subcommand and its options.
enum Command: Sendable, Equatable {
    /// `--help`, `-h` or `help`: print `usage` and exit 0.
    case help
    /// `realtime connect URL …`.
    case connect(ConnectOptions)
    /// `realtime publish --api URL …`.
    case publish(PublishOptions)

    /// The text `--help` prints.
    static let usage = """
        usage: realtime connect URL [--subscribe CHANNEL]... [--json] [--quiet-errors]
               realtime publish --api URL --app-id ID --key KEY --secret SECRET
                                (--channel CHANNEL... | --room ROOM...) --event NAME --data JSON
               realtime --help

        connect   opens a realtime connection to URL (ws://host:port/app/KEY) and prints one line
                  per state change, channel event, connection error and scheduled reconnect,
                  until SIGINT or SIGTERM (then it disconnects and exits 0)
                  --subscribe CHANNEL  subscribe to CHANNEL (repeatable)
                  --json               one JSON object per line instead of text
                  --quiet-errors       do not print connection errors
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
        guard let subcommand = arguments.first else { throw UsageError("no subcommand (connect or publish)") }
        let rest = Array(arguments.dropFirst())
        if ["--help", "-h", "help"].contains(subcommand) || rest.contains("--help") || rest.contains("-h") { return .help }
        switch subcommand {
        case "connect": return .connect(try ConnectOptions(parsing: rest))
        case "publish": return .publish(try PublishOptions(parsing: rest))
        default: throw UsageError("unknown subcommand \(subcommand) (connect or publish)")
        }
    }
}
