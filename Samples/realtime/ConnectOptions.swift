/// The options of `realtime connect URL [--subscribe CHANNEL]... [--json] [--quiet-errors]`.
struct ConnectOptions: Sendable, Equatable {
    /// The endpoint, `ws://host:port/app/KEY` (checked by `BirdRealtime.Options(url:)`).
    var url: String
    /// The channels to subscribe to, in order, each once.
    var channels: [String] = []
    /// One JSON object per line instead of plain text.
    var json = false
    /// Leave connection errors out of the output.
    var quietErrors = false

    /// Parses the arguments after `connect`.
    ///
    /// - Parameter arguments: the arguments after the subcommand.
    /// - Throws: `UsageError` for an unknown option, a `--subscribe` without a channel, no URL
    ///   or more than one.
    init(parsing arguments: [String]) throws(UsageError) {
        var scanner = ArgumentScanner(arguments)
        var url: String?
        while let (option, inline) = scanner.next() {
            switch option {
            case nil:
                guard url == nil, let inline else { throw UsageError("connect takes one URL, got another: \(inline ?? "")") }
                url = inline
            case "--subscribe"?:
                let channel = try scanner.value(of: "--subscribe", inline: inline)
                if !channels.contains(channel) { channels.append(channel) }
            case "--json"? where inline == nil:
                json = true
            case "--quiet-errors"? where inline == nil:
                quietErrors = true
            case let option?:
                throw UsageError("unknown option \(option) for connect")
            }
        }
        guard let url else { throw UsageError("connect needs a URL (ws://host:port/app/KEY)") }
        self.url = url
    }
}
