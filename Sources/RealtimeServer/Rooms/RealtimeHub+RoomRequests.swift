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
        // Kept on the lane, with no lock held (issue 31); a refusal reaches the sender alone.
        let app = connection.app
        let socketID = connection.socketID
        let refusal = { @Sendable [self] (error: RoomError) in
            sendQueued(RoomFrame.error(error.code, error.message, room: request.room, namespace: namespace), to: socketID)
        }
        return .lane(LaneJob(client: socketID, room: (app.id, request.room), run: { [self] in
            do throws(RoomError) {
                try keepRoomEvent(app: app, room: request.room, event: request.event, data: request.data, from: user, declared: nil, member: socketID)
            } catch {
                refusal(error)
            }
        }, refused: { refusal(Self.laneRefusal) }))
    }

    func roomHistory(_ request: RoomHistoryRequest, connection: Connection, in state: inout State) -> Outcome {
        let namespace = connection.namespace
        let requestID = String(request.request.prefix(64))
        let socketID = connection.socketID
        // On the lane, with no lock held.
        let refusal = { @Sendable [self] (error: RoomError) in
            sendQueued(RoomFrame.historyError(error.code, error.message, request: requestID, room: request.room, namespace: namespace), to: socketID)
        }
        // Under the lock: queued.
        func refuse(_ code: RoomErrorCode, _ message: String) -> Outcome {
            state.send(RoomFrame.historyError(code, message, request: requestID, room: request.room, namespace: namespace), to: connection)
            return .handled
        }
        guard !request.request.isEmpty, request.request.utf8.count <= 64 else { return refuse(.badRequest, "request must be 1 to 64 characters") }
        guard state.rooms[connection.app.id]?[request.room]?.members[connection.socketID] != nil else {
            return refuse(.notJoined, "not joined")
        }
        let limit = request.limit ?? 50
        guard (1...RoomHistoryRequest.maxLimit).contains(limit) else { return refuse(.badRequest, "limit must be 1 to \(RoomHistoryRequest.maxLimit)") }
        let app = connection.app.id
        // Read on the lane, with no lock held; the budget is checked there (one request at a
        // time, so exactly) for the most the page may cost, before the store is asked for it.
        return .lane(LaneJob(client: socketID, room: (app, request.room), run: { [self] in
            let rule = self.withState { state -> Result<RoomRule, RoomError>? in
                guard let connection = state.connections[socketID] else { return nil }
                guard let room = state.rooms[app]?[request.room], room.members[socketID] != nil else { return .failure(RoomError(.notJoined, "not joined")) }
                guard hasReadBudget(limit * Self.maxRecordSize, connection: connection, in: state) else { return .failure(Self.readBudgetRefusal) }
                return .success(room.rule)
            }
            do throws(RoomError) {
                guard let rule = try rule?.get() else { return }
                let page = try historyPage(app: app, room: request.room, rule: rule, before: request.before, limit: limit)
                let frame = RoomFrame.historyPage(page.events, more: page.more, request: requestID, room: request.room, namespace: namespace)
                lane.meter(frame.utf8.count)
                self.withState { state in
                    guard let connection = state.connections[socketID] else { return }
                    chargeReadBudget(frame.utf8.count, connection: connection, in: &state)
                    state.send(frame, to: connection)
                }
            } catch {
                refusal(error)
            }
        }, refused: { refusal(Self.laneRefusal) }))
    }
}
