import RealtimeProtocol

/// A member's requests besides joining and leaving (docs/rooms-protocol.md "Client to
/// server"): a fresh token, an event into the room, a page of history.
extension RealtimeHub {
    func roomRefresh(_ request: RoomRefreshRequest, connection: Connection, in state: inout State) -> Outcome {
        let namespace = connection.namespace
        guard let membership = state.rooms[connection.app.id]?[request.room]?.members[connection.socketID] else {
            state.send(RoomFrame.error(.notJoined, "not joined", room: request.room, namespace: namespace), to: connection)
            return .handled
        }
        switch verifyRoomToken(request.token, room: request.room, app: connection.app) {
        case .success(let claims) where (claims.subject ?? connection.userID) == membership.user:
            state.rooms[connection.app.id]?[request.room]?.members[connection.socketID]?.expiresAt = claims.expiresAt
        case .success:
            state.send(RoomFrame.error(.forbidden, "the token is for another user", room: request.room, namespace: namespace), to: connection)
        case .failure(let refusal):
            state.send(RoomFrame.error(refusal.code, refusal.message, room: request.room, namespace: namespace), to: connection)
        }
        return .handled
    }

    func roomSend(_ request: RoomSendRequest, connection: Connection, at instant: ContinuousClock.Instant, in state: inout State) -> Outcome {
        let namespace = connection.namespace
        func refuse(_ code: RoomErrorCode, _ message: String) -> Outcome {
            state.send(RoomFrame.error(code, message, room: request.room, namespace: namespace), to: connection)
            return .handled
        }
        // Every send counts, refused or not: refusals cost an answer each.
        if case .close(let code, let reason) = countClientEvent(connection, at: instant, in: &state) { return .close(code, reason) }
        guard let room = state.rooms[connection.app.id]?[request.room] else { return refuse(.notJoined, "not joined") }
        let user: String
        do {
            user = try room.sender(socketID: connection.socketID, event: request.event, data: request.data)
        } catch {
            return refuse(error.code, error.message)
        }
        // Kept on the lane, with no lock held; a refusal reaches the sender alone.
        return .roomSend(RoomSendJob(socketID: connection.socketID, app: connection.app, room: request.room, event: request.event, data: request.data,
                                     user: user, namespace: namespace))
    }

    /// A member's event on its way to be kept (docs/rooms-protocol.md "Sending"): checked when
    /// it arrived, kept on the room's lane (`runRoomSend`).
    struct RoomSendJob: Hashable, Sendable {
        var socketID: String
        var app: RealtimeApp
        var room: String
        var event: String
        var data: String
        /// The sending member's user id (its key for an anonymous member).
        var user: String
        var namespace: ProtocolNamespace

        /// The room `error` frame for this send.
        func refusal(_ error: RoomError) -> String {
            RoomFrame.error(error.code, error.message, room: room, namespace: namespace)
        }
    }

    /// A member's send on the lane: kept and delivered (`keepRoomEvent`), or its refusal sent.
    func runRoomSend(_ job: RoomSendJob) {
        do throws(RoomError) {
            try keepRoomEvent(app: job.app, room: job.room, event: job.event, data: job.data, from: job.user, declared: nil, member: job.socketID)
        } catch {
            sendQueued(job.refusal(error), to: job.socketID)
        }
    }

    /// A member's request for a page of history (docs/rooms-protocol.md "History"), the
    /// answer's frame addressed by its request id.
    struct HistoryJob: Hashable, Sendable {
        var socketID: String
        var app: String
        var room: String
        /// The client's request id (1 to 64 characters), echoed in the answer.
        var request: String
        var before: UInt64?
        var limit: Int
        var namespace: ProtocolNamespace

        /// The `room_history` error frame for this request.
        func refusal(_ error: RoomError) -> String {
            RoomFrame.historyError(error.code, error.message, request: request, room: room, namespace: namespace)
        }
    }

    /// A member's `room_history` arrives, under the lock: checked, then its page read on the
    /// room's lane (`Outcome.history`, `runHistory`).
    func roomHistory(_ request: RoomHistoryRequest, connection: Connection, in state: inout State) -> Outcome {
        let job = HistoryJob(socketID: connection.socketID, app: connection.app.id, room: request.room, request: String(request.request.prefix(64)),
                             before: request.before, limit: request.limit ?? 50, namespace: connection.namespace)
        func refuse(_ code: RoomErrorCode, _ message: String) -> Outcome {
            state.send(job.refusal(RoomError(code, message)), to: connection)
            return .handled
        }
        guard !request.request.isEmpty, request.request.utf8.count <= 64 else { return refuse(.badRequest, "request must be 1 to 64 characters") }
        guard state.rooms[job.app]?[job.room]?.members[job.socketID] != nil else { return refuse(.notJoined, "not joined") }
        guard (1...RoomHistoryRequest.maxLimit).contains(job.limit) else { return refuse(.badRequest, "limit must be 1 to \(RoomHistoryRequest.maxLimit)") }
        return .history(job)
    }

    /// A history request's turn on the lane, under the lock: the member must still be one, and
    /// its read budget hold the most the page may cost (one request at a time on the lane, so
    /// exactly), before the store is asked for it.
    ///
    /// - Returns: the room's rule to read the page by, a refusal (queued to the member), or
    ///   `nil` for a connection gone.
    func historyTurn(_ job: HistoryJob, in state: inout State) -> RoomRule? {
        guard let connection = state.connections[job.socketID] else { return nil }
        guard let room = state.rooms[job.app]?[job.room], room.members[job.socketID] != nil else {
            state.send(job.refusal(RoomError(.notJoined, "not joined")), to: connection)
            return nil
        }
        guard hasReadBudget(job.limit * Self.maxRecordSize, connection: connection, in: state) else {
            state.send(job.refusal(Self.readBudgetRefusal), to: connection)
            return nil
        }
        return room.rule
    }

    /// A history request's answer, under the lock: the page (its bytes charged to the read
    /// budget) or the store's refusal, to the member.
    ///
    /// - Returns: the bytes of the page's frame (0 for a refusal or a connection gone).
    @discardableResult
    func historyAnswered(_ job: HistoryJob, _ answer: Result<RoomStorePage, RoomError>, in state: inout State) -> Int {
        guard let connection = state.connections[job.socketID] else { return 0 }
        switch answer {
        case .success(let page):
            let frame = RoomFrame.historyPage(page.events, more: page.more, request: job.request, room: job.room, namespace: job.namespace)
            chargeReadBudget(frame.utf8.count, connection: connection, in: &state)
            state.send(frame, to: connection)
            return frame.utf8.count
        case .failure(let error):
            state.send(job.refusal(error), to: connection)
            return 0
        }
    }

    /// A history request on the lane: reads what `historyTurn` allows, with no lock held, and
    /// hands the answer to `historyAnswered`.
    func runHistory(_ job: HistoryJob) {
        guard let rule = withState({ historyTurn(job, in: &$0) }) else { return }
        let answer: Result<RoomStorePage, RoomError>
        do throws(RoomError) {
            answer = .success(try historyPage(app: job.app, room: job.room, rule: rule, before: job.before, limit: job.limit))
        } catch {
            answer = .failure(error)
        }
        lane.meter(withState { historyAnswered(job, answer, in: &$0) })
    }
}
