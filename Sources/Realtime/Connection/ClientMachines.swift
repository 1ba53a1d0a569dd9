import RealtimeProtocol
import Reconnect

/// The client's decisions joined as `BirdRealtime` joins them (the connection's machine with its
/// channels and rooms, and the reconnector's), for an owner that performs them on a clock of its
/// own: the seeded simulation (`RealtimeSimulation`) runs real clients this way against real
/// hubs. Nothing here opens a socket, arms a timer or asks a backend: each call returns the
/// `Step`s to perform, in order, and the owner answers with the calls below (a frame, a close, a
/// timer, an auth answer), as `RealtimeConnection` and `Reconnector` do for the real client.
///
/// The wiring is theirs: a stream event goes to the reconnector's machine as it is produced;
/// the connection's actions that the reconnector's steps produce (an attempt, an abort, a
/// verify) follow the batch being performed, as `RealtimeConnection.drain` takes them; a delay
/// longer than the attempt floor makes the connection `unavailable`; no delegate is asked (every
/// vote passes, as with none added); a timer fired 5 s or more past its deadline verifies the
/// connection (`ConnectionStateMachine.resumedAfterFreeze`).
package struct ClientMachines {
    /// What the owner performs.
    package enum Step: Sendable {
        /// Open a socket for `generation`; report its frames with `received`, its end with `closed`.
        case open(generation: UInt64)
        /// Send a text frame on the socket of `generation`, if it is still open.
        case send(String, generation: UInt64)
        /// Close the socket of `generation` with `code`.
        case close(code: UInt16, generation: UInt64)
        /// Drop the socket of `generation` with no close frame.
        case abort(generation: UInt64)
        /// Arm `timer` for `at` (replacing one armed under it); call `fire` then.
        case schedule(Timer, at: ContinuousClock.Instant)
        /// Disarm `timer`.
        case cancel(Timer)
        /// Ask the room auth route for `rooms`; answer with `roomsAuthorized`.
        case authorizeRooms([String], request: UInt64)
        /// Ask the channel auth route (Pusher's `POST /pusher/auth`) for a private or presence
        /// subscription; answer with `channelAuthorized`.
        case authorizeChannel(ChannelAuthorizationRequest, request: UInt64)
        /// A room's handlers get an event: a kept one (`meta.id` > 0) or one of the room's own
        /// (`joined`, `error`…). `data` is the data as compact JSON text.
        case roomEvent(room: String, event: String, data: String, meta: RoomEventMeta)
        /// A room became joined (`nil`) or ended with the error.
        case roomSettled(room: String, error: RoomError?)
        /// The connection's state changed.
        case state(ConnectionState)
        /// What the reconnector did (attempts, delays).
        case reconnect(ReconnectEvent)
        /// An error the client tells its app (`onError`).
        case report(String)
    }

    /// A timer the machines arm.
    package struct Timer: Hashable, Sendable {
        fileprivate enum Kind: Hashable, Sendable {
            case connection(ConnectionStateMachine.TimerID)
            /// The reconnector's one timer (its id is kept here).
            case reconnect
        }

        fileprivate let kind: Kind
    }

    private var connection: ConnectionStateMachine
    private var reconnector: ReconnectStateMachine
    /// The id of the reconnector's armed timer.
    private var reconnectTimer: UInt64?
    /// When each armed timer is due, to tell a late one (`resumedAfterFreeze`).
    private var deadlines: [Timer: ContinuousClock.Instant] = [:]
    /// The reconnector's delays up to this are the attempt floor, not a wait (`BirdRealtime`).
    private let floor: Duration

    /// A client with `options` (its namespace, timeouts, backoff and rooms' settings), its
    /// backoff's jitter drawn from `random`.
    package init(options: BirdRealtime.Options, random: some RandomNumberGenerator & Sendable) {
        connection = ConnectionStateMachine(configuration: .init(options: options))
        let configuration = BirdRealtime.reconnectConfiguration(options)
        reconnector = ReconnectStateMachine(configuration: configuration, random: random)
        floor = configuration.minimumAttemptInterval
    }

    // MARK: - Reads

    /// The connection's state (seed, "The six states").
    package var state: ConnectionState { connection.state }

    /// The handshake's socket id while connected.
    package var socketID: String? { connection.connectionId }

    /// The room's position: the epoch and the last id it holds (saved by an app to rejoin from).
    package func position(of room: String) -> RoomPosition? { connection.rooms[room]?.position }

    /// Whether the room is joined now.
    package func isJoined(_ room: String) -> Bool { connection.rooms[room]?.state == .joined }

    /// The reconnector's floor between two attempts (`ReconnectConfiguration.minimumAttemptInterval`).
    package var attemptFloor: Duration { floor }

    /// Whether the room failed for good (the app must join it again).
    package func hasFailed(_ room: String) -> Bool { connection.rooms[room]?.state == .failed }

    /// A presence channel's members as the app reads them (`PresenceChannel.members`), user
    /// ids in the order listed or added; `nil` while the channel is not subscribed.
    package func members(of channel: String) -> [String]? {
        guard let record = connection.channels.table[channel], record.subscribed else { return nil }
        return record.members.list.map(\.userID)
    }

    // MARK: - The app's calls

    /// `connect()`.
    package mutating func connect(now: ContinuousClock.Instant) -> [Step] {
        let (start, actions) = connection.prepareConnect()
        var steps: [Step] = []
        var queued = actions
        if start {
            if reconnector.isReconnecting { performReconnector(reconnector.stop(), now: now, queue: &queued, steps: &steps) }
            performReconnector(reconnector.manualStart(now: now, immediately: true), now: now, queue: &queued, steps: &steps)
        }
        return steps + perform(queued, now: now)
    }

    /// `disconnect()`.
    package mutating func disconnect(now: ContinuousClock.Instant) -> [Step] { perform(connection.disconnect(), now: now) }

    /// `join(room)`, from `position` when the app saved one.
    package mutating func join(_ room: String, from position: RoomPosition? = nil, now: ContinuousClock.Instant) -> [Step] {
        perform(connection.joinRoom(room, from: position, now: now).actions, now: now)
    }

    /// `room.send(event, data)`: the error when nothing was sent.
    package mutating func send(_ room: String, event: String, data: String, now: ContinuousClock.Instant) -> (RoomError?, [Step]) {
        let (error, actions) = connection.sendToRoom(room, event: event, data: data)
        return (error, perform(actions, now: now))
    }

    /// `subscribe(channel)`: a public channel's frame, or a private or presence channel's
    /// authorisation first (seed, "Channels").
    package mutating func subscribe(_ channel: String, now: ContinuousClock.Instant) -> [Step] {
        perform(connection.subscribe(channel, now: now), now: now)
    }

    // MARK: - What the owner reports

    /// A text frame on the socket of `generation`.
    package mutating func received(_ text: String, generation: UInt64, now: ContinuousClock.Instant) -> [Step] {
        perform(connection.textReceived(generation: generation, text: text, now: now), now: now)
    }

    /// The socket of `generation` ended: `code` from the close frame, 1006 when it dropped.
    package mutating func closed(generation: UInt64, code: UInt16, reason: String, now: ContinuousClock.Instant) -> [Step] {
        perform(connection.socketClosed(generation: generation, code: code, reason: reason), now: now)
    }

    /// The room auth route answered request `request`.
    package mutating func roomsAuthorized(request: UInt64, _ result: Result<RoomAuthorizationResponse, AuthorizationError>,
                                          now: ContinuousClock.Instant) -> [Step] {
        perform(connection.roomsAuthorized(request: request, result, now: now), now: now)
    }

    /// The channel auth route answered request `request` for `channel`.
    package mutating func channelAuthorized(_ channel: String, request: UInt64,
                                            _ result: Result<ChannelAuthorizationResponse, AuthorizationError>,
                                            now: ContinuousClock.Instant) -> [Step] {
        perform(connection.authorizationAnswered(channel: channel, request: request, result), now: now)
    }

    /// `timer` fired (one the owner armed and did not disarm since).
    package mutating func fire(_ timer: Timer, now: ContinuousClock.Instant) -> [Step] {
        let deadline = deadlines.removeValue(forKey: timer)
        switch timer.kind {
        case .reconnect:
            guard let id = reconnectTimer else { return [] }
            reconnectTimer = nil
            var queued: [ConnectionStateMachine.Action] = []
            var steps: [Step] = []
            performReconnector(reconnector.timerFired(id: id, now: now), now: now, queue: &queued, steps: &steps)
            return steps + perform(queued, now: now)
        case .connection(let id):
            var actions = connection.timerFired(id, now: now)
            if let deadline, now - deadline >= ConnectionStateMachine.frozenTimerLateness { actions += connection.resumedAfterFreeze(now: now) }
            return perform(actions, now: now)
        }
    }

    // MARK: - Performing

    /// The connection's actions as steps; stream events go to the reconnector as they come, the
    /// connection's actions it asks for follow the batch.
    private mutating func perform(_ first: [ConnectionStateMachine.Action], now: ContinuousClock.Instant) -> [Step] {
        var steps: [Step] = []
        var batch = first
        // Bounded: each round is caused by a reconnector step, which a stream event causes.
        for _ in 0..<64 where !batch.isEmpty {
            var queued: [ConnectionStateMachine.Action] = []
            for action in batch {
                switch action {
                case .open(let generation): steps.append(.open(generation: generation))
                case .send(let text, let generation): steps.append(.send(text, generation: generation))
                case .close(let code, _, let generation): steps.append(.close(code: code.rawValue, generation: generation))
                case .abort(let generation): steps.append(.abort(generation: generation))
                case .forget: break
                case .schedule(let id, let at):
                    let timer = Timer(kind: .connection(id))
                    deadlines[timer] = at
                    steps.append(.schedule(timer, at: at))
                case .cancel(let id):
                    let timer = Timer(kind: .connection(id))
                    deadlines[timer] = nil
                    steps.append(.cancel(timer))
                case .authorizeRooms(let rooms, let request): steps.append(.authorizeRooms(rooms, request: request))
                case .authorize(let channel, let request): steps.append(.authorizeChannel(channel, request: request))
                case .deliverRoom(let delivery):
                    let data = (try? RealtimeMessage.jsonText(delivery.data)) ?? "null"
                    steps.append(.roomEvent(room: delivery.room, event: delivery.event, data: data, meta: delivery.meta))
                case .settleRoom(let room, let error): steps.append(.roomSettled(room: room, error: error))
                case .publishState(let change): steps.append(.state(change.current))
                case .report(let error): steps.append(.report(error.description))
                case .stream(let event):
                    let actions: [ReconnectStateMachine.Action]
                    switch event {
                    case .willConnect: actions = reconnector.streamWillConnect()
                    case .opened: actions = reconnector.streamOpened()
                    case .ready: actions = reconnector.streamReady(now: now)
                    case .toldToDisconnect: actions = reconnector.streamToldToDisconnect()
                    case .disconnected(_, let retry): actions = reconnector.streamDisconnected(now: now, retry: retry)
                    case .refused(let reason): actions = reconnector.streamRefused(reason: reason)
                    }
                    performReconnector(actions, now: now, queue: &queued, steps: &steps)
                // Channel events reach the app through its handlers, which the owner reads from
                // the table (`members(of:)`); signin and history are not driven through this type.
                case .authenticate, .cancelRequest, .reportSignin, .deliver, .finishHistory: break
                }
            }
            batch = queued
        }
        if !batch.isEmpty { steps.append(.report(Self.unsettled)) }
        return steps
    }

    /// What `.report` says when the machines' actions did not settle in 64 rounds (each round
    /// caused by a stream event the last one produced): a loop between the two machines.
    package static let unsettled = "the client's machines did not settle in 64 rounds of actions"

    /// The reconnector's actions: its timer and events as steps, its calls on the connection
    /// queued (as `Reconnector` calls the stream), every vote passed.
    private mutating func performReconnector(_ first: [ReconnectStateMachine.Action], now: ContinuousClock.Instant,
                                             queue: inout [ConnectionStateMachine.Action], steps: inout [Step]) {
        var actions = first
        var index = 0
        while index < actions.count {
            switch actions[index] {
            case .notifyAccidentalDisconnect: break
            case .scheduleTimer(let id, let deadline):
                reconnectTimer = id
                let timer = Timer(kind: .reconnect)
                deadlines[timer] = deadline
                steps.append(.schedule(timer, at: deadline))
            case .cancelTimer:
                reconnectTimer = nil
                deadlines[Timer(kind: .reconnect)] = nil
                steps.append(.cancel(Timer(kind: .reconnect)))
            case .askDelegates(let vote, _, _): actions += reconnector.voteFinished(id: vote, approved: true, now: now)
            case .connect: queue += connection.startAttempt()
            case .abortAttempt: queue += connection.abortAttempt()
            case .verifyConnection: queue += connection.verify(now: now)
            case .emit(let event):
                steps.append(.reconnect(event))
                switch event {
                case .scheduled(_, let delay) where delay > floor: queue += connection.waitingForRetry()
                case .vetoed, .waitingForReachability: queue += connection.waitingForRetry()
                default: break
                }
            }
            index += 1
        }
    }
}
