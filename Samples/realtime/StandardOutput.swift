#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard output as `print` writes it: C's `stdout` stream.
enum StandardOutput {
    /// Makes `stdout` line-buffered, `setvbuf(stdout, nil, _IOLBF, 0)`, so a pipe reader sees
    /// each line as it is printed instead of when a 4 KiB block fills. Call it first, before
    /// anything is written (C11 §7.21.5.6: setvbuf only before other operations on the stream).
    ///
    /// Swift 6 rejects a direct reference to the C global `stdout` ("not concurrency-safe
    /// because it involves shared mutable state"), so its address is looked up with `dlsym`;
    /// this runs once, on the main thread, before any other thread exists.
    ///
    /// - Returns: whether the stream was found and switched.
    @discardableResult
    static func useLineBuffering() -> Bool {
        stream.map { setvbuf($0, nil, _IOLBF, 0) == 0 } ?? false
    }

    /// Whether a write to standard output failed (`ferror`): its reader closed the pipe.
    static var hasFailed: Bool { stream.map { ferror($0) != 0 } ?? false }

    /// C's `stdout`, looked up once: the variable holds the same stream for the whole run.
    nonisolated(unsafe) private static let stream: UnsafeMutablePointer<FILE>? = {
        #if canImport(Darwin)
        let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: -2), "__stdoutp")  // RTLD_DEFAULT
        #else
        let symbol = dlsym(nil, "stdout")  // RTLD_DEFAULT
        #endif
        return symbol?.load(as: UnsafeMutablePointer<FILE>?.self)
    }()
}
