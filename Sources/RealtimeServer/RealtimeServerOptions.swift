import Foundation

/// Command-line options of `realtime-server`, parsed without side effects so they can be tested.
///
/// ```
/// realtime-server --port P --app-id ID --app-key KEY --app-secret SECRET [--host H] [--quiet]
/// realtime-server --port P --config apps.json [--host H] [--quiet]
/// … [--redis redis://host:port | --redis /path/redis.sock | --redis-cluster host:port,… | --data DIR | --memory] [--node NAME] [--threads N]
/// ```
/// With no storage option the command line keeps rooms in ``defaultDataDirectory(environment:)``
/// (SQLite): a server whose promise is replay keeps what it promised across a restart unless told
/// otherwise.
/// `apps.json`: `{"apps": [{"id": …, "key": …, "secret": …, "max_connections"?: …,
/// "activity_timeout"?: …, "user_authentication_timeout"?: …}]}`.
public struct RealtimeServerOptions: Sendable, Equatable {
    /// The address to bind (loopback by default: a development server is not exposed).
    public var host = "127.0.0.1"
    /// The TCP port; 0 picks a free one. 6001 for the command line (`init(arguments:)`);
    /// `init(host:port:apps:)` defaults to 0, a free port, for embedding and tests.
    public var port: UInt16 = 6001
    /// The apps served.
    public var apps: [RealtimeApp] = []
    /// No connection log on stderr: the executable's `--quiet`. An embedded `RealtimeServer`
    /// logs only through its `log:` argument, whatever this says.
    public var quiet = false
    /// The largest WebSocket message accepted, in bytes; a larger one closes the connection
    /// with 1009 (RFC 6455 §7.4.1). 64 KiB by default.
    public var maxMessageSize = 64 * 1024
    /// Where rooms keep their history when it is not this process's memory: a Redis URL
    /// (`redis://host:port`) or unix socket path, checked by the executable (`RealtimeCluster`'s
    /// `RedisEndpoint`); `nil` keeps everything in memory on this node.
    public var redis: String?
    /// The seed nodes of a Redis Cluster (Redis 7) that keeps rooms' history and carries the
    /// events between nodes (`--redis-cluster host:port[,host:port…]`), as given, checked by
    /// the executable; `nil` when the cluster is not on Redis Cluster. Not with `redis`.
    public var redisCluster: String?
    /// A folder where a single node keeps its rooms' history and positions across restarts
    /// (`--data DIR`: `SQLiteRoomStore` in `DIR/rooms.sqlite3`); `nil` keeps them in memory, so
    /// a restart starts every room in a new epoch. Not with `redis`, which keeps them already.
    /// The command line (`init(arguments:environment:)`) sets ``defaultDataDirectory(environment:)``
    /// when no storage option is given, and `nil` for `--memory`; `init(host:port:apps:)`, for
    /// embedding and tests, leaves it `nil`.
    public var dataDirectory: String?
    /// `dataDirectory` is the default folder, chosen because no storage option was given (so a
    /// folder that cannot be used is reported with the options that choose another).
    public var dataDirectoryIsDefault = false
    /// This node's name in its log lines (`--node`), for a server running beside others.
    public var node: String?
    /// How the executable writes its log lines on stderr (`--log-format`).
    public var logFormat = LogFormat.text
    /// Service loops serving the connections, each a thread of its own (`--threads`): one per
    /// core by default. The listener hands accepted connections to them in turn; the hub's
    /// state is shared, locked only to decide.
    public var threads = ProcessInfo.processInfo.activeProcessorCount
    /// Mebibytes queued for clients on the node past which streamed replays wait
    /// (`--replay-memory`; `RealtimeHub.Configuration.replayMemoryBudget`, 128 when `nil`).
    public var replayMemoryMiB: Int?
    /// Mebibytes of streamed replay a second the node sends, its connections sharing them
    /// (`--replay-rate`; `RealtimeHub.Configuration.replayBytesPerSecond`, 32 when `nil`).
    public var replayRateMiB: Int?
    /// The token that opens the operator's console (`/console`) for every app
    /// (`--console-token`, or `$BIRD_CONSOLE_TOKEN`, which `ps` does not show), or `nil`: the
    /// console is then open only for apps with their own `console_token`, else off.
    public var consoleToken: String?

    /// The executable's log line format.
    public enum LogFormat: String, Sendable, Equatable {
        /// `realtime-server[node]: message`.
        case text
        /// One JSON object a line: `{"message": …, "node": …, "time": "2026-12-01T17:25:00.123Z"}`
        /// (`node` only with `--node`), for log collectors.
        case json
    }

    /// Options for a server on `host`:`port` serving `apps` (for embedding and tests).
    ///
    /// - Parameters:
    ///   - host: the address to bind.
    ///   - port: the port; 0 picks a free one.
    ///   - apps: the apps served.
    public init(host: String = "127.0.0.1", port: UInt16 = 0, apps: [RealtimeApp]) {
        self.host = host
        self.port = port
        self.apps = apps
    }

    /// Why options are refused.
    public enum ParseError: Error, Equatable, CustomStringConvertible {
        /// `--help` was asked for: print `usage` and exit successfully.
        case helpRequested
        /// An option is unknown, lacks its value, or has a bad one.
        case invalid(String)
        /// The config file cannot be read or decoded.
        case config(String)

        /// The message shown to the user.
        public var description: String {
            switch self {
            case .helpRequested: return RealtimeServerOptions.usage
            case .invalid(let text): return text
            case .config(let text): return "config: \(text)"
            }
        }
    }

    /// The usage line.
    public static let usage = """
        usage: realtime-server [--host H] [--port P] (--app-id ID --app-key KEY --app-secret SECRET | --config FILE)
                               [--activity-timeout S] [--max-connections N] [--user-authentication-timeout S]
                               [--webhook URL] [--data DIR | --memory | --redis URL | --redis-cluster NODES] [--node NAME] [--threads N] [--replay-memory MIB] [--replay-rate MIB]
                               [--log-format text|json] [--compression] [--console-token TOKEN] [--quiet]
          --host H             address to bind (127.0.0.1)
          --port P             TCP port, 0 for a free one (6001); the bound port is printed as "port N" on stdout
          --config FILE        JSON: {"apps": [{"id": "1", "key": "…", "secret": "…", "max_connections": 100000, "activity_timeout": 120,
                               "user_authentication_timeout": 30, "webhook_url": "http://…", "compression": false,
                               "console_token": "…"}]}
          --activity-timeout S seconds of silence before the server pings a client (120)
          --max-connections N  connections per app; one more is closed with 4100 (100000)
          --user-authentication-timeout S
                               connections must sign in within S seconds, else they are closed with 4009 (off)
          --webhook URL        post Pusher-signed webhooks (channel_occupied/vacated, member_added/removed,
                               client_event, room_member_added/removed, room_event for rooms whose rule
                               asks) to URL, for every app (off)
          --redis URL          run as one node of a cluster on Redis (redis://host:port or a unix socket path): rooms'
                               history in Redis and events fanned out over its pub/sub, so every node using the same
                               Redis delivers, resumes and pages every room and channel; one node in memory when left out
          --redis-cluster NODES
                               the same on a Redis Cluster (Redis 7), given by one or more of its nodes (host:port,host:port):
                               each room's keys on one slot, its events on that slot's shard (SPUBLISH/SSUBSCRIBE); a shard
                               that is down stops only its rooms and channels, which a failover brings back
          --data DIR           one node that keeps its rooms' history and positions in DIR (SQLite, DIR/rooms.sqlite3):
                               restarted, even after SIGKILL, every room keeps its epoch and members resume from their
                               positions. The default: $XDG_STATE_HOME/realtime-server, else ~/.local/state/realtime-server
                               (one server at a time uses a folder: give a second one its own --data, or --memory)
          --memory             keep rooms in this process's memory only: a restart starts every room in a new epoch and
                               members that come back are told their events were not recovered
          --node NAME          this node's name, at the start of each log line
          --threads N          service loops (threads) serving connections, 1…64 (one per core)
          --replay-memory MIB  bytes queued for clients on this node past which replays wait, 16…65536 MiB (128); a
                               client whose queue stays over 512 KiB for 10 s while it is passed is dropped
          --replay-rate MIB    replayed bytes a second on this node, 1…65536 MiB (32), each replaying connection an equal
                               share (and at most 16 MiB a second alone)
          --log-format F       text (the default) or json: one {"message", "time"} object a line ("node" too with --node), libwebsockets' lines included
          --compression        accept permessage-deflate (RFC 7692, offered by browsers) for every app: replays about 8
                               times smaller, up to about 160 KiB of zlib state per compressing connection, and such
                               clients' messages limited to 4 KiB inflated a read (1009 past it); off by default
          --console-token TOKEN
                               serve the operator's console at /console for every app to whoever gives TOKEN (at
                               least 16 characters; $BIRD_CONSOLE_TOKEN too, kept out of ps); an app's own
                               "console_token" opens it for that app alone; off without either
          --quiet              no connection log on stderr
        """

    static func isHTTPURL(_ text: String) -> Bool {
        guard let url = URL(string: text), let scheme = url.scheme?.lowercased(), url.host != nil else { return false }
        return scheme == "http" || scheme == "https"
    }

    /// The folder a server keeps its rooms in when no storage option is given:
    /// `$XDG_STATE_HOME/realtime-server`, else `$HOME/.local/state/realtime-server` (the XDG Base
    /// Directory Specification's place for state kept across restarts); `nil` when neither
    /// variable holds an absolute path.
    ///
    /// - Parameter environment: the process's environment.
    public static func defaultDataDirectory(environment: [String: String]) -> String? {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return (state as NSString).appendingPathComponent("realtime-server") }
        guard let home = environment["HOME"], home.hasPrefix("/") else { return nil }
        return (home as NSString).appendingPathComponent(".local/state/realtime-server")
    }

    /// Parses arguments (without the program name).
    ///
    /// - Parameters:
    ///   - arguments: the command line.
    ///   - environment: the variables that place the default data folder
    ///     (``defaultDataDirectory(environment:)``); this process's by default.
    /// - Throws: `ParseError` naming the offending option.
    public init(arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment) throws(ParseError) {
        var values: [String: String] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--quiet":
                quiet = true
            case "--compression":
                values[argument] = ""
            case "--memory":
                values[argument] = ""
            case "--help", "-h":
                throw .helpRequested
            case "--host", "--port", "--app-id", "--app-key", "--app-secret", "--config", "--activity-timeout", "--max-connections",
                 "--user-authentication-timeout", "--webhook", "--redis", "--redis-cluster", "--data", "--node", "--log-format", "--threads", "--replay-memory", "--replay-rate", "--console-token":
                guard index + 1 < arguments.count else { throw .invalid("\(argument) needs a value") }
                values[argument] = arguments[index + 1]
                index += 1
            default:
                throw .invalid("unknown option \(argument)")
            }
            index += 1
        }
        if let host = values["--host"] { self.host = host }
        if let format = values["--log-format"] {
            guard let logFormat = LogFormat(rawValue: format) else { throw .invalid("--log-format must be text or json") }
            self.logFormat = logFormat
        }
        if let text = values["--port"] {
            guard let port = UInt16(text) else { throw .invalid("--port must be 0…65535") }
            self.port = port
        }
        if let path = values["--config"] {
            guard let data = FileManager.default.contents(atPath: path) else { throw .config("cannot read \(path)") }
            struct File: Decodable { var apps: [RealtimeApp] }
            do {
                apps = try JSONDecoder().decode(File.self, from: data).apps
            } catch {
                throw .config("\(path) is not {\"apps\": [{\"id\", \"key\", \"secret\"}]}")
            }
        }
        if let id = values["--app-id"], let key = values["--app-key"], let secret = values["--app-secret"] {
            apps.append(RealtimeApp(id: id, key: key, secret: secret))
        } else if values["--app-id"] != nil || values["--app-key"] != nil || values["--app-secret"] != nil {
            throw .invalid("--app-id, --app-key and --app-secret go together")
        }
        guard !apps.isEmpty else { throw .invalid("no app: give --app-id/--app-key/--app-secret or --config") }
        if let text = values["--activity-timeout"] {
            guard let seconds = Int(text), seconds > 0 else { throw .invalid("--activity-timeout must be a positive number of seconds") }
            for index in apps.indices { apps[index].activityTimeout = seconds }
        }
        if values["--compression"] != nil {
            for index in apps.indices { apps[index].compression = true }
        }
        if let text = values["--max-connections"] {
            guard let limit = Int(text), limit > 0 else { throw .invalid("--max-connections must be positive") }
            for index in apps.indices { apps[index].maxConnections = limit }
        }
        if let text = values["--user-authentication-timeout"] {
            guard let seconds = Int(text), seconds > 0 else { throw .invalid("--user-authentication-timeout must be a positive number of seconds") }
            for index in apps.indices { apps[index].userAuthenticationTimeout = seconds }
        }
        if let redis = values["--redis"] {
            guard !redis.isEmpty else { throw .invalid("--redis needs redis://host:port or a socket path") }
            self.redis = redis
        }
        if let seeds = values["--redis-cluster"] {
            guard !seeds.isEmpty else { throw .invalid("--redis-cluster needs host:port[,host:port…]") }
            guard values["--redis"] == nil else { throw .invalid("--redis and --redis-cluster go apart: one Redis, or a Redis Cluster") }
            self.redisCluster = seeds
        }
        if let data = values["--data"] {
            guard !data.isEmpty, !data.contains("\u{0}") else { throw .invalid("--data needs a folder") }
            guard values["--redis"] == nil, values["--redis-cluster"] == nil else {
                throw .invalid("--data is for a single node: with --redis or --redis-cluster, Redis keeps the rooms")
            }
            self.dataDirectory = data
        }
        if values["--memory"] != nil {
            guard values["--data"] == nil, values["--redis"] == nil, values["--redis-cluster"] == nil else {
                throw .invalid("--memory goes alone: --data, --redis and --redis-cluster each keep the rooms elsewhere")
            }
        } else if values["--data"] == nil, values["--redis"] == nil, values["--redis-cluster"] == nil {
            guard let folder = Self.defaultDataDirectory(environment: environment) else {
                throw .invalid("no storage option and no $XDG_STATE_HOME or $HOME for the default data folder: give --data DIR (or --memory)")
            }
            dataDirectory = folder
            dataDirectoryIsDefault = true
        }
        if let node = values["--node"] {
            guard !node.isEmpty, node.count <= 64, !node.contains(where: \.isNewline) else { throw .invalid("--node must be 1…64 characters on one line") }
            self.node = node
        }
        if let text = values["--threads"] {
            guard let threads = Int(text), (1...64).contains(threads) else { throw .invalid("--threads must be 1…64") }
            self.threads = threads
        }
        if let text = values["--replay-memory"] {
            guard let megabytes = Int(text), (16...65_536).contains(megabytes) else { throw .invalid("--replay-memory must be 16…65536 (MiB)") }
            replayMemoryMiB = megabytes
        }
        if let text = values["--replay-rate"] {
            guard let megabytes = Int(text), (1...65_536).contains(megabytes) else { throw .invalid("--replay-rate must be 1…65536 (MiB)") }
            replayRateMiB = megabytes
        }
        if let token = values["--console-token"] ?? environment["BIRD_CONSOLE_TOKEN"].flatMap({ $0.isEmpty ? nil : $0 }) {
            consoleToken = token
        }
        let tokens = [consoleToken].compactMap { $0 } + apps.compactMap(\.consoleToken)
        guard tokens.allSatisfy({ $0.count >= ConsoleAccess.minimumTokenLength && !$0.contains(where: \.isNewline) }) else {
            throw .invalid("a console token is at least \(ConsoleAccess.minimumTokenLength) characters on one line")
        }
        guard Set(tokens).count == tokens.count else { throw .invalid("each console token opens one thing: the server's and each app's must differ") }
        if let url = values["--webhook"] {
            for index in apps.indices { apps[index].webhookURL = url }
        }
        guard apps.allSatisfy({ app in app.webhookURL.map(Self.isHTTPURL) ?? true }) else {
            throw .invalid("webhook URLs must be http:// or https:// URLs")
        }
        guard apps.allSatisfy({ $0.activityTimeout > 0 && $0.maxConnections > 0 && ($0.userAuthenticationTimeout ?? 1) > 0 }) else {
            throw .invalid("activity_timeout, max_connections and user_authentication_timeout must be positive")
        }
        guard Set(apps.map(\.key)).count == apps.count, Set(apps.map(\.id)).count == apps.count else {
            throw .invalid("app ids and keys must be unique")
        }
    }
}
