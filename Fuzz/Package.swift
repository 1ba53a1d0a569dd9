// swift-tools-version:6.0
// The fuzz targets (issue 14 part 4): a package of its own so that the root package's builds never
// see them. `scripts/fuzz` builds it with coverage instrumentation and AddressSanitizer and links
// libFuzzer (the toolchain's `libclang_rt.fuzzer_no_main`); a plain `swift build` here cannot link.
import PackageDescription

let package = Package(
    name: "realtime-fuzz",
    platforms: [.macOS(.v15)],
    dependencies: [.package(name: "swift-reconnect", path: "..")],
    targets: [
        .executableTarget(
            name: "realtime-fuzz",
            dependencies: [
                .product(name: "Realtime", package: "swift-reconnect"),
                .product(name: "RealtimeProtocol", package: "swift-reconnect"),
                .product(name: "RealtimeServer", package: "swift-reconnect"),
                .product(name: "RealtimeCluster", package: "swift-reconnect"),
                .product(name: "WebSocket", package: "swift-reconnect"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6), .enableUpcomingFeature("ExistentialAny")]
        ),
    ]
)
