/// Exponential backoff with full jitter: before retry `n` (0-based) wait a uniformly random
/// time in `0 … min(cap, base × multiplier^n)` ("Exponential Backoff And Jitter", AWS
/// Architecture Blog, 2015: full jitter spreads reconnecting clients best).
public struct ExponentialBackoff: Sendable, Hashable {
    /// The ceiling of the first retry's delay.
    public var base: Duration
    /// The largest ceiling; delays never exceed it.
    public var cap: Duration
    /// Growth of the ceiling per retry.
    public var multiplier: Double

    /// Creates a policy.
    ///
    /// - Parameters:
    ///   - base: ceiling of the first delay (1 s by default, the realtime seed's value).
    ///   - cap: largest ceiling (30 s by default, the realtime seed's value).
    ///   - multiplier: growth per retry (2 by default).
    public init(base: Duration = .seconds(1), cap: Duration = .seconds(30), multiplier: Double = 2) {
        self.base = base
        self.cap = cap
        self.multiplier = multiplier
    }

    /// The ceiling for retry `retry` (0-based): `min(cap, base × multiplier^retry)`.
    ///
    /// - Parameter retry: how many retries came before this one.
    /// - Returns: the largest delay this retry may get.
    ///   Negative or non-finite settings are treated as 0 (base, cap) or 1 (multiplier), so
    ///   the ceiling is always within `0 … max(cap, 0)`.
    public func ceiling(forRetry retry: Int) -> Duration {
        let growth = multiplier.isFinite && multiplier >= 1 ? multiplier : 1
        let scale = integerPower(growth, Double(min(max(retry, 0), 64)))
        let capSeconds = max(0, cap.seconds)
        let seconds = min(capSeconds, max(0, base.seconds) * scale)
        return .seconds(seconds.isFinite ? seconds : capSeconds)
    }

    /// The delay before retry `retry`: uniform in `0 … ceiling(forRetry:)`.
    ///
    /// - Parameters:
    ///   - retry: how many retries came before this one.
    ///   - random: the random source (inject a seeded one in tests).
    /// - Returns: the delay.
    public func delay(forRetry retry: Int, using random: inout some RandomNumberGenerator) -> Duration {
        .seconds(Double.random(in: 0...ceiling(forRetry: retry).seconds, using: &random))
    }
}

/// `base` raised to a whole `exponent` (stops growing past 1e18, far above any cap).
@usableFromInline func integerPower(_ base: Double, _ exponent: Double) -> Double {
    var result = 1.0
    var remaining = Int(exponent)
    while remaining > 0 {
        result *= base
        remaining -= 1
        if result > 1e18 { return result }
    }
    return result
}
