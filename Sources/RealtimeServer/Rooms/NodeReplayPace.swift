/// The node's streamed replays together, at most `bytesPerSecond`, each connection that
/// replays within a second getting an equal share of it: a value the hub keeps under its lock
/// and asks before each page (`RealtimeHub.joinTurn`).
///
/// Each connection was paced alone (`RealtimeHub.replayBytesPerSecond`, 16 MiB), so ten that
/// rejoin far back again and again pulled 2.39 GB in 15 s and slowed every other member's
/// sends 25-fold. A share is the rate divided by the connections that
/// replayed in this second or the last, so a newcomer is let in at once and a crowd of greedy
/// readers splits the rate evenly; a share is a guarantee, not a limit: past its share a
/// connection goes on while the node has more than a share left this second (kept for
/// whoever comes), so 200 connections rejoining one event back twice a second cannot hold a long
/// resume to a 200th of the rate (a hostile review measured 25.6 s against 0.14 s before the
/// loan).
struct NodeReplayPace {
    /// Replayed bytes a second, the node's connections together.
    let bytesPerSecond: Int
    private var windowStart: ContinuousClock.Instant?
    private var spent = 0
    /// Bytes each connection was sent in this window: at most one entry per connection that
    /// replays in one second.
    private var spentBy: [String: Int] = [:]
    private var replayersBefore = 0

    init(bytesPerSecond: Int) { self.bytesPerSecond = bytesPerSecond }

    /// Whether `socketID` may be sent a replay page now: the node's bytes this second are
    /// under the rate, and its own under its share, or more than a share is left.
    func admits(_ socketID: String, at instant: ContinuousClock.Instant) -> Bool {
        guard let start = windowStart, instant - start < .seconds(1) else {
            // A new window: nothing spent in it yet; the last one's replayers still share it.
            let before = windowStart.map { instant - $0 < .seconds(2) } == true ? spentBy.count : 0
            return 0 < bytesPerSecond / max(1, before)
        }
        guard spent < bytesPerSecond else { return false }
        let replayers = max(1, replayersBefore, spentBy.count + (spentBy[socketID] == nil ? 1 : 0))
        let share = bytesPerSecond / replayers
        return spentBy[socketID, default: 0] < share || bytesPerSecond - spent > share
    }

    /// Counts `bytes` of replay sent to `socketID`.
    mutating func charge(_ socketID: String, bytes: Int, at instant: ContinuousClock.Instant) {
        roll(to: instant)
        spent += bytes
        spentBy[socketID, default: 0] += bytes
    }

    private mutating func roll(to instant: ContinuousClock.Instant) {
        guard let start = windowStart, instant - start < .seconds(1) else {
            replayersBefore = windowStart.map { instant - $0 < .seconds(2) } == true ? spentBy.count : 0
            windowStart = instant
            spent = 0
            spentBy.removeAll(keepingCapacity: spentBy.count <= 1024)
            return
        }
    }
}
