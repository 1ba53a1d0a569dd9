import RealtimeProtocol

/// An event on its way into a room's history (a member's `room_send` or the app server's
/// publish, docs/rooms-protocol.md "Sending" and "Where the rules travel") as a machine on plain
/// values: which rule it is kept under, which store request comes next, and what each answer
/// means. The hub starts it under its lock (`RealtimeHub.publishStarts`), performs each request
/// with no lock held, and takes the kept event back under the lock (`RealtimeHub.publishKept`).
struct RoomPublish: Sendable {
    /// A store request of the publish, performed on the room's lane.
    enum Request: Hashable, Sendable {
        /// `RoomHistoryStore.settleRule`: `force` false asks the store for the rule it keeps
        /// (a room the hub knows nothing of: the offered rule has `issuedAt` 0); true declares
        /// the app server's rule, which replaces any token's.
        case settleRule(RoomRuleRecord, force: Bool)
        /// `RoomHistoryStore.append` under `rule`, with the furthest position this node saw
        /// the room at (`seen`).
        case append(rule: RoomRule, seen: RoomPosition?)
    }

    let app: RealtimeApp
    let room: String
    let event: String
    let data: String
    /// The sender: the member's user id, or `nil` for the app's server.
    let from: String?
    /// The rule the app's server declares, or `nil` for the one the hub knows.
    let declared: RoomRule?
    /// The sending member's socket id, or `nil` for the app's server (whose data is checked
    /// here; a member's was checked when its send arrived).
    let member: String?
    /// The rule the hub knows for the room (`issuedAt` 0: none learned from a token or the
    /// app's server; `Configuration.defaultRoomRule` then).
    private(set) var known: RoomRuleRecord
    /// The furthest position this node saw the room at (its cursor): the store starts a new
    /// epoch rather than give those ids again (a failover lost writes).
    let seen: RoomPosition?

    /// The first request, at `now` (seconds since 1970): the store's own rule for a room the
    /// hub knows nothing of (a node restarted, or one that never saw it: `--data` and Redis
    /// keep the rule the backend issued), else what `next(now:)` asks.
    ///
    /// - Throws: `RoomError` `bad_request` for the app server's data that breaks the rule.
    func start(now: Int) throws(RoomError) -> Request {
        if declared == nil, known.issuedAt == 0 { return .settleRule(RoomRuleRecord(rule: known.rule, issuedAt: 0), force: false) }
        return try next(now: now)
    }

    /// The store's answer to the first `settleRule` (not forced), `nil` when it could not say:
    /// a rule the backend issued replaces the one the hub knew.
    ///
    /// - Returns: the rule for the hub to remember (`RealtimeHub.rememberRule`, under the lock,
    ///   before the data is checked against it), or `nil`; then `next(now:)`.
    mutating func storeRule(_ kept: RoomRuleRecord?) -> RoomRuleRecord? {
        guard let kept, kept.issuedAt > 0 else { return nil }
        known = kept
        return kept
    }

    /// The store settled the rule the app's server declared (remembered by the hub): the event
    /// is kept by the declared rule.
    func declaredRule(_ settled: RoomRuleRecord) -> Request {
        .append(rule: declared ?? settled.rule, seen: seen)
    }

    /// The request once the hub's rule is known: the app server's data checked against the
    /// rule; the app server's declared rule settled by the store when it differs from the known
    /// one, or was last settled in an earlier second (the app server speaks for the backend now:
    /// no token issued before it replaces it), else the event appended.
    ///
    /// - Throws: `RoomError` `bad_request` for the app server's data that breaks the rule.
    func next(now: Int) throws(RoomError) -> Request {
        let rule = declared ?? known.rule
        if member == nil { try RealtimeHub.checkRoomData(data, rule: rule) }
        if let declared, declared != known.rule || known.issuedAt < now {
            return .settleRule(RoomRuleRecord(rule: rule, issuedAt: max(now, known.issuedAt)), force: true)
        }
        return .append(rule: rule, seen: seen)
    }

    init(app: RealtimeApp, room: String, event: String, data: String, from: String?, declared: RoomRule?, member: String?,
         known: RoomRuleRecord, seen: RoomPosition?) {
        self.app = app
        self.room = room
        self.event = event
        self.data = data
        self.from = from
        self.declared = declared
        self.member = member
        self.known = known
        self.seen = seen
    }
}
