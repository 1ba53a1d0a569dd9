import Foundation

/// The options of `realtime join URL ROOM... --auth-endpoint URL [--header 'K: V']...
/// [--subscribe CHANNEL]... [--state FILE] [--json] [--quiet-errors]` and `realtime history URL ROOM
/// --auth-endpoint URL [--before ID] [--limit N] [--header 'K: V']... [--json]`.
struct RoomOptions: Sendable, Equatable {
    /// The endpoint, `ws://host:port/app/KEY` (checked by `BirdRealtime.Options(url:)`).
    var url: String
    /// The rooms, in order, each once (one for `history`).
    var rooms: [String]
    /// The app's room auth route (docs/rooms-protocol.md "Auth route").
    var authEndpoint: URL
    /// Headers sent to the auth route (a session cookie, a bearer token, `X-User: ann`).
    var headers: [String: String] = [:]
    /// One JSON object per line instead of plain text.
    var json = false
    /// Leave connection errors out of the output (`join`).
    var quietErrors = false
    /// `join`: public channels subscribed to beside the rooms, in order, each once (as
    /// `connect --subscribe`).
    var channels: [String] = []
    /// `join --state FILE`: the rooms' positions, read at start and kept there (`PositionJournal`).
    var statePath: String?
    /// `history`: only events older than this id.
    var before: UInt64?
    /// `history`: events wanted, 1…100 (50).
    var limit = 50

    /// Parses the arguments after `join` or `history`.
    ///
    /// - Parameters:
    ///   - arguments: the arguments after the subcommand.
    ///   - history: parse `history`'s options (`--before`, `--limit`, exactly one room).
    /// - Throws: `UsageError` for an unknown option, a missing value or URL, no room (or more
    ///   than one for `history`), a header without `:`, a limit outside 1…100.
    init(parsing arguments: [String], history: Bool) throws(UsageError) {
        let command = history ? "history" : "join"
        var scanner = ArgumentScanner(arguments)
        var positional: [String] = []
        var endpoint: String?
        while let (option, inline) = scanner.next() {
            switch option {
            case nil:
                if let inline { positional.append(inline) }
            case "--auth-endpoint"?:
                endpoint = try scanner.value(of: "--auth-endpoint", inline: inline)
            case "--header"?:
                let header = try scanner.value(of: "--header", inline: inline)
                guard let colon = header.firstIndex(of: ":"), colon != header.startIndex else {
                    throw UsageError("--header needs 'Name: value', got \(header)")
                }
                headers[String(header[..<colon]).trimmingCharacters(in: .whitespaces)] =
                    String(header[header.index(after: colon)...]).trimmingCharacters(in: .whitespaces)
            case "--json"? where inline == nil:
                json = true
            case "--quiet-errors"? where inline == nil && !history:
                quietErrors = true
            case "--state"? where !history:
                statePath = try scanner.value(of: "--state", inline: inline)
            case "--subscribe"? where !history:
                let channel = try scanner.value(of: "--subscribe", inline: inline)
                if !channels.contains(channel) { channels.append(channel) }
            case "--before"? where history:
                let text = try scanner.value(of: "--before", inline: inline)
                guard let id = UInt64(text), id > 0 else { throw UsageError("--before needs an event id (1 or more), got \(text)") }
                before = id
            case "--limit"? where history:
                let text = try scanner.value(of: "--limit", inline: inline)
                guard let number = Int(text), (1...100).contains(number) else { throw UsageError("--limit needs 1…100, got \(text)") }
                limit = number
            case let option?:
                throw UsageError("unknown option \(option) for \(command)")
            }
        }
        guard let url = positional.first else { throw UsageError("\(command) needs a URL (ws://host:port/app/KEY)") }
        var rooms: [String] = []
        for room in positional.dropFirst() where !rooms.contains(room) { rooms.append(room) }
        guard !rooms.isEmpty else { throw UsageError("\(command) needs a room after the URL") }
        guard !history || rooms.count == 1 else { throw UsageError("history takes one room, got \(rooms.count)") }
        guard let endpoint, let authURL = URL(string: endpoint), let scheme = authURL.scheme?.lowercased(),
              scheme == "http" || scheme == "https", authURL.host != nil else {
            throw UsageError("\(command) needs --auth-endpoint http(s)://host/path (the app's room auth route)")
        }
        self.url = url
        self.rooms = rooms
        authEndpoint = authURL
    }
}
