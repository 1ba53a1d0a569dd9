// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "swift-reconnect",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "Reachability", targets: ["Reachability"]),
        .library(name: "ReachabilityNetlink", targets: ["ReachabilityNetlink"]),
        .library(name: "ReconnectTesting", targets: ["ReconnectTesting"]),
        .executable(name: "reachability-monitor", targets: ["reachability-monitor"]),
        .executable(name: "reachability-bench", targets: ["reachability-bench"]),
    ],
    targets: [
        .systemLibrary(
            name: "CNetlink",
            pkgConfig: "libnl-route-3.0",
            providers: [.apt(["libnl-3-dev", "libnl-route-3-dev"])]
        ),
        .target(name: "Reachability"),
        .target(name: "ReachabilityNetlink", dependencies: ["CNetlink", "Reachability"]),
        .target(name: "ReconnectTesting", dependencies: ["Reachability"]),
        .executableTarget(
            name: "reachability-monitor",
            dependencies: ["Reachability", "ReachabilityNetlink"],
            path: "Samples/reachability-monitor",
            exclude: ["README.md"]
        ),
        .executableTarget(
            name: "reachability-bench",
            dependencies: ["Reachability", "ReachabilityNetlink", "ReconnectTesting"],
            path: "Benchmarks/reachability-bench"
        ),
        .testTarget(name: "ReachabilityTests", dependencies: ["Reachability", "ReconnectTesting"]),
        .testTarget(
            name: "ReachabilityNetlinkTests",
            dependencies: ["Reachability", "ReachabilityNetlink", "ReconnectTesting"]
        ),
        .testTarget(name: "ReconnectTestingTests", dependencies: ["ReconnectTesting"]),
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
