import Foundation

/// The options of `realtime publish --api URL --app-id ID --key KEY --secret SECRET
/// (--channel CHANNEL... | --room ROOM...) --event NAME --data JSON`.
struct PublishOptions: Sendable, Equatable {
    /// The HTTP API's base URL (`http://127.0.0.1:6001`).
    var api: String
    /// The app id (the `{id}` of `/apps/{id}/events`).
    var appID: String
    /// The app key (`auth_key`).
    var key: String
    /// The app secret that signs the request.
    var secret: String
    /// The channels to publish to (Pusher allows 1 to 100).
    var channels: [String]
    /// The rooms to publish to instead (1 to 100; docs/rooms-protocol.md "HTTP API").
    var rooms: [String] = []
    /// The event name.
    var event: String
    /// The event data: JSON text, sent as the body's `data` string.
    var data: String

    /// Parses the arguments after `publish`.
    ///
    /// - Parameter arguments: the arguments after the subcommand.
    /// - Throws: `UsageError` for an unknown option, an option without a value, a missing
    ///   required option, an app id that is not a single path segment of letters, digits,
    ///   `-`, `_` and `.`, or `--data` that is not JSON.
    init(parsing arguments: [String]) throws(UsageError) {
        var scanner = ArgumentScanner(arguments)
        var values: [String: String] = [:]
        var channels: [String] = []
        var rooms: [String] = []
        while let (option, inline) = scanner.next() {
            switch option {
            case nil:
                throw UsageError("unexpected argument \(inline ?? "") for publish")
            case "--channel"?:
                channels.append(try scanner.value(of: "--channel", inline: inline))
            case "--room"?:
                rooms.append(try scanner.value(of: "--room", inline: inline))
            case let option? where ["--api", "--app-id", "--key", "--secret", "--event", "--data"].contains(option):
                values[option] = try scanner.value(of: option, inline: inline)
            case let option?:
                throw UsageError("unknown option \(option) for publish")
            }
        }
        func required(_ option: String) throws(UsageError) -> String {
            guard let value = values[option] else { throw UsageError("publish needs \(option)") }
            return value
        }
        api = try required("--api")
        appID = try required("--app-id")
        key = try required("--key")
        secret = try required("--secret")
        event = try required("--event")
        data = try required("--data")
        guard channels.isEmpty != rooms.isEmpty else { throw UsageError("publish needs --channel or --room (not both)") }
        self.channels = channels
        self.rooms = rooms
        let pathSafe = appID.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-_.".unicodeScalars.contains($0)) }
        guard pathSafe, appID != ".", appID != ".." else {
            throw UsageError("--app-id must be letters, digits, -, _ and . only: \(appID)")
        }
        guard (try? JSONSerialization.jsonObject(with: Data(data.utf8), options: .fragmentsAllowed)) != nil else {
            throw UsageError("--data is not JSON: \(data)")
        }
    }
}
