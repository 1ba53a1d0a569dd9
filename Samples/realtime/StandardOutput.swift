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
        #if canImport(Darwin)
        let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: -2), "__stdoutp")  // RTLD_DEFAULT
        #else
        let symbol = dlsym(nil, "stdout")  // RTLD_DEFAULT
        #endif
        guard let symbol else { return false }
        let stream = symbol.load(as: UnsafeMutablePointer<FILE>?.self)
        return stream.map { setvbuf($0, nil, _IOLBF, 0) == 0 } ?? false
    }
}
