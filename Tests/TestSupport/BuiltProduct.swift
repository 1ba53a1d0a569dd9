import Foundation

/// The package's executables as `swift test` built them: beside the running test bundle.
public enum BuiltProduct {
    /// The build directory (the test bundle's, found through /proc/self/exe).
    public static var directory: URL {
        URL(fileURLWithPath: (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")) ?? CommandLine.arguments[0])
            .deletingLastPathComponent()
    }

    /// The path of the executable product `name` (`realtime-server`, `realtime-demo`).
    public static func path(_ name: String) -> String { directory.appendingPathComponent(name).path }
}
