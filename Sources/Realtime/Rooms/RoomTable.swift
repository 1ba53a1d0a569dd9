import RealtimeProtocol

/// A room token the client keeps (docs/rooms-protocol.md "Tokens"): tokens are not bound to a
/// connection, so a reconnect reuses one until `keepUntil`.
struct RoomToken: Hashable, Sendable {
    /// The JWT.
    var value: String
    /// A sealed room's key (from the auth answer's `key`).
    var key: [UInt8]?
    /// When the client stops using it, on its own clock: 10 minutes before the token expires
    /// in the server's time (rooms seed), or half its remaining life when that is shorter.
    var keepUntil: ContinuousClock.Instant

    /// How long before expiry a token is given up (rooms seed: "keeps each token until 10
    /// minutes before it expires").
    static let margin: Duration = .seconds(600)

    /// A token whose expiry is `expires` on a clock that read `time` when it answered (both in
    /// milliseconds since 1970), received at `now`: the server's time is used, whatever the
    /// client's clock says (DESIGN.md "take the skew from the server").
    init(value: String, key: [UInt8]?, expires: Int64, time: Int64, now: ContinuousClock.Instant) {
        self.value = value
        self.key = key
        // Hostile or broken clocks cannot overflow: a remaining life is 0…30 days.
        let (difference, overflow) = expires.subtractingReportingOverflow(time)
        let milliseconds = overflow ? (expires > time ? Self.longestLife : 0) : min(max(0, difference), Self.longestLife)
        let remaining = Duration.milliseconds(milliseconds)
        keepUntil = now + remaining - min(Self.margin, remaining / 2)
    }

    /// The longest life a token is taken to have, in milliseconds (30 days): a longer `expires`
    /// is read as this.
    static let longestLife: Int64 = 30 * 86_400_000

    func isUsable(at now: ContinuousClock.Instant) -> Bool { now < keepUntil }
}

/// The rooms the app joined, as `RoomsMachine` keeps them: their order (rejoin order), and per
/// room its phase, position, token and members. Unlike channels, a room's position and token
/// outlive the connection: that is how a reconnect rejoins without losing events or asking the
/// auth route again.
struct RoomTable: Hashable {
    /// What a room is doing; each case carries what only it has (STYLE.md: no flags beside a
    /// state). The public `Room.State` is read from it.
    enum Phase: Hashable {
        /// From `join` (or a drop, or a refused token) until `joined`: the public `joining`.
        case joining(Attempt)
        /// Joined on a socket: the public `joined`, also while it rejoins from its position.
        case joined(Membership)
        /// Over: the public `failed`, the record's `error` says why; nothing rejoins it until
        /// the app calls `join` again.
        case failed
    }

    /// A join until its `joined`: where it stands, and what it learned on the way.
    struct Attempt: Hashable {
        var step: Step = .waiting
        /// Refusals retried in a row (`rate_limited`, `store_full`, a join with no answer).
        var retries = 0
        /// The server refused this attempt's token once: a second refusal of that kind is final.
        var tokenRefused = false
        /// Rejoins for holes in a replay; bounded, so a server that keeps skipping ids cannot
        /// keep the client rejoining.
        var resyncs = 0
    }

    /// Where a join stands.
    enum Step: Hashable {
        /// Nothing in flight: no socket, or a retry timer armed.
        case waiting
        /// In the next batch of the auth route.
        case needsToken
        /// Its token is being asked for (the request id).
        case authorizing(request: UInt64)
        /// `room_join` sent; the replay and `joined` are awaited.
        case sent(Join)
    }

    /// A `room_join` in flight (a first join, or a member's rejoin from its position).
    struct Join: Hashable {
        /// The socket it was sent on.
        let generation: UInt64
        /// The position it was sent from, or where its deadline last found it: a streamed replay
        /// that moves the position is progress, and re-arms the deadline.
        var from: RoomPosition?
        /// The server told a gap for it: its `joined` (`recovered: false`) is not told again.
        var gapTold = false
    }

    /// A new token asked for while joined (the old one is near its expiry, or a rejoin needs one).
    enum Renewal: Hashable {
        /// In the next batch of the auth route.
        case needsToken
        /// Asked for (the request id).
        case authorizing(request: UInt64)
    }

    /// A membership on a socket.
    struct Membership: Hashable {
        /// The socket it is on.
        let generation: UInt64
        /// Rejoins for holes since the last clean `joined` (`RoomsMachine.maxResyncs`).
        var resyncs = 0
        /// Rejoins refused and retried in a row (`rate_limited`, `store_full`).
        var retries = 0
        /// More members than the cap were announced since `joined` (reported once).
        var membersCapReported = false
        /// A new token on its way: sent as `room_refresh`, or used by the rejoin that waits for it.
        var renewal: Renewal?
        /// A rejoin from the position (a hole, or the server's `resync`): waiting for a token, or sent.
        var rejoin: Rejoin?
    }

    /// A member's rejoin from its position.
    enum Rejoin: Hashable {
        /// Refused for now (`rate_limited`, `store_full`): made when the room's retry timer
        /// fires (or when a token comes first).
        case putOff
        /// Waiting for the token the renewal brings.
        case awaitingToken
        /// Sent.
        case sent(Join)
    }

    struct Record: Hashable {
        var phase: Phase = .joining(Attempt())
        /// The last kept event delivered (or the `joined` position): rejoins start after it.
        var position: RoomPosition?
        var token: RoomToken?
        /// What ended the room (`failed`), or the last refusal or gap told.
        var error: RoomError?
        /// When the auth route was last asked for this room (`minimumAuthInterval`).
        var lastAuthAt: ContinuousClock.Instant?
        /// The room's users, from `joined` and `count`.
        var count: Int?

        /// The public state.
        var state: Room.State {
            switch phase {
            case .joining: .joining
            case .joined: .joined
            case .failed: .failed
            }
        }

        /// The `room_join` whose `joined` is awaited, if any.
        var join: Join? {
            switch phase {
            case .joining(let attempt): if case .sent(let join) = attempt.step { join } else { nil }
            case .joined(let membership): if case .sent(let join)? = membership.rejoin { join } else { nil }
            case .failed: nil
            }
        }

        /// Rejoins for holes so far (of the attempt, or of the membership).
        var resyncs: Int {
            switch phase {
            case .joining(let attempt): attempt.resyncs
            case .joined(let membership): membership.resyncs
            case .failed: 0
            }
        }

        /// Changes the join in flight; nothing when none is.
        mutating func updateJoin(_ change: (inout Join) -> Void) {
            switch phase {
            case .joining(var attempt):
                guard case .sent(var join) = attempt.step else { return }
                change(&join)
                attempt.step = .sent(join)
                phase = .joining(attempt)
            case .joined(var membership):
                guard case .sent(var join)? = membership.rejoin else { return }
                change(&join)
                membership.rejoin = .sent(join)
                phase = .joined(membership)
            case .failed:
                return
            }
        }

        /// Changes the attempt; nothing unless joining.
        mutating func updateAttempt(_ change: (inout Attempt) -> Void) {
            guard case .joining(var attempt) = phase else { return }
            change(&attempt)
            phase = .joining(attempt)
        }

        /// Changes the membership; nothing unless joined.
        mutating func updateMembership(_ change: (inout Membership) -> Void) {
            guard case .joined(var membership) = phase else { return }
            change(&membership)
            phase = .joined(membership)
        }
    }

    /// Most rooms a client joins: the server's limit per connection (docs/rooms-protocol.md
    /// `too_many_rooms`); a room past it fails at once with that code.
    static let maxRooms = 100

    private(set) var order: [String] = []
    private var records: [String: Record] = [:]
    /// Presence rooms' members by id, replaced at every `joined`. Kept apart from the records,
    /// which a room's own events and history pages copy: a member list shared with such a copy
    /// would be copied in full at every `join` (quadratic in the members).
    private(set) var members: [String: [String: RoomMember]] = [:]

    subscript(name: String) -> Record? { records[name] }

    var count: Int { records.count }

    /// Adds a room at the end of the order; `false` if it is already in the table.
    mutating func add(_ name: String) -> Bool {
        guard records[name] == nil else { return false }
        records[name] = Record()
        order.append(name)
        return true
    }

    /// Replaces a room's members.
    mutating func setMembers(_ name: String, _ list: [String: RoomMember]) {
        guard records[name] != nil else { return }
        members[name] = list
    }

    /// Lists a member in place unless the room already lists `limit` others.
    ///
    /// - Returns: whether it is listed.
    mutating func addMember(_ name: String, _ member: RoomMember, limit: Int) -> Bool {
        guard records[name] != nil else { return false }
        if members[name]?[member.id] == nil, members[name, default: [:]].count >= limit { return false }
        members[name, default: [:]][member.id] = member
        return true
    }

    /// Removes a member in place.
    mutating func removeMember(_ name: String, id: String) {
        members[name]?[id] = nil
    }

    /// Removes a room; `false` if it was not in the table.
    mutating func remove(_ name: String) -> Bool {
        members[name] = nil
        guard records.removeValue(forKey: name) != nil else { return false }
        order.removeAll { $0 == name }
        return true
    }

    /// A room's phase, read in place (the per-event path: no copy of the record).
    mutating func phase(of name: String) -> Phase? {
        guard let index = records.index(forKey: name) else { return nil }
        // Through `inout` (the values' modify accessor): the getter copies the whole record.
        func read(_ record: inout Record) -> Phase { record.phase }
        return read(&records.values[index])
    }

    /// What becomes of a kept event (`admit`).
    enum Admission: Equatable {
        /// No position yet: the room is not joined.
        case beforeJoined
        /// At or before the position: delivered already.
        case duplicate
        /// After a hole while the room is joining or already rejoining for one: not delivered
        /// (the rejoin's replay brings it).
        case heldForResync
        /// After a hole: rejoin from the position (nothing moved).
        case resync
        /// Delivered, the position moved to it; `skipped` when ids were missing and rejoins
        /// have not closed the gaps (`maxResyncs` in a row), `key` a sealed room's key.
        case deliver(key: [UInt8]?, skipped: ClosedRange<UInt64>?, epoch: String)
    }

    /// Checks a kept event's id against the room's position and, when it is delivered, moves
    /// the position to it, in place: one lookup and no copy of the record per event.
    ///
    /// The rule (DESIGN.md, rooms: positions): an id not after the position is a duplicate; an
    /// id past the next one is a hole, a reason to rejoin from the position, at most
    /// `maxResyncs` times in a row before the events flow again from the new id.
    ///
    /// - Returns: `nil` for a room not in the table.
    mutating func admit(_ name: String, id: UInt64, maxResyncs: Int) -> Admission? {
        guard let index = records.index(forKey: name) else { return nil }
        return Self.admit(&records.values[index], id: id, maxResyncs: maxResyncs)
    }

    private static func admit(_ record: inout Record, id: UInt64, maxResyncs: Int) -> Admission {
        guard let epoch = record.position?.epoch, let position = record.position?.id else { return .beforeJoined }
        guard id > position else { return .duplicate }
        var skipped: ClosedRange<UInt64>?
        if id != position + 1 {
            guard case .joined(let membership) = record.phase, membership.rejoin == nil else { return .heldForResync }
            guard membership.resyncs >= maxResyncs else { return .resync }
            skipped = (position + 1)...(id - 1)
        }
        record.position?.id = id
        return .deliver(key: record.token?.key, skipped: skipped, epoch: epoch)
    }

    /// Changes a room's record in place; nothing for a room not in the table.
    mutating func update(_ name: String, _ change: (inout Record) -> Void) {
        guard records[name] != nil else { return }
        change(&records[name]!)
    }
}
