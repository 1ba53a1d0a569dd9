#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A wall-clock instant with millisecond precision: the time stamp that starts every output
/// line.
struct LineTime: Sendable, Hashable {
    /// Whole seconds since 1970-01-01T00:00:00Z.
    var seconds: Int
    /// Milliseconds past `seconds`, 0 to 999.
    var milliseconds: Int

    /// Creates an instant.
    ///
    /// - Parameters:
    ///   - seconds: whole seconds since 1970 (UTC).
    ///   - milliseconds: milliseconds past them, 0 to 999.
    init(seconds: Int, milliseconds: Int) {
        self.seconds = seconds
        self.milliseconds = milliseconds
    }

    /// The current wall-clock time (`CLOCK_REALTIME`).
    static func now() -> LineTime {
        var spec = timespec()
        clock_gettime(CLOCK_REALTIME, &spec)
        return LineTime(seconds: Int(spec.tv_sec), milliseconds: Int(spec.tv_nsec) / 1_000_000)
    }

    /// Local time of day, `HH:MM:SS.mmm` (the plain output's time stamp).
    var clockText: String {
        var time = time_t(seconds)
        var parts = tm()
        localtime_r(&time, &parts)
        return "\(Self.pad(parts.tm_hour, 2)):\(Self.pad(parts.tm_min, 2)):\(Self.pad(parts.tm_sec, 2)).\(Self.pad(milliseconds, 3))"
    }

    /// ISO 8601 in UTC with milliseconds, `2026-05-01T12:34:56.789Z` (the JSON `time` key).
    var iso8601: String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        let date = "\(Self.pad(parts.tm_year + 1900, 4))-\(Self.pad(parts.tm_mon + 1, 2))-\(Self.pad(parts.tm_mday, 2))"
        return "\(date)T\(Self.pad(parts.tm_hour, 2)):\(Self.pad(parts.tm_min, 2)):\(Self.pad(parts.tm_sec, 2)).\(Self.pad(milliseconds, 3))Z"
    }

    /// `value` in decimal, zero-padded on the left to `width` digits.
    private static func pad(_ value: some BinaryInteger, _ width: Int) -> String {
        let digits = String(value)
        return String(repeating: "0", count: max(0, width - digits.count)) + digits
    }
}
