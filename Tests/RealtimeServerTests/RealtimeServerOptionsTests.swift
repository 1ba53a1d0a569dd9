import Foundation
import RealtimeServer
import Testing

@Suite struct RealtimeServerOptionsTests {
    @Test("one app from flags, loopback by default")
    func flags() throws {
        let options = try RealtimeServerOptions(arguments: ["--port", "7000", "--app-id", "1", "--app-key", "k", "--app-secret", "s", "--quiet"])
        #expect(options.host == "127.0.0.1")
        #expect(options.port == 7000)
        #expect(options.apps == [RealtimeApp(id: "1", key: "k", secret: "s")])
        #expect(!options.apps[0].compression)
        #expect(options.quiet)
    }

    @Test("--redis and --node are kept; empty or multi-line values are refused")
    func redisAndNode() throws {
        let app = ["--app-id", "1", "--app-key", "k", "--app-secret", "s"]
        let options = try RealtimeServerOptions(arguments: app + ["--redis", "redis://127.0.0.1:6380", "--node", "a"])
        #expect(options.redis == "redis://127.0.0.1:6380" && options.node == "a")
        #expect(try RealtimeServerOptions(arguments: app).redis == nil)
        #expect(throws: RealtimeServerOptions.ParseError.self) { try RealtimeServerOptions(arguments: app + ["--redis", ""]) }
        #expect(throws: RealtimeServerOptions.ParseError.self) { try RealtimeServerOptions(arguments: app + ["--node", "a\nb"]) }
    }

    @Test("--redis-cluster keeps its seeds as given; with --redis or --data it is refused, empty too")
    func redisCluster() throws {
        let app = ["--app-id", "1", "--app-key", "k", "--app-secret", "s"]
        let options = try RealtimeServerOptions(arguments: app + ["--redis-cluster", "127.0.0.1:7000,127.0.0.1:7001"])
        #expect(options.redisCluster == "127.0.0.1:7000,127.0.0.1:7001" && options.redis == nil)
        #expect(throws: RealtimeServerOptions.ParseError.self) { try RealtimeServerOptions(arguments: app + ["--redis-cluster", ""]) }
        #expect(throws: RealtimeServerOptions.ParseError.self) {
            try RealtimeServerOptions(arguments: app + ["--redis-cluster", "127.0.0.1:7000", "--redis", "redis://127.0.0.1:6379"])
        }
        #expect(throws: RealtimeServerOptions.ParseError.self) { try RealtimeServerOptions(arguments: app + ["--redis-cluster", "127.0.0.1:7000", "--data", "/tmp/x"]) }
    }

    @Test("no storage option keeps rooms in the default data folder ($XDG_STATE_HOME, else ~/.local/state); --memory opts out, --data chooses; --memory goes alone")
    func storageByDefault() throws {
        let app = ["--app-id", "1", "--app-key", "k", "--app-secret", "s"]
        let xdg = try RealtimeServerOptions(arguments: app, environment: ["XDG_STATE_HOME": "/var/lib/state", "HOME": "/home/ann"])
        #expect(xdg.dataDirectory == "/var/lib/state/realtime-server" && xdg.dataDirectoryIsDefault)
        let home = try RealtimeServerOptions(arguments: app, environment: ["XDG_STATE_HOME": "relative", "HOME": "/home/ann"])
        #expect(home.dataDirectory == "/home/ann/.local/state/realtime-server" && home.dataDirectoryIsDefault)
        let memory = try RealtimeServerOptions(arguments: app + ["--memory"], environment: ["HOME": "/home/ann"])
        #expect(memory.dataDirectory == nil && !memory.dataDirectoryIsDefault)
        let chosen = try RealtimeServerOptions(arguments: app + ["--data", "/srv/rooms"], environment: ["HOME": "/home/ann"])
        #expect(chosen.dataDirectory == "/srv/rooms" && !chosen.dataDirectoryIsDefault)
        let redis = try RealtimeServerOptions(arguments: app + ["--redis", "redis://127.0.0.1:6379"], environment: ["HOME": "/home/ann"])
        #expect(redis.dataDirectory == nil)
        #expect(RealtimeServerOptions(host: "127.0.0.1", port: 0, apps: []).dataDirectory == nil, "embedding chooses its store itself")
        #expect(throws: RealtimeServerOptions.ParseError.invalid("no storage option and no $XDG_STATE_HOME or $HOME for the default data folder: give --data DIR (or --memory)")) {
            try RealtimeServerOptions(arguments: app, environment: [:])
        }
        for other in [["--data", "/srv/rooms"], ["--redis", "redis://127.0.0.1:6379"], ["--redis-cluster", "127.0.0.1:7000"]] {
            #expect(throws: RealtimeServerOptions.ParseError.invalid("--memory goes alone: --data, --redis and --redis-cluster each keep the rooms elsewhere")) {
                try RealtimeServerOptions(arguments: app + ["--memory"] + other, environment: ["HOME": "/home/ann"])
            }
        }
        #expect(RealtimeServerOptions.usage.contains("--memory") && RealtimeServerOptions.usage.contains("~/.local/state/realtime-server"))
    }

    @Test("--log-format is text by default, json when asked, refused otherwise")
    func logFormat() throws {
        let app = ["--app-id", "1", "--app-key", "k", "--app-secret", "s"]
        #expect(try RealtimeServerOptions(arguments: app).logFormat == .text)
        #expect(try RealtimeServerOptions(arguments: app + ["--log-format", "json"]).logFormat == .json)
        #expect(throws: RealtimeServerOptions.ParseError.invalid("--log-format must be text or json")) {
            try RealtimeServerOptions(arguments: app + ["--log-format", "xml"])
        }
    }

    @Test("--threads is one service loop per core by default, 1…64 when given, refused otherwise")
    func threads() throws {
        let app = ["--app-id", "1", "--app-key", "k", "--app-secret", "s"]
        #expect(try RealtimeServerOptions(arguments: app).threads == ProcessInfo.processInfo.activeProcessorCount)
        #expect(try RealtimeServerOptions(arguments: app + ["--threads", "1"]).threads == 1)
        #expect(try RealtimeServerOptions(arguments: app + ["--threads", "64"]).threads == 64)
        for bad in ["0", "65", "two"] {
            #expect(throws: RealtimeServerOptions.ParseError.invalid("--threads must be 1…64")) { try RealtimeServerOptions(arguments: app + ["--threads", bad]) }
        }
    }

    @Test("--replay-memory and --replay-rate in MiB, the hub's defaults without them, refused out of range")
    func replayLimits() throws {
        let app = ["--app-id", "1", "--app-key", "k", "--app-secret", "s"]
        let plain = try RealtimeServerOptions(arguments: app)
        #expect(plain.replayMemoryMiB == nil && plain.replayRateMiB == nil)
        let given = try RealtimeServerOptions(arguments: app + ["--replay-memory", "256", "--replay-rate", "8"])
        #expect(given.replayMemoryMiB == 256 && given.replayRateMiB == 8)
        for bad in ["15", "65537", "x"] {
            #expect(throws: RealtimeServerOptions.ParseError.invalid("--replay-memory must be 16…65536 (MiB)")) { try RealtimeServerOptions(arguments: app + ["--replay-memory", bad]) }
        }
        for bad in ["0", "65537", "x"] {
            #expect(throws: RealtimeServerOptions.ParseError.invalid("--replay-rate must be 1…65536 (MiB)")) { try RealtimeServerOptions(arguments: app + ["--replay-rate", bad]) }
        }
    }

    @Test("several apps from a config file")
    func config() throws {
        let path = NSTemporaryDirectory() + "apps-\(getpid()).json"
        try #"{"apps":[{"id":"1","key":"a","secret":"x"},{"id":"2","key":"b","secret":"y","max_connections":5,"compression":true}]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        let options = try RealtimeServerOptions(arguments: ["--config", path, "--host", "::1"])
        #expect(options.apps.map(\.key) == ["a", "b"])
        #expect(options.apps[1].maxConnections == 5)
        #expect(options.apps.map(\.compression) == [false, true])
        #expect(options.host == "::1")
    }

    @Test("a signin deadline from the flag applies to every app; from the config file per app")
    func userAuthenticationTimeout() throws {
        let flag = try RealtimeServerOptions(arguments: ["--app-id", "1", "--app-key", "k", "--app-secret", "s", "--user-authentication-timeout", "30"])
        #expect(flag.apps.map(\.userAuthenticationTimeout) == [30])
        let path = NSTemporaryDirectory() + "signin-apps-\(getpid()).json"
        try #"{"apps":[{"id":"1","key":"a","secret":"x","user_authentication_timeout":15},{"id":"2","key":"b","secret":"y"}]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        #expect(try RealtimeServerOptions(arguments: ["--config", path]).apps.map(\.userAuthenticationTimeout) == [15, nil])
        #expect(RealtimeServerOptions.usage.contains("--user-authentication-timeout S"))
        try #"{"apps":[{"id":"1","key":"a","secret":"x","user_authentication_timeout":0}]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        #expect(throws: RealtimeServerOptions.ParseError.self) { try RealtimeServerOptions(arguments: ["--config", path]) }
    }

    @Test("a webhook URL from the flag applies to every app; from the config file per app")
    func webhookURL() throws {
        let flag = try RealtimeServerOptions(arguments: ["--app-id", "1", "--app-key", "k", "--app-secret", "s", "--webhook", "http://127.0.0.1:9/hooks"])
        #expect(flag.apps.map(\.webhookURL) == ["http://127.0.0.1:9/hooks"])
        let path = NSTemporaryDirectory() + "webhook-apps-\(getpid()).json"
        try #"{"apps":[{"id":"1","key":"a","secret":"x","webhook_url":"https://backend.test/hooks"},{"id":"2","key":"b","secret":"y"}]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        #expect(try RealtimeServerOptions(arguments: ["--config", path]).apps.map(\.webhookURL) == ["https://backend.test/hooks", nil])
        #expect(RealtimeServerOptions.usage.contains("--webhook URL"))
    }

    @Test("--help asks for the usage")
    func help() {
        #expect(throws: RealtimeServerOptions.ParseError.helpRequested) { try RealtimeServerOptions(arguments: ["--help"]) }
        #expect(RealtimeServerOptions.usage.contains("--config FILE"))
    }

    @Test("a config with a non-positive limit is refused")
    func badConfigLimits() throws {
        let path = NSTemporaryDirectory() + "bad-apps-\(getpid()).json"
        try #"{"apps":[{"id":"1","key":"a","secret":"x","activity_timeout":-5}]}"#.write(toFile: path, atomically: true, encoding: .utf8)
        defer { unlink(path) }
        #expect(throws: RealtimeServerOptions.ParseError.self) { try RealtimeServerOptions(arguments: ["--config", path]) }
    }

    @Test("bad options are refused with a message", arguments: [
        ["--port"], ["--port", "70000", "--app-id", "1", "--app-key", "k", "--app-secret", "s"], ["--bogus"], [],
        ["--app-id", "1"], ["--config", "/nonexistent.json"],
        ["--app-id", "1", "--app-key", "k", "--app-secret", "s", "--activity-timeout", "0"],
        ["--app-id", "1", "--app-key", "k", "--app-secret", "s", "--user-authentication-timeout", "0"],
        ["--app-id", "1", "--app-key", "k", "--app-secret", "s", "--user-authentication-timeout", "soon"],
        ["--app-id", "1", "--app-key", "k", "--app-secret", "s", "--user-authentication-timeout"],
        ["--app-id", "1", "--app-key", "k", "--app-secret", "s", "--webhook", "ftp://example.test/hook"],
        ["--app-id", "1", "--app-key", "k", "--app-secret", "s", "--webhook", "not a url"],
    ])
    func refusals(arguments: [String]) {
        #expect(throws: RealtimeServerOptions.ParseError.self) { try RealtimeServerOptions(arguments: arguments) }
    }
}
