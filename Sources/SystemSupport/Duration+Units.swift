import Dispatch

extension Duration {
    /// The duration in seconds, as a `Double`.
    package var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }

    /// Whole milliseconds, for logs.
    package var milliseconds: Int64 {
        components.seconds * 1000 + components.attoseconds / 1_000_000_000_000_000
    }

    /// Dispatch's form of the duration (negative as zero; beyond 30 years as never).
    package var dispatchInterval: DispatchTimeInterval {
        let (seconds, attoseconds) = components
        guard seconds < 1_000_000_000 else { return .never }
        return .nanoseconds(Int(max(0, seconds * 1_000_000_000 + attoseconds / 1_000_000_000)))
    }
}
