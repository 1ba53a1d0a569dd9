// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "swift-reconnect",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Reachability", targets: ["Reachability"]),
        .library(name: "ReachabilityNetlink", targets: ["ReachabilityNetlink"]),
        .library(name: "Reconnect", targets: ["Reconnect"]),
        .library(name: "WebSocket", targets: ["WebSocket"]),
        .library(name: "RealtimeProtocol", targets: ["RealtimeProtocol"]),
        .library(name: "RealtimeServer", targets: ["RealtimeServer"]),
        .library(name: "Realtime", targets: ["Realtime"]),
        .library(name: "RealtimeBackend", targets: ["RealtimeBackend"]),
        .library(name: "BirdRealtime", targets: ["BirdRealtime"]),
        .library(name: "ReconnectTesting", targets: ["ReconnectTesting"]),
        .executable(name: "reachability-monitor", targets: ["reachability-monitor"]),
        .executable(name: "reachability-bench", targets: ["reachability-bench"]),
        .executable(name: "line-client", targets: ["line-client"]),
        .executable(name: "line-server", targets: ["line-server"]),
        .executable(name: "xmpp-client", targets: ["xmpp-client"]),
        .executable(name: "reconnect-bench", targets: ["reconnect-bench"]),
        .executable(name: "realtime-server", targets: ["realtime-server"]),
        .executable(name: "realtime-bench", targets: ["realtime-bench"]),
        .executable(name: "realtime-client-bench", targets: ["realtime-client-bench"]),
        .executable(name: "rooms-bench", targets: ["rooms-bench"]),
        .executable(name: "realtime", targets: ["realtime"]),
        .executable(name: "realtime-demo", targets: ["realtime-demo"]),
        .executable(name: "room-backend", targets: ["room-backend"]),
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
            name: "CSodium",
            pkgConfig: "libsodium",
            providers: [.apt(["libsodium-dev"])]
        ),
        .target(name: "Locking"),
        .target(name: "RealtimeProtocol", dependencies: ["CCrypto", "CSodium"]),
        .target(name: "RealtimeServer", dependencies: ["Locking", "RealtimeProtocol", "WebSocket"]),
        .target(name: "RealtimeBackend", dependencies: ["Locking", "RealtimeProtocol"]),
        .target(name: "BirdRealtime", dependencies: ["Reachability", "Realtime", "RealtimeProtocol", "Reconnect"]),
        .target(
            name: "Realtime",
            dependencies: ["Locking", "Reachability", "ReachabilityNetlink", "RealtimeProtocol", "Reconnect", "WebSocket"]
        ),
        .target(name: "WebSocket", dependencies: ["CWebSockets", "Locking"]),
        .target(name: "Reachability", dependencies: ["Locking"]),
        .target(name: "ReachabilityNetlink", dependencies: ["CNetlink", "Locking", "Reachability"]),
        .target(name: "Reconnect", dependencies: ["Locking", "Reachability"]),
        .target(name: "ReconnectTesting", dependencies: ["Locking", "Reachability", "RealtimeProtocol", "Reconnect"]),
        .executableTarget(
            name: "reachability-monitor",
            dependencies: ["Reachability", "ReachabilityNetlink"],
            path: "Samples/reachability-monitor",
            exclude: ["README.md"]
        ),
        .executableTarget(name: "realtime-server", dependencies: ["RealtimeServer"]),
        .executableTarget(
            name: "realtime",
            dependencies: ["Realtime", "RealtimeProtocol"],
            path: "Samples/realtime",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "realtime-demo",
            dependencies: ["Locking", "Realtime", "RealtimeProtocol", "RealtimeServer"],
            path: "Samples/realtime-demo",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "room-backend",
            dependencies: ["RealtimeBackend", "RealtimeProtocol", "WebSocket"],
            path: "Samples/room-backend",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "realtime-bench",
            dependencies: ["Locking", "RealtimeProtocol", "ReconnectTesting", "WebSocket"],
            path: "Benchmarks/realtime-bench"
        ),
        .executableTarget(
            name: "rooms-bench",
            dependencies: ["Locking", "RealtimeProtocol", "RealtimeServer", "WebSocket"],
            path: "Benchmarks/rooms-bench"
        ),
        .executableTarget(
            name: "realtime-client-bench",
            dependencies: ["CCrypto", "Locking", "Realtime", "RealtimeProtocol", "RealtimeServer", "Reconnect", "ReconnectTesting", "WebSocket"],
            path: "Benchmarks/realtime-client-bench"
        ),
        .target(
            name: "SampleSupport",
            dependencies: ["Locking", "Reachability", "Reconnect"],
            path: "Samples/SampleSupport"
        ),
        .executableTarget(
            name: "line-server",
            dependencies: ["SampleSupport"],
            path: "Samples/line-server",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "line-client",
            dependencies: ["Reachability", "ReachabilityNetlink", "Reconnect", "SampleSupport"],
            path: "Samples/line-client",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "xmpp-client",
            dependencies: ["Reachability", "ReachabilityNetlink", "Reconnect", "SampleSupport"],
            path: "Samples/xmpp-client",
            exclude: ["README.md", "prosody"]
        ),
        .executableTarget(
            name: "reconnect-bench",
            dependencies: ["Locking", "Reachability", "ReachabilityNetlink", "Reconnect", "ReconnectTesting", "SampleSupport"],
            path: "Benchmarks/reconnect-bench"
        ),
        .executableTarget(
            name: "reachability-bench",
            dependencies: ["Locking", "Reachability", "ReachabilityNetlink", "ReconnectTesting"],
            path: "Benchmarks/reachability-bench"
        ),
        .testTarget(name: "ReachabilityTests", dependencies: ["Locking", "Reachability", "ReconnectTesting"]),
        .testTarget(
            name: "ReachabilityNetlinkTests",
            dependencies: ["Locking", "Reachability", "ReachabilityNetlink", "ReconnectTesting"]
        ),
        .testTarget(name: "ReconnectTestingTests", dependencies: ["Locking", "ReconnectTesting"]),
        .testTarget(name: "WebSocketTests", dependencies: ["Locking", "ReconnectTesting", "WebSocket"]),
        .target(name: "TestSupport", dependencies: ["Locking", "ReconnectTesting"], path: "Tests/TestSupport"),
        .testTarget(name: "RealtimeProtocolTests", dependencies: ["RealtimeProtocol", "ReconnectTesting", "TestSupport"]),
        .testTarget(name: "RealtimeServerTests", dependencies: ["Locking", "RealtimeBackend", "RealtimeProtocol", "RealtimeServer", "ReconnectTesting", "TestSupport", "WebSocket"]),
        .testTarget(
            name: "RealtimeTests",
            dependencies: ["Locking", "Reachability", "Realtime", "RealtimeProtocol", "RealtimeServer", "Reconnect", "ReconnectTesting", "TestSupport", "WebSocket"]
        ),
        .testTarget(
            name: "SeedSnippetTests",
            dependencies: ["BirdRealtime", "Locking", "RealtimeServer"]
        ),
        .testTarget(name: "ReconnectTests", dependencies: ["Locking", "Reachability", "Reconnect", "ReconnectTesting"]),
        .testTarget(
            name: "ReconnectIntegrationTests",
            dependencies: ["Locking", "Reachability", "ReachabilityNetlink", "Reconnect", "ReconnectTesting", "SampleSupport"]
        ),
    ]
)

// One settings loop for every Swift target: Swift 6 language mode with strict concurrency,
// and existential `any` spelled out.
for target in package.targets where target.type != .system {
    var settings = target.swiftSettings ?? []
    settings.append(.swiftLanguageMode(.v6))
    settings.append(.enableUpcomingFeature("ExistentialAny"))
    target.swiftSettings = settings
}
