import RealtimeProtocol
import Reconnect

/// The realtime connection's decisions, without I/O (STYLE.md: a struct with a private state
/// enum, events in, actions out; the owner, `RealtimeConnection`, performs the actions after
/// releasing its lock, in order). It implements the realtime-connection-lifecycle seed: the six
/// states, the close-code reactions and the stale-connection check. Channels and signin
/// (`ChannelsMachine`: resubscribed after every handshake, authorised per connection id, signin
/// on every connection) and rooms (`RoomsMachine`) decide in machines of their own, which this
/// one hands each handshake and each end of a socket, and the frames and timers that are theirs.
///
/// Every socket has a generation: events of an older socket, timers armed for it and answers
/// to requests made for it are ignored (DESIGN.md: frames of the old socket delivered after the
/// new one is up; a pong deadline of the old connection killing the new one; an auth answer
/// from before a drop used for the new connection).
struct ConnectionStateMachine {
    struct Configuration: Sendable {
        var namespace: ProtocolNamespace
        /// Silence before a ping when the handshake gives no `activity_timeout`.
        var activityTimeout: Duration
        var pongTimeout: Duration
        var pathChangePongTimeout: Duration
        var authTimeout: Duration
        /// How long joins wait to share one auth request (rooms seed: "every room it joins in
        /// the same moment in one request").
        var roomAuthBatchWindow: Duration = .milliseconds(10)
    }

    /// What the connection is doing; each case carries what only it has.
    enum Phase {
        /// No socket. The public state is `initialized`, `connecting` (an attempt is about to
        /// start), `unavailable`, `disconnected` or `failed`.
        case idle
        /// A socket is opening or open, waiting for the handshake.
        case opening(generation: UInt64)
        /// The handshake arrived.
        case connected(Connected)
    }

    struct Connected {
        let generation: UInt64
        /// The handshake's socket id (`bird.connection.connectionId`).
        let socketID: String
    }

    let configuration: Configuration
    private(set) var state: ConnectionState = .initialized
    private(set) var phase: Phase = .idle
    /// The channels' and signin's own machine: subscriptions belong to one connection.
    var channels: ChannelsMachine
    /// The rooms' own machine: their phases, positions and tokens outlive every socket.
    var rooms: RoomsMachine
    /// The stale check of the connected socket: set by the handshake, `nil` whenever the phase
    /// is not `connected`. Kept beside the phase, not in its payload, because every frame
    /// touches it (the hot path mutates it in place).
    private(set) var activity: ActivityMonitor?
    private var lastGeneration: UInt64 = 0
    /// Ids for every request the owner performs: channel authorisations, signins, room auth
    /// and history requests.
    var requestIDs = RequestIDs()

    /// `<ns>:room_event`, compared whole on the per-frame path.
    let roomEventName: String

    init(configuration: Configuration) {
        self.configuration = configuration
        channels = ChannelsMachine(configuration: configuration)
        rooms = RoomsMachine(configuration: configuration)
        roomEventName = configuration.namespace.event(.roomEvent)
    }

    /// The shortest activity timeout a handshake may set, in seconds (issue: a hostile
    /// `activity_timeout` of 1e-300 made 7,300 pings a second).
    static let minimumActivityTimeout: Double = 1

    // MARK: - Reads

    var generation: UInt64? {
        switch phase {
        case .idle: return nil
        case .opening(let generation): return generation
        case .connected(let connected): return connected.generation
        }
    }

    var connected: Connected? { if case .connected(let connected) = phase { connected } else { nil } }

    /// The socket id, only while `connected` (seed: set before the state becomes connected).
    var connectionId: String? { connected?.socketID }

    /// The activity timeout in force.
    var activityTimeout: Duration { activity?.timeout ?? configuration.activityTimeout }

    /// Whether the handshake arrived on the current socket.
    var isConnected: Bool { if case .connected = phase { true } else { false } }

    var signedInUserData: String? { channels.signedInUserData }

    // MARK: - App commands

    /// `connect()`: `connecting` unless a socket is opening or open.
    ///
    /// - Returns: whether the owner should start a connection (through the reconnector).
    mutating func prepareConnect() -> (start: Bool, actions: [Action]) {
        switch phase {
        case .opening, .connected: return (false, [])
        case .idle: return (true, set(.connecting))
        }
    }

    /// `disconnect()`: close with 1000, `disconnected`, nothing scheduled.
    mutating func disconnect() -> [Action] {
        guard state != .disconnected else { return [] }
        var actions: [Action] = []
        if let generation { actions.append(.close(.normalClosure, reason: "disconnect()", generation: generation)) }
        actions += endSocket(forgetting: false)
        actions += set(.disconnected)
        actions += rooms.settleJoining(RoomError(.disconnected, "disconnect() was called: the room joins after connect()"))
        actions += [.stream(.toldToDisconnect), .stream(.disconnected(error: nil, retry: .policy))]
        return actions
    }

    /// The reconnector scheduled a delay or a delegate vetoed: `unavailable` if no socket.
    mutating func waitingForRetry() -> [Action] {
        guard case .idle = phase, state == .connecting else { return [] }
        return set(.unavailable)
    }

    // MARK: - The reconnector's commands

    /// Opens a new socket (any older one is dropped). The app's `disconnect()` or a refusal
    /// that came between the reconnector's decision and this call wins: nothing opens.
    mutating func startAttempt() -> [Action] {
        guard state != .disconnected, state != .failed else { return [] }
        var actions: [Action] = []
        if let generation { actions.append(.abort(generation: generation)) }
        actions += endSocket(forgetting: false)
        actions += set(.connecting)
        lastGeneration += 1
        phase = .opening(generation: lastGeneration)
        actions += [.stream(.willConnect), .open(generation: lastGeneration)]
        return actions
    }

    /// The transport could not open the socket of `generation`: told as 1006 (RFC 6455 §7.1.5:
    /// closed with no close frame), as a browser and the Kotlin client tell it.
    mutating func openFailed(generation: UInt64, message: String) -> [Action] {
        guard self.generation == generation else { return [] }
        return failAttempt(RealtimeError(kind: .transport, code: Int(RealtimeCloseCode.abnormalClosure.rawValue), message: message))
    }

    /// The reconnector's attempt timeout: give up a socket with no handshake yet.
    mutating func abortAttempt() -> [Action] {
        guard case .opening(let generation) = phase else { return [] }
        return [.abort(generation: generation)] + failAttempt(RealtimeError(kind: .transport, message: "no handshake within the connect timeout"))
    }

    /// The network path changed while connected: ping with the short deadline.
    mutating func verify(now: ContinuousClock.Instant) -> [Action] {
        guard case .connected(let connected) = phase, var monitor = activity else { return [] }
        let monitorActions = monitor.ping(deadline: configuration.pathChangePongTimeout, pathChange: true, now: now)
        activity = monitor
        return perform(monitorActions, for: connected)
    }

    /// How late a timer must fire to mean that the process was frozen (SIGSTOP, a suspended
    /// machine, an app in the background): 5 s past its deadline.
    static let frozenTimerLateness: Duration = .seconds(5)

    /// A timer fired at least `frozenTimerLateness` past its deadline: the process did not run
    /// meanwhile, and the server's timeouts may have ended the connection (the
    /// rooms seed's "coming back from the background"). The connection is verified at once
    /// with the short pong deadline (`Options.pathChangePongTimeout`, 1 s) instead of the
    /// 30 s one, so a dead one is replaced within a second of resuming. (Room tokens need no
    /// step of their own: their refresh timers are due too and fire, late, at the same time.)
    mutating func resumedAfterFreeze(now: ContinuousClock.Instant) -> [Action] {
        guard case .connected(let connected) = phase, var monitor = activity else { return [] }
        let monitorActions = monitor.ping(deadline: configuration.pathChangePongTimeout, pathChange: false, now: now)
        activity = monitor
        return perform(monitorActions, for: connected)
    }

    // MARK: - Socket events

    /// The socket of `generation` closed with `code` (1006 when it dropped without a close frame).
    mutating func socketClosed(generation: UInt64, code: UInt16, reason: String) -> [Action] {
        guard self.generation == generation else { return [] }
        let closeCode = RealtimeCloseCode(rawValue: code)
        let kind: RealtimeError.Kind = closeCode == .abnormalClosure ? .transport : .closed
        let message = !reason.isEmpty ? reason
            : kind == .transport ? "the connection dropped without a close frame" : "closed with \(code)"
        let failure = RealtimeError(kind: kind, code: Int(code), message: message)
        var actions: [Action] = [.report(failure)] + endSocket(forgetting: true)
        switch closeCode.reaction {
        case .fail:
            actions += set(.failed)
            // Nothing will join until the app calls connect(): a `ready()` waiting would wait forever.
            actions += rooms.settleJoining(RoomError(.disconnected, "the connection failed (\(code)\(reason.isEmpty ? "" : " \(reason)")): the room joins after connect()"))
            actions += [.stream(.refused(reason: "\(code) \(reason)")), .stream(.disconnected(error: failure, retry: .policy))]
        case .reconnectNow:
            actions += set(.connecting)
            actions.append(.stream(.disconnected(error: failure, retry: .immediately)))
        case .backOff:
            actions += set(.unavailable)
            actions.append(.stream(.disconnected(error: failure, retry: .policy)))
        }
        return actions
    }

    /// The socket of `generation` failed (the transport's own error): told as 1006, as
    /// `openFailed`.
    mutating func socketFailed(generation: UInt64, message: String) -> [Action] {
        guard self.generation == generation else { return [] }
        return failAttempt(RealtimeError(kind: .transport, code: Int(RealtimeCloseCode.abnormalClosure.rawValue), message: message))
    }

    /// A binary frame: the protocol is text only.
    mutating func binaryReceived(generation: UInt64, size: Int, now: ContinuousClock.Instant) -> [Action] {
        guard self.generation == generation else { return [] }
        return noteActivity(now: now) + [.report(RealtimeError(kind: .protocolViolation, message: "binary frame of \(size) bytes ignored"))]
    }

    // MARK: - Timers

    mutating func timerFired(_ id: TimerID, now: ContinuousClock.Instant) -> [Action] {
        switch id {
        case .activityCheck(let generation):
            guard case .connected(let connected) = phase, connected.generation == generation, var monitor = activity else { return [] }
            let monitorActions = monitor.activityCheckDue(now: now, pongTimeout: configuration.pongTimeout)
            activity = monitor
            return perform(monitorActions, for: connected)
        case .pongDeadline(let generation, let sequence):
            guard case .connected(let connected) = phase, connected.generation == generation,
                  let probe = activity?.pongDeadlinePassed(sequence: sequence) else { return [] }
            let failure = RealtimeError(kind: .pongTimeout, code: Int(RealtimeCloseCode.pongNotReceived.rawValue),
                                        message: probe.pathChange ? "no pong after the network path changed" : "no pong within the pong timeout")
            // Seed: close with an immediate-retry code. After a path change the path is known
            // to be gone: wait for reachability (or the backoff) instead of failing at once.
            var actions: [Action] = [.report(failure), .close(.pongNotReceived, reason: "pong not received", generation: generation)]
            actions += endSocket(forgetting: false)
            actions += set(probe.pathChange ? .unavailable : .connecting)
            actions.append(.stream(.disconnected(error: failure, retry: probe.pathChange ? .policy : .immediately)))
            return actions
        case .authorization(let channel, let request):
            return channels.authorizationAnswered(channel: channel, request: request, .failure(.timedOut(configuration.authTimeout)))
        case .signin(let request):
            return channels.signinTimedOut(request: request)
        case .roomAuthBatch:
            return rooms.authBatchDue(now: now, ids: &requestIDs)
        case .roomAuthRetry(let request):
            return rooms.authRetryDue(request: request)
        case .roomToken(let room):
            return rooms.tokenDue(room, now: now)
        case .roomRetry(let room):
            return rooms.retryDue(room, now: now)
        case .roomHistory(let request):
            return rooms.historyTimedOut(request: request)
        case .roomJoin(let room):
            return rooms.joinTimedOut(room, now: now)
        }
    }

    // MARK: - Shared steps

    /// Ends an attempt that backs off (seed: network failures take the backoff path).
    mutating func failAttempt(_ failure: RealtimeError) -> [Action] {
        [.report(failure)] + endSocket(forgetting: true) + set(.unavailable) + [.stream(.disconnected(error: failure, retry: .policy))]
    }

    /// Forgets the current socket: timers disarmed, requests dropped, channels unsubscribed.
    mutating func endSocket(forgetting: Bool) -> [Action] {
        var actions: [Action] = []
        switch phase {
        case .idle:
            return []
        case .opening(let generation):
            if forgetting { actions.append(.forget(generation: generation)) }
        case .connected(let connected):
            if forgetting { actions.append(.forget(generation: connected.generation)) }
            actions.append(.cancel(.activityCheck(generation: connected.generation)))
            if let probe = activity?.probe {
                actions.append(.cancel(.pongDeadline(generation: connected.generation, sequence: probe.sequence)))
            }
        }
        phase = .idle
        activity = nil
        // Answers for this connection's id are useless to the next one.
        actions += channels.disconnected()
        actions += rooms.disconnected()
        return actions
    }

    mutating func set(_ new: ConnectionState) -> [Action] {
        let previous = state
        guard previous != new else { return [] }
        state = new
        return [.publishState(ConnectionStateChange(previous: previous, current: new))]
    }

    /// A frame arrived on the current connection: the stale check hears of it.
    mutating func noteActivity(now: ContinuousClock.Instant) -> [Action] {
        if activity?.frameReceivedQuietly(now: now) ?? true { return [] }
        guard let monitorActions = activity?.frameReceived(now: now), !monitorActions.isEmpty,
              case .connected(let connected) = phase else { return [] }
        return perform(monitorActions, for: connected)
    }

    /// The activity monitor's actions, as the owner's.
    func perform(_ monitorActions: [ActivityMonitor.Action], for connected: Connected) -> [Action] {
        let generation = connected.generation
        return monitorActions.map { action in
            switch action {
            case .scheduleActivityCheck(let at): return .schedule(.activityCheck(generation: generation), at: at)
            case .sendPing: return .send(RealtimeMessage(event: configuration.namespace.event(.ping), data: "{}").text, generation: generation)
            case .schedulePongDeadline(let sequence, let at): return .schedule(.pongDeadline(generation: generation, sequence: sequence), at: at)
            case .cancelPongDeadline(let sequence): return .cancel(.pongDeadline(generation: generation, sequence: sequence))
            }
        }
    }

    mutating func nextRequest() -> UInt64 { requestIDs.next() }

    /// Replaces the connected phase's data; only the socket that is open (opening, or
    /// connected with the same generation) may become or stay connected: anything else is a
    /// bug in the machine, loud in debug builds.
    mutating func update(_ connected: Connected) {
        assert(generation == connected.generation, "Connected data for generation \(connected.generation) in phase \(phase)")
        phase = .connected(connected)
    }

    mutating func startActivity(_ monitor: ActivityMonitor) {
        assert(isConnected, "an activity monitor outside the connected phase")
        activity = monitor
    }

    // MARK: - Channels and signin (decided by `channels`)

    mutating func subscribe(_ name: String, now: ContinuousClock.Instant) -> [Action] {
        channels.subscribe(name, now: now, ids: &requestIDs)
    }
    mutating func unsubscribe(_ name: String) -> [Action] { channels.unsubscribe(name) }
    func trigger(_ event: String, data: String, on channel: String) -> (sent: Bool, actions: [Action]) {
        channels.trigger(event, data: data, on: channel)
    }
    mutating func signin(now: ContinuousClock.Instant) -> [Action] { channels.signin(now: now, ids: &requestIDs) }
    mutating func authorizationAnswered(channel: String, request: UInt64, _ result: Result<ChannelAuthorizationResponse, AuthorizationError>) -> [Action] {
        channels.authorizationAnswered(channel: channel, request: request, result)
    }
    mutating func signinAuthenticated(request: UInt64, _ result: Result<UserAuthenticationResponse, AuthorizationError>, now: ContinuousClock.Instant) -> [Action] {
        channels.signinAuthenticated(request: request, result, now: now)
    }

    // MARK: - Rooms (decided by `rooms`)

    mutating func joinRoom(_ name: String, from position: RoomPosition? = nil, now: ContinuousClock.Instant) -> (added: Bool, actions: [Action]) {
        rooms.join(name, from: position, now: now)
    }
    mutating func leaveRoom(_ name: String) -> [Action] { rooms.leave(name) }
    func sendToRoom(_ name: String, event: String, data: String) -> (RoomError?, [Action]) {
        rooms.send(name, event: event, data: data)
    }
    mutating func requestHistory(_ name: String, before: UInt64?, limit: Int, request: UInt64, now: ContinuousClock.Instant) -> [Action] {
        rooms.requestHistory(name, before: before, limit: limit, request: request, now: now)
    }
    mutating func roomsAuthorized(request: UInt64, _ result: Result<RoomAuthorizationResponse, AuthorizationError>, now: ContinuousClock.Instant) -> [Action] {
        rooms.authorized(request: request, result, now: now, ids: &requestIDs)
    }
    mutating func setRoomGrants(_ configuration: RoomConfiguration, now: ContinuousClock.Instant) {
        rooms.setGrants(configuration, now: now)
    }
}

/// Request ids, unique on one connection's machine.
struct RequestIDs {
    private var last: UInt64 = 0

    mutating func next() -> UInt64 {
        last += 1
        return last
    }
}

extension ConnectionStateMachine.Configuration {
    /// The machine's settings from the client's options (namespace, timeouts, the rooms' auth
    /// batching window).
    init(options: BirdRealtime.Options) {
        self.init(namespace: options.namespace, activityTimeout: options.activityTimeout, pongTimeout: options.pongTimeout,
                  pathChangePongTimeout: options.pathChangePongTimeout, authTimeout: options.authTimeout,
                  roomAuthBatchWindow: options.roomAuthBatchWindow)
    }
}
