// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "swift-reconnect",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Reachability", targets: ["Reachability"]),
        .library(name: "ReachabilityNetlink", targets: ["ReachabilityNetlink"]),
        .library(name: "Reconnect", targets: ["Reconnect"]),
        .library(name: "LineStream", targets: ["LineStream"]),
        .library(name: "WebSocket", targets: ["WebSocket"]),
        .library(name: "RealtimeProtocol", targets: ["RealtimeProtocol"]),
        .library(name: "RealtimeServer", targets: ["RealtimeServer"]),
        .library(name: "Redis", targets: ["Redis"]),
        .library(name: "RealtimeCluster", targets: ["RealtimeCluster"]),
        .library(name: "Realtime", targets: ["Realtime"]),
        .library(name: "RealtimeBackend", targets: ["RealtimeBackend"]),
        .library(name: "BirdRealtime", targets: ["BirdRealtime"]),
        .library(name: "ReconnectTesting", targets: ["ReconnectTesting"]),
        .library(name: "NetworkLab", targets: ["NetworkLab"]),
        .library(name: "RealtimeTesting", targets: ["RealtimeTesting"]),
        .executable(name: "realtime-server", targets: ["realtime-server"]),
        .executable(name: "reachability-monitor", targets: ["reachability-monitor"]),
        .executable(name: "realtime", targets: ["realtime"]),
        .executable(name: "realtime-demo", targets: ["realtime-demo"]),
        .executable(name: "room-backend", targets: ["room-backend"]),
        .executable(name: "browser-demo", targets: ["browser-demo"]),
        .executable(name: "line-server", targets: ["line-server"]),
        .executable(name: "line-client", targets: ["line-client"]),
        .executable(name: "xmpp-client", targets: ["xmpp-client"]),
        .executable(name: "realtime-bench", targets: ["realtime-bench"]),
        .executable(name: "rooms-bench", targets: ["rooms-bench"]),
        .executable(name: "cluster-bench", targets: ["cluster-bench"]),
        .executable(name: "chaos-run", targets: ["chaos-run"]),
        .executable(name: "realtime-client-bench", targets: ["realtime-client-bench"]),
        .executable(name: "reconnect-bench", targets: ["reconnect-bench"]),
        .executable(name: "reachability-bench", targets: ["reachability-bench"]),
    ],
    targets: [
        .systemLibrary(
            name: "CNetlink",
            pkgConfig: "libnl-route-3.0",
            providers: [.apt(["libnl-3-dev", "libnl-route-3-dev"])]
        ),
        .systemLibrary(
            name: "CWebSockets",
            pkgConfig: "libwebsockets",
            providers: [.apt(["libwebsockets-dev"])]
        ),
        .systemLibrary(
            name: "CCrypto",
            pkgConfig: "libcrypto",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CTLS",
            pkgConfig: "libssl",
            providers: [.apt(["libssl-dev"])]
        ),
        .systemLibrary(
            name: "CLibEV",
            providers: [.apt(["libev-dev"])]
        ),
        .systemLibrary(
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        .systemLibrary(
            name: "CCurl",
            pkgConfig: "libcurl",
            providers: [.apt(["libcurl4-openssl-dev"])]
        ),
        .systemLibrary(
            name: "CHiredis",
            // No pkgConfig: hiredis.pc adds -D_FILE_OFFSET_BITS=64, which SwiftPM refuses with a
            // warning; the headers (/usr/include/hiredis) and the library are on default paths.
            providers: [.apt(["libhiredis-dev"])]
        ),
        .target(name: "SystemSupport"),
        .systemLibrary(
            name: "CSQLite",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .systemLibrary(
            name: "CExpat",
            providers: [.apt(["libexpat1-dev"])]
        ),
        .target(name: "Redis", dependencies: ["CHiredis", "SystemSupport"]),
        .target(name: "Spawn", dependencies: ["SystemSupport"]),
        .target(name: "Reachability", dependencies: ["SystemSupport"]),
        .target(name: "ReachabilityNetlink", dependencies: ["CNetlink", "Reachability", "SystemSupport"]),
        .target(name: "Reconnect", dependencies: ["Reachability", "SystemSupport"]),
        .target(name: "WebSocket", dependencies: ["CLibEV", "CWebSockets", "SystemSupport"]),
        .target(name: "RealtimeProtocol", dependencies: ["CCrypto", "CSodium"]),
        .target(
            name: "RealtimeServer",
            dependencies: ["CSQLite", "CurlHTTP", "RealtimeProtocol", "SystemSupport", "WebSocket"],
            plugins: ["EmbedClient"]
        ),
        // Embeds Clients/javascript/src in RealtimeServer at build time (`ClientModule`).
        .plugin(name: "EmbedClient", capability: .buildTool(), dependencies: ["embed-client"], path: "Plugins/EmbedClient"),
        .executableTarget(name: "embed-client", path: "Plugins/embed-client"),
        .target(name: "CurlHTTP", dependencies: ["CCurl", "SystemSupport"]),
        .target(name: "RealtimeCluster", dependencies: ["Redis", "RealtimeProtocol", "RealtimeServer", "Spawn", "SystemSupport"]),
        .target(name: "RealtimeBackend", dependencies: ["RealtimeProtocol", "SystemSupport"]),
        .target(
            name: "Realtime",
            dependencies: ["CurlHTTP", "Reachability", "ReachabilityNetlink", "RealtimeProtocol", "Reconnect", "SystemSupport", "WebSocket"]
        ),
        .target(name: "BirdRealtime", dependencies: ["Reachability", "Realtime", "RealtimeProtocol", "Reconnect"]),
        .target(name: "LineStream", dependencies: ["CTLS", "Reachability", "Reconnect", "SystemSupport"]),
        .target(name: "ReconnectTesting", dependencies: ["Reachability", "Reconnect", "SystemSupport"]),
        .target(name: "NetworkLab", dependencies: ["Spawn", "SystemSupport"]),
        .target(name: "RealtimeTesting", dependencies: ["RealtimeProtocol", "SystemSupport"]),
        .target(name: "RealtimeSimulation", dependencies: ["Realtime", "RealtimeProtocol", "RealtimeServer", "Reconnect", "ReconnectTesting", "SystemSupport"]),
        .executableTarget(name: "simulate", dependencies: ["RealtimeSimulation"]),
        .executableTarget(name: "realtime-server", dependencies: ["RealtimeCluster", "RealtimeProtocol", "RealtimeServer", "Redis", "WebSocket"]),
        .executableTarget(
            name: "reachability-monitor",
            dependencies: ["Reachability", "ReachabilityNetlink"],
            path: "Samples/reachability-monitor",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "realtime",
            dependencies: ["CurlHTTP", "Realtime", "RealtimeProtocol"],
            path: "Samples/realtime",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "realtime-demo",
            dependencies: ["CurlHTTP", "Realtime", "RealtimeBackend", "RealtimeCluster", "RealtimeProtocol", "RealtimeServer", "Reconnect", "SystemSupport"],
            path: "Samples/realtime-demo",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "browser-demo",
            dependencies: ["RealtimeBackend", "RealtimeProtocol", "RealtimeServer", "SampleSupport", "SystemSupport", "WebSocket"],
            path: "Samples/browser-demo",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "room-backend",
            dependencies: ["RealtimeBackend", "RealtimeProtocol", "SampleSupport", "WebSocket"],
            path: "Samples/room-backend",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "line-server",
            dependencies: ["SampleSupport"],
            path: "Samples/line-server",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "line-client",
            dependencies: ["LineStream", "ReachabilityNetlink", "Reconnect", "SampleSupport"],
            path: "Samples/line-client",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "xmpp-client",
            dependencies: ["CExpat", "LineStream", "Reachability", "ReachabilityNetlink", "Reconnect", "SampleSupport", "SystemSupport"],
            path: "Samples/xmpp-client",
            exclude: ["README.md", "prosody"]
        ),
        .target(
            name: "SampleSupport",
            dependencies: ["LineStream", "Reachability", "Reconnect", "SystemSupport"],
            path: "Samples/SampleSupport"
        ),
        .executableTarget(
            name: "hostile-bench",
            dependencies: ["CurlHTTP", "RealtimeCluster", "RealtimeProtocol", "RealtimeServer", "Redis", "Spawn", "SystemSupport", "WebSocket"],
            path: "Benchmarks/hostile-bench"
        ),
        .executableTarget(
            name: "realtime-bench",
            dependencies: ["CurlHTTP", "RealtimeProtocol", "Spawn", "SystemSupport", "WebSocket"],
            path: "Benchmarks/realtime-bench"
        ),
        // The kernel's floor under a fan-out: one send(2) per socket (C, no dependency).
        .executableTarget(name: "send-floor", path: "Benchmarks/send-floor"),
        .executableTarget(
            name: "rooms-bench",
            dependencies: ["NetworkLab", "Realtime", "RealtimeBackend", "RealtimeProtocol", "RealtimeServer", "Spawn", "SystemSupport", "WebSocket"],
            path: "Benchmarks/rooms-bench"
        ),
        .executableTarget(
            name: "cluster-bench",
            dependencies: ["RealtimeBackend", "RealtimeCluster", "RealtimeProtocol", "RealtimeServer", "Redis", "SystemSupport", "WebSocket"],
            path: "Benchmarks/cluster-bench"
        ),
        .executableTarget(
            name: "chaos-run",
            dependencies: ["CurlHTTP", "NetworkLab", "RealtimeBackend", "RealtimeCluster", "RealtimeProtocol", "RealtimeServer", "Redis", "Spawn", "SystemSupport"],
            path: "Benchmarks/chaos-run"
        ),
        .executableTarget(
            name: "realtime-client-bench",
            dependencies: ["CCrypto", "NetworkLab", "Realtime", "RealtimeBackend", "RealtimeProtocol", "RealtimeServer", "Reconnect", "ReconnectTesting", "SystemSupport", "WebSocket"],
            path: "Benchmarks/realtime-client-bench"
        ),
        .executableTarget(
            name: "reconnect-bench",
            dependencies: ["LineStream", "NetworkLab", "Reachability", "ReachabilityNetlink", "Reconnect", "ReconnectTesting", "SampleSupport", "SystemSupport"],
            path: "Benchmarks/reconnect-bench"
        ),
        .executableTarget(
            name: "reachability-bench",
            dependencies: ["NetworkLab", "Reachability", "ReachabilityNetlink", "ReconnectTesting", "Spawn", "SystemSupport"],
            path: "Benchmarks/reachability-bench"
        ),
        .target(name: "TestSupport", dependencies: ["CurlHTTP", "Spawn"], path: "Tests/TestSupport"),
        .testTarget(name: "NetworkLabTests", dependencies: ["NetworkLab", "ReconnectTesting", "SystemSupport"]),
        .testTarget(
            name: "ReachabilityNetlinkTests",
            dependencies: ["NetworkLab", "Reachability", "ReachabilityNetlink", "ReconnectTesting", "Spawn", "SystemSupport"]
        ),
        .testTarget(name: "ReachabilityTests", dependencies: ["Reachability", "ReconnectTesting", "SystemSupport"]),
        .testTarget(name: "RealtimeProtocolTests", dependencies: ["RealtimeProtocol", "ReconnectTesting", "TestSupport"]),
        .testTarget(
            name: "RealtimeServerTests",
            dependencies: ["RealtimeBackend", "RealtimeCluster", "RealtimeProtocol", "RealtimeServer", "ReconnectTesting", "Redis", "Spawn", "SystemSupport", "TestSupport", "WebSocket"]
        ),
        .testTarget(
            name: "RealtimeTests",
            dependencies: ["NetworkLab", "Reachability", "Realtime", "RealtimeBackend", "RealtimeCluster", "RealtimeProtocol", "RealtimeServer", "Redis", "RealtimeTesting", "Reconnect", "ReconnectTesting", "Spawn", "SystemSupport", "TestSupport", "WebSocket"]
        ),
        .testTarget(
            name: "ReconnectIntegrationTests",
            dependencies: ["LineStream", "NetworkLab", "Reachability", "ReachabilityNetlink", "Reconnect", "ReconnectTesting", "SampleSupport", "Spawn", "SystemSupport", "TestSupport", "xmpp-client"]
        ),
        .testTarget(name: "RealtimeClusterTests", dependencies: ["NetworkLab", "Reachability", "Realtime", "RealtimeBackend", "RealtimeCluster", "RealtimeProtocol", "RealtimeServer", "Reconnect", "Redis", "Spawn", "TestSupport"]),
        .testTarget(name: "ReconnectTestingTests", dependencies: ["ReconnectTesting", "SystemSupport"]),
        .testTarget(name: "ReconnectTests", dependencies: ["Reachability", "Reconnect", "ReconnectTesting", "SystemSupport"]),
        // Realtime and Reconnect are named although the snippets import only BirdRealtime (which
        // re-exports them): without them SwiftPM did not rebuild this target when their public
        // types changed layout, and the stale objects read garbage from BirdRealtime.Options.
        .testTarget(name: "SeedSnippetTests", dependencies: ["BirdRealtime", "Realtime", "RealtimeBackend", "RealtimeServer", "Reconnect", "SystemSupport"]),
        .testTarget(name: "SpawnTests", dependencies: ["ReconnectTesting", "Spawn", "SystemSupport"]),
        .testTarget(name: "WebSocketTests", dependencies: ["Spawn", "SystemSupport", "TestSupport", "WebSocket"]),
    ]
)

// One settings loop for every Swift target: Swift 6 language mode with strict concurrency,
// and existential `any` spelled out.
for target in package.targets where target.type != .system && target.type != .plugin {
    var settings = target.swiftSettings ?? []
    settings.append(.swiftLanguageMode(.v6))
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    target.swiftSettings = settings
}
