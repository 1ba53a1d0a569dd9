import Synchronization
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Standard output: C's `stdout` stream as `print` writes it, and the lines of `LinePrinter`.
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

    /// Writes `text` and a newline to descriptor 1 with write(2), whole (partial writes and
    /// EINTR continued), one line at a time across threads. Not through `stdout`: a writer
    /// blocked on a pipe nobody reads then holds no stdio lock, so an exit that flushes the
    /// streams (ThreadSanitizer's `_exit` does) is not held behind it.
    ///
    /// - Returns: `false` when the write failed (EPIPE: the reader closed the pipe).
    static func writeLine(_ text: String) -> Bool {
        var line = text
        line.append("\n")
        return lineLock.withLock { _ in
            line.withUTF8 { bytes in
                var offset = 0
                while offset < bytes.count {
                    let written = write(1, bytes.baseAddress! + offset, bytes.count - offset)
                    if written < 0 {
                        if errno == EINTR { continue }
                        return false
                    }
                    offset += written
                }
                return true
            }
        }
    }

    private static let lineLock = Mutex(())

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
