import RealtimeProtocol

/// Times the room event path of the connection's state machine alone (no socket, no threads):
/// for the benchmark's breakdown of where a room event's time goes (BENCHMARKS.md).
package enum RoomHotPathProbe {
    /// Joins `room` on a machine, then feeds `frames` (kept `room_event` frames of it, ids from
    /// 1) through `textReceived` as the socket thread does.
    ///
    /// - Returns: the time taken by the frames, and the events the machine decided to deliver.
    package static func run(room: String, frames: [String]) -> (elapsed: Duration, delivered: Int) {
        var machine = ConnectionStateMachine(configuration: .init(
            namespace: .bird, activityTimeout: .seconds(120), pongTimeout: .seconds(30),
            pathChangePongTimeout: .seconds(1), authTimeout: .seconds(10)))
        let now = ContinuousClock.now
        _ = machine.prepareConnect()
        _ = machine.startAttempt()
        _ = machine.textReceived(generation: 1, text: RealtimeMessage(event: "bird:connection_established", data: #"{"socket_id":"1.1"}"#).text, now: now)
        _ = machine.joinRoom(room, now: now)
        let request = machine.timerFired(.roomAuthBatch, now: now).compactMap { action -> UInt64? in
            if case .authorizeRooms(_, let id) = action { id } else { nil }
        }.first ?? 0
        _ = machine.roomsAuthorized(request: request, .success(RoomAuthorizationResponse(time: 0, rooms: [room: .init(token: "t", expires: 3_600_000)])), now: now)
        _ = machine.textReceived(generation: 1, text: RoomFrame.system(RoomSystemEvent.joined, data: #"{"count":1,"epoch":"e","id":0}"#, room: room, namespace: .bird), now: now)
        var output: [ConnectionStateMachine.Action] = []
        output.reserveCapacity(16)
        var delivered = 0
        let start = ContinuousClock.now
        for frame in frames {
            machine.textReceived(generation: 1, text: frame, now: now, into: &output)
            delivered += output.count
            output.removeAll(keepingCapacity: true)
        }
        return (ContinuousClock.now - start, delivered)
    }
}
