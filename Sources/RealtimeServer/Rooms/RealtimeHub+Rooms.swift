import Foundation
import RealtimeProtocol

/// Rooms on the hub (docs/rooms-protocol.md): the state of rooms and memberships, the read
/// budget, the room requests' dispatch and token checks, and the `joined` frame (the join
/// itself: `RealtimeHub+RoomJoin.swift`).
extension RealtimeHub {
    /// One connection's membership of a room.
    struct RoomMembership {
        /// The user the token vouched for (or the connection's signed-in user), `nil` if anonymous.
        var user: String?
        var info: JSONValue?
        /// The token's `exp`, seconds since 1970.
        var expiresAt: Int
        /// The id the member's join brought it to (its replay's end): kept events up to it are
        /// not delivered to it again.
        var after: UInt64 = 0
        /// The room's stream changed under the member (another epoch, or a gap the store could
        /// no longer fill): nothing is delivered to it until it rejoins (told with `resync`).
        var stale = false
    }

    /// A join whose read of the store runs on the lane (DESIGN.md's recipe: follow live first,
    /// buffer, read, merge by id): the events the room delivered since the join arrived, sent
    /// after its replay and `joined`, those its replay already holds left out.
    struct PendingJoin {
        /// Which join of the connection this is (`JoinJob.generation`): a leave and a new join
        /// while the first was on its way must not take the first's answer.
        var generation: UInt64
        /// The token's claims.
        var claims: RoomClaims
        /// The user the join is for (the token's, or the connection's signed-in user).
        var user: String?
        /// With a fan-out, delivered since the lane began the join's read, oldest first, with
        /// their epoch (on one node nothing is delivered between its read and its finish: both
        /// are one step of the lane).
        var delivered: [(epoch: String, record: RoomEventRecord)] = []
        /// Bytes of `delivered` as `RoomEventRecord.size` counts them.
        var bytes = 0
        /// More was delivered than a pending join keeps (`maxPendingJoinBytes`): the member
        /// is told to resync right after its `joined`.
        var overflowed = false
        /// Where the join is (`RealtimeHub+RoomJoin.swift`).
        var step = JoinStep.queued
    }

    /// A room with members (or joins on their way) on this node.
    struct Room {
        var rule: RoomRule
        /// When the backend issued `rule` (`RoomRuleRecord.issuedAt`): only a token issued later
        /// replaces it.
        var ruleIssuedAt: Int
        /// Socket ids in join order (the order of delivery).
        var order = SubscriberList()
        var members: [String: RoomMembership] = [:]
        /// Sockets per user key (anonymous sockets count as one user each).
        var users: [String: Set<String>] = [:]
        var countDirty = false
        /// The last `count` sent, so that one is sent only when the number changed.
        var lastCount: Int?
        /// With a fan-out: the position this node delivered the room's members up to (ids
        /// arrive from the bus in order; a skip is caught up from the store).
        var cursor: RoomPosition?
        /// On one node: the epoch of the stream the members joined. An event kept in another
        /// (the store dropped the stream and made it again) sends them `resync`: they rejoin
        /// from their positions and are told the gap, never given ids of a new epoch as if of
        /// the old one (which they would drop as already seen).
        var epoch: String?
        /// The id of the last kept event this node delivered to the room's members (for the
        /// console), or `nil` before the first.
        var lastID: UInt64?
        /// With a fan-out: when the bus last brought an event of the room, or the room was last
        /// compared with the store (`RealtimeHub.fanoutCheckInterval`).
        var checkedAt: ContinuousClock.Instant?
        /// With a fan-out, a presence room's members as this node's members were told (as
        /// `Channel.clusterView`).
        var clusterView: [String: JSONValue?]?
        /// Bytes of the last `joined` frame built for the room (a presence room's lists its
        /// members): what the next join is charged before it builds another.
        var joinedBytes = 0
        /// Joins on their way, by socket id: the store is read for them on the lane, and what
        /// the room delivers meanwhile waits in them (`PendingJoin`).
        var pending: [String: PendingJoin] = [:]

        static func userKey(_ user: String?, socketID: String) -> String { user ?? "\u{0}\(socketID)" }

        /// A room with no members yet, under `record`'s rule.
        init(record: RoomRuleRecord) {
            rule = record.rule
            ruleIssuedAt = record.issuedAt
        }
    }

    /// Largest presence `info` in a token, in bytes of JSON (Pusher's `user_info` limit).
    static let maxMemberInfoSize = 1024
    /// Most users in a presence room (its `joined` lists them all).
    static let maxPresenceMembers = 1000

    /// Most rooms one connection may join.
    static let maxRoomsPerConnection = 100
    /// Bytes of history and `joined` frames one connection may ask for per second: what one
    /// peer can make the server build and queue at once. Below the 4 MiB a connection may have
    /// queued (`WebSocketOutput.maxBufferedBytes`), so a client asking for several pages at
    /// once is answered `rate_limited` (and retries), never dropped (3 MiB).
    static let readBytesPerSecond = 3 * 1024 * 1024
    /// Bytes of replayed frames one connection is sent per second at most, its rooms together
    /// (16 MiB): a streamed replay past it waits for the next second. With the socket's flow
    /// control (`replayQueuedBytes`) it bounds what a peer that rejoins far back, again and
    /// again, makes the server read from its store.
    static let replayBytesPerSecond = 16 * 1024 * 1024
    /// Bytes of records one page of a streamed replay reads (the store's `maxBytes`; one more
    /// record may pass it): with the frames built from them, about what the server holds for
    /// one resuming member at a time (256 KiB).
    static let replayPageBytes = 256 * 1024
    /// Events one page of a streamed replay asks for at most.
    static let replayPageEvents = 2000
    /// A streamed replay's next page waits while its connection has more than this queued and
    /// not yet written to the socket (512 KiB): the socket's flow control, so a member that
    /// reads slowly holds the server's memory for at most this and a page.
    static let replayQueuedBytes = 512 * 1024
    /// How long a streamed replay first waits before it looks at its socket again, in
    /// milliseconds (5; doubled at each wait in a row, up to 160).
    static let replayFlowWaitMilliseconds = 5

    /// Whether `bytes` more fit the connection's read budget this second (any one request fits
    /// a fresh second: a join's replay and members list come to at most about 3.1 MiB, below
    /// the 4 MiB a connection may have queued). Every request is checked for the most it may
    /// cost before any of it is read or built, then charged what it did cost.
    func hasReadBudget(_ bytes: Int, connection: Connection, in state: State) -> Bool {
        readBudgetLeft(connection, in: state).map { bytes <= $0 } ?? true
    }

    /// Bytes left in the connection's read budget this second, or `nil` for a fresh second
    /// (where any one request fits).
    func readBudgetLeft(_ connection: Connection, in state: State) -> Int? {
        (state.connections[connection.socketID]?.budget ?? connection.budget).readBudgetLeft(at: now(), limits: limits)
    }

    /// Charges frame bytes actually queued to the connection's read budget.
    func chargeReadBudget(_ bytes: Int, connection: Connection, in state: inout State) {
        state.connections[connection.socketID]?.budget.chargeRead(bytes: bytes, at: now())
    }

    /// Largest room event `data`, in bytes of JSON text (Pusher's event limit).
    static let maxRoomDataSize = 10 * 1024
    /// Largest record a room keeps, in bytes as `RoomEventRecord.size` counts them: the most
    /// data, an event name of 200 bytes, a sender of 200 and 64 more.
    static let maxRecordSize = maxRoomDataSize + 200 + 200 + 64
    /// The answer to a client whose request does not fit its read budget.
    static let readBudgetRefusal = RoomError(.rateLimited, "more than \(readBytesPerSecond) bytes of replay, history and members a second")

    // MARK: - Client requests

    func handleRoom(_ name: ProtocolEventName, _ message: RealtimeMessage, from connection: Connection, at instant: ContinuousClock.Instant, in state: inout State) -> Outcome {
        if name == .roomJoin || name == .roomLeave || name == .roomRefresh || name == .roomHistory {
            if !(state.connections[connection.socketID]?.budget.roomRequest(at: instant, limits: limits) ?? true) {
                let text = "more than \(configurationStorage.roomRequestsPerSecond) room requests a second"
                if name == .roomHistory, let request = try? message.decodeData(RoomHistoryRequest.self) {
                    state.send(RoomFrame.historyError(.rateLimited, text, request: String(request.request.prefix(64)), room: request.room, namespace: connection.namespace), to: connection)
                } else {
                    let room = (try? message.decodeData(RoomLeaveRequest.self))?.room ?? ""
                    state.send(RoomFrame.error(.rateLimited, text, room: room, namespace: connection.namespace), to: connection)
                }
                return .handled
            }
        }
        do {
            switch name {
            case .roomJoin: return roomJoin(try message.decodeData(RoomJoinRequest.self), connection: connection, in: &state)
            case .roomLeave:
                let request = try message.decodeData(RoomLeaveRequest.self)
                leaveRoom(request.room, socketID: connection.socketID, app: connection.app.id, in: &state)
                return .handled
            case .roomRefresh: return roomRefresh(try message.decodeData(RoomRefreshRequest.self), connection: connection, in: &state)
            case .roomSend: return roomSend(try message.decodeData(RoomSendRequest.self), connection: connection, at: instant, in: &state)
            case .roomHistory: return roomHistory(try message.decodeData(RoomHistoryRequest.self), connection: connection, in: &state)
            default: return rejection(connection, "unknown event \(message.event.prefix(60))", code: nil, in: &state)
            }
        } catch {
            return rejection(connection, error.description, code: nil, in: &state)
        }
    }

    /// The claims of a token valid for `room` now, or the error code to answer.
    func verifyRoomToken(_ token: String, room: String, app: RealtimeApp) -> Result<RoomClaims, RoomError> {
        guard RoomName.isValid(room) else { return .failure(RoomError(.invalidRoom, "invalid room name")) }
        let claims: RoomClaims
        do {
            claims = try JSONWebToken.verify(token, secret: app.secret, as: RoomClaims.self)
        } catch .badSignature {
            return .failure(RoomError(.badSignature, "the token is not signed with this app's secret"))
        } catch {
            return .failure(RoomError(.invalidToken, error.description))
        }
        let rule = claims.rule ?? RoomRule()
        guard rule.isValid else { return .failure(RoomError(.invalidToken, "the token's rule is out of range")) }
        if let info = claims.info {
            guard ((try? RealtimeMessage.jsonText(info))?.utf8.count ?? .max) <= Self.maxMemberInfoSize else {
                return .failure(RoomError(.invalidToken, "the token's info is larger than \(Self.maxMemberInfoSize) bytes"))
            }
        }
        // Only a public grant may name a pattern; any other token names exactly one room.
        let matches = claims.room == room || (rule.isPublic && RoomName.match(room, pattern: claims.room) != nil)
        guard matches else { return .failure(RoomError(.forbidden, "the token is for another room")) }
        guard claims.expiresAt > wallSeconds() else { return .failure(RoomError(.expired, "the token has expired")) }
        return .success(claims)
    }

    func joinedJSON(_ room: Room, own: (user: String, info: JSONValue?)?, position: RoomPosition, recovered: Bool?, reason: RoomUnrecoverableReason?) -> String {
        var output = #"{"count":\#(room.users.count),"epoch":"#
        RealtimeMessage.appendJSONString(position.epoch, to: &output)
        output += #","id":\#(position.id)"#
        if room.rule.presence, var view = room.clusterView {
            // The view, and the joining user (whose arrival the bus may not have brought yet).
            if let own, view[own.user] == nil { view.updateValue(own.info, forKey: own.user) }
            output += #","members":["#
            output += view.sorted { $0.key < $1.key }.prefix(Self.maxPresenceMembers).map { Self.memberJSON($0.key, info: $0.value) }.joined(separator: ",")
            output += "]"
        } else if room.rule.presence {
            output += #","members":["#
            var first = true
            for (key, sockets) in room.users.sorted(by: { $0.key < $1.key }) {
                guard let socketID = sockets.first, let member = room.members[socketID], let user = member.user, key == user else { continue }
                if !first { output += "," }
                first = false
                output += Self.memberJSON(user, info: member.info)
            }
            output += "]"
        }
        if let reason {
            output += #","reason":"#
            RealtimeMessage.appendJSONString(reason.rawValue, to: &output)
        }
        if let recovered { output += #","recovered":\#(recovered)"# }
        output += "}"
        return output
    }

    static func memberJSON(_ user: String, info: JSONValue?) -> String {
        var output = #"{"id":"#
        RealtimeMessage.appendJSONString(user, to: &output)
        if let info, let text = try? RealtimeMessage.jsonText(info) { output += #","info":\#(text)"# }
        output += "}"
        return output
    }
}
