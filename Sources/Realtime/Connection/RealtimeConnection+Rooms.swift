import RealtimeProtocol

/// Rooms on the connection: the `Room` objects, their commands into the machine and the history
/// calls waiting for their page (the decisions are `RoomsMachine`'s, through the connection's
/// machine).
extension RealtimeConnection {
    func join(_ name: String, from position: RoomPosition? = nil) -> Room {
        let now = scheduler.now
        return run { state in
            let room = state.roomObjects[name] ?? makeRoom(name)
            state.roomObjects[name] = room
            return (room, state.machine.joinRoom(name, from: position, now: now).actions)
        }
    }

    func existingRoom(named name: String) -> Room? { state.withLock { $0.roomObjects[name] } }

    var roomNames: [String] { state.withLock { $0.machine.rooms.order } }

    func leave(_ name: String) {
        let room = run { state in (state.roomObjects.removeValue(forKey: name), state.machine.leaveRoom(name)) }
        room?.markLeft()
    }

    func setRoomGrants(_ configuration: RoomConfiguration) {
        let now = scheduler.now
        state.withLock { $0.machine.setRoomGrants(configuration, now: now) }
    }

    /// What the machine knows of a room (for `Room`'s reads).
    func record(ofRoom name: String) -> RoomTable.Record? { state.withLock { $0.machine.rooms[name] } }

    private func makeRoom(_ name: String) -> Room {
        let errorObservers = errorObservers
        let parts = Room.Parts(
            outbox: outbox,
            record: { [weak self] name in self?.record(ofRoom: name) },
            members: { [weak self] name in self?.state.withLock { $0.machine.rooms.members[name] } ?? [:] },
            leave: { [weak self] name in self?.leave(name) },
            send: { [weak self] room, event, data in
                guard let self else { return RoomError(.disconnected, "the client is gone") }
                return self.run { state in state.machine.sendToRoom(room, event: event, data: data) }
            },
            history: { [weak self] room, before, limit in
                guard let self else { return .failure(RoomError(.disconnected, "the client is gone")) }
                return await self.history(room, before: before, limit: limit)
            },
            report: { [outbox] error in outbox.enqueue { errorObservers.send(error) } },
            isCurrent: { [weak self] room in self?.state.withLock { $0.roomObjects[room.name] === room } ?? false },
            stalled: { [weak self] in
                switch self?.state.withLock({ $0.machine.state }) {
                case .failed?: return RoomError(.disconnected, "the connection failed: the room joins after connect()")
                case .disconnected?: return RoomError(.disconnected, "disconnect() was called: the room joins after connect()")
                default: return nil
                }
            })
        return Room(name: name, parts: parts)
    }

    private func history(_ room: String, before: UInt64?, limit: Int) async -> Result<RoomHistoryPage, RoomError> {
        await withCheckedContinuation { continuation in
            let now = scheduler.now
            run { state in
                let request = state.machine.nextRequest()
                state.historyWaiters[request] = continuation
                return ((), state.machine.requestHistory(room, before: before, limit: limit, request: request, now: now))
            }
        }
    }
}
