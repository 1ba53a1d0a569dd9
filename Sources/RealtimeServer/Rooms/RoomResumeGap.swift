import RealtimeProtocol

/// The missed events a resume cannot bring, as its first page found them (`ReplayStream`; the
/// protocol's `RoomGap` is what the member is told).
public struct RoomResumeGap: Hashable, Sendable {
    /// Why: `expired` (past the room's span or count) or `epochChanged` (the history itself
    /// was lost).
    public var reason: RoomUnrecoverableReason
    /// Where the member was: every event after it in its epoch is missed.
    public var previous: RoomPosition
    /// Where the replay that follows starts from: its epoch, and the id before its first event
    /// (the room's last id when nothing follows).
    public var resume: RoomPosition
    /// When the first event that follows was kept, in milliseconds since 1970: every missing
    /// event was kept before it (`nil` when nothing follows).
    public var before: Int64?

    /// Creates a gap.
    public init(reason: RoomUnrecoverableReason, previous: RoomPosition, resume: RoomPosition, before: Int64?) {
        self.reason = reason
        self.previous = previous
        self.resume = resume
        self.before = before
    }

    /// What the member is told: the missing ids of `resume.epoch` (after `previous` in the same
    /// epoch, from 1 in a new one), and `previous` when the epoch changed.
    public var told: RoomGap {
        let first = previous.epoch == resume.epoch ? previous.id + 1 : 1
        return RoomGap(reason: reason.rawValue, epoch: resume.epoch, missing: first <= resume.id ? first...resume.id : nil, before: before,
                       previous: previous.epoch == resume.epoch ? nil : previous)
    }
}
