import Foundation

/// Whether this test process runs under a sanitizer (`scripts/sanitize thread|address`), whose
/// instrumented code is several times slower: a test's time bounds widen by `slowdown`.
public enum Sanitizers {
    /// Whether ThreadSanitizer or AddressSanitizer runs this process (their options are set).
    public static let active = ProcessInfo.processInfo.environment["ASAN_OPTIONS"] != nil || ProcessInfo.processInfo.environment["TSAN_OPTIONS"] != nil

    /// How much slower sanitized code is allowed to be: 5 under a sanitizer, else 1.
    public static let slowdown = active ? 5 : 1
}
