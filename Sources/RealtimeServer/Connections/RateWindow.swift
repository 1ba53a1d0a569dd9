/// A per-second budget of one connection (client events, room requests, bytes of replay and
/// history): what was spent in the current one-second window, which starts anew a second
/// after it began.
struct RateWindow {
    private(set) var start: ContinuousClock.Instant
    private(set) var spent = 0

    init(_ start: ContinuousClock.Instant) { self.start = start }

    /// What was spent in the window that holds `instant` (0 once the window is over).
    func spent(at instant: ContinuousClock.Instant) -> Int { instant - start >= .seconds(1) ? 0 : spent }

    /// Spends `amount` at `instant`, starting a new window when the current one is over.
    ///
    /// - Returns: the total spent in the window, this amount included.
    @discardableResult
    mutating func spend(_ amount: Int, at instant: ContinuousClock.Instant) -> Int {
        if instant - start >= .seconds(1) {
            start = instant
            spent = 0
        }
        spent += amount
        return spent
    }
}
