import Dispatch
import Foundation
import SystemSupport
import Reachability
import RealtimeProtocol
import Reconnect
import WebSocket

/// One realtime connection over a sequence of sockets: the `ReconnectableStream` the client's
/// `Reconnector` keeps alive (`bird.connection`).
///
/// It opens a socket per attempt, waits for the handshake, answers and sends pings, and turns
/// every way a socket ends into the seed's reaction (realtime-connection-lifecycle seed,
/// "Automatic reconnection"): 4000–4099 → `failed` and a refusal; 4200–4299 → an immediate
/// retry; anything else → `unavailable` and the backoff policy.
///
/// The decisions are `ConnectionStateMachine`'s; this class holds it behind a lock and performs
/// its actions after releasing the lock, in order, one event's actions after another's even
/// when events arrive on several threads (the drain of `Reconnector`): nothing is sent,
/// opened, closed, scheduled or started while the lock is held.
public final class RealtimeConnection: ReconnectableStream {
    typealias Machine = ConnectionStateMachine
    typealias Action = ConnectionStateMachine.Action

    /// Everything behind the lock (the connection's extensions in other files read it too).
    struct State {
        var machine: Machine
        /// The machine's actions, performed after the lock by one thread at a time.
        var actions = DrainQueue<Action>()
        /// A drain of the text frames' actions is queued for the end of the transport's read
        /// (`flushPending`); frames until then only append to `pending`.
        var flushScheduled = false
        /// The socket the machine's current generation opened.
        var socket: (generation: UInt64, socket: any RealtimeSocket)?
        var timers: [Machine.TimerID: (token: UInt64, deadline: ContinuousClock.Instant, work: any ScheduledWork)] = [:]
        var lastTimerToken: UInt64 = 0
        var requests: [UInt64: Task<Void, Never>] = [:]
        /// Auth answers the machine took (`authAnswersTaken`).
        var authAnswersTaken = 0
        var channelObjects: [String: RealtimeChannel] = [:]
        var roomObjects: [String: Room] = [:]
        /// `history` calls waiting for their page, by request id (bounded by the machine's
        /// `RoomRequests.maxHistoryInFlight`: a request over it is answered at once).
        var historyWaiters: [UInt64: CheckedContinuation<Result<RoomHistoryPage, RoomError>, Never>] = [:]
    }

    /// The host watched for reachability (from the options).
    public let destinationHost: String
    /// Where the connection reports to its `Reconnector`.
    public let reconnectEvents = StreamEventRelay()

    /// Authorisations and signins run here, not on the cooperative pool, so that they finish
    /// even while the app blocks every pool thread.
    private static let executor = DispatchTaskExecutor(label: "Realtime.authorization")

    let options: BirdRealtime.Options
    private let transport: any RealtimeTransport
    let scheduler: any ReconnectScheduler
    let state: Locked<State>
    let outbox: DeliveryOutbox
    /// Stops the socket's reads while the app is far behind (`DeliveryOutbox.onBacklog`).
    private let reading = ReadingControl()
    private let stateObservers = ObserverList<ConnectionStateChange>()
    let errorObservers = ObserverList<RealtimeError>()
    private let signinErrorObservers = ObserverList<AuthorizationError>()

    init(options: BirdRealtime.Options, transport: any RealtimeTransport, scheduler: any ReconnectScheduler) {
        self.options = options
        self.transport = transport
        self.scheduler = scheduler
        outbox = DeliveryOutbox(queue: options.deliveryQueue) { [reading] paused, sequence in reading.setPaused(paused, sequence: sequence) }
        destinationHost = options.destinationHost
        var machine = Machine(configuration: .init(options: options))
        if let grants = options.grants { machine.setRoomGrants(grants, now: scheduler.now) }
        state = Locked(State(machine: machine))
    }

    deinit {
        // Rooms outlive their client only as objects: whoever waits in `ready()` is told.
        for room in state.withLock({ Array($0.roomObjects.values) }) {
            room.markGone(RoomError(.disconnected, "the client was released"))
        }
    }

    // MARK: - Public state

    /// The socket id of the current connection (`"123.456"`), set from the handshake before
    /// the state becomes `connected`; `nil` whenever the state is not `connected`.
    public var connectionId: String? { state.withLock { $0.machine.connectionId } }

    /// Answers of auth requests (channel, signin, rooms) the machine has taken, failures and
    /// timeouts included: for tests that answer from a fake and wait until the client has read
    /// each answer.
    package var authAnswersTaken: Int { state.withLock { $0.authAnswersTaken } }

    /// The current state.
    public var connectionState: ConnectionState { state.withLock { $0.machine.state } }

    /// Events, state changes and errors queued for the delivery queue and not yet handed to
    /// handlers. Past 10,000 (or 16 MiB of event data) the client stops reading its socket
    /// until the handlers are back under 1,000 and 4 MiB: a server sending faster than the app
    /// handles events is held back by TCP's flow control, and nothing is dropped.
    public var deliveryBacklog: Int { outbox.backlog }

    /// The activity timeout in force: the handshake's `activity_timeout`, or the options'
    /// default (120 s) when the handshake had none.
    public var activityTimeout: Duration { state.withLock { $0.machine.activityTimeout } }

    /// The user data the server accepted after `signin()` on the current connection; `nil`
    /// before that and after every drop (until the automatic signin of the next connection).
    public var signedInUserData: String? { state.withLock { $0.machine.signedInUserData } }

    // MARK: - Observers

    func onStateChange(_ handler: @escaping @Sendable (ConnectionStateChange) -> Void) -> ObservationToken {
        stateObservers.add(handler)
    }

    func stateChanges() -> AsyncStream<ConnectionStateChange> { stateObservers.stream() }

    func onError(_ handler: @escaping @Sendable (RealtimeError) -> Void) -> ObservationToken {
        errorObservers.add(handler)
    }

    func errors() -> AsyncStream<RealtimeError> { errorObservers.stream() }

    func onSigninError(_ handler: @escaping @Sendable (AuthorizationError) -> Void) -> ObservationToken {
        signinErrorObservers.add(handler)
    }

    // MARK: - App commands

    /// Sets the state to `connecting` unless a socket is already opening or open.
    ///
    /// - Returns: whether the caller should start a connection (through the reconnector).
    func prepareConnect() -> Bool { run { $0.prepareConnect() } }

    /// Closes the socket with 1000 and reports an intentional disconnect: state
    /// `disconnected`, nothing scheduled.
    func disconnect() { run { $0.disconnect() } }

    /// Marks the connection as waiting for a retry (`unavailable`) when no socket is open:
    /// the reconnector scheduled a delay or a delegate vetoed the attempt.
    func waitingForRetry() { run { $0.waitingForRetry() } }

    /// Asks for signin now if connected, and on every later connection.
    func signin() {
        let now = scheduler.now
        run { $0.signin(now: now) }
    }

    // MARK: - ReconnectableStream

    /// Opens a new socket (any older one is dropped and its events ignored).
    public func startConnectAttempt() { run { $0.startAttempt() } }

    /// Gives up an attempt that has no handshake yet (the reconnector's attempt timeout).
    public func abortConnectAttempt() { run { $0.abortAttempt() } }

    /// The path to the server changed while connected: ping now with the short deadline
    /// (`Options.pathChangePongTimeout`) instead of waiting for the activity timeout.
    public func verifyConnection() {
        let now = scheduler.now
        run { $0.verify(now: now) }
    }

    // MARK: - Events from the socket, timers and requests

    private func socketEvent(_ event: RealtimeTransportEvent, generation: UInt64) {
        let now = scheduler.now
        if case .text(let text) = event {
            // The hot path: the machine appends straight to the pending actions, which are
            // drained once the transport delivered the frames of its current read (one hand-off
            // to the delivery queue per read, not one wake-up per frame), or at once when the
            // transport cannot tell.
            let flush = state.withLock { state -> Bool in
                let before = state.actions.pending.count
                state.machine.textReceived(generation: generation, text: text, now: now, into: &state.actions.pending)
                guard state.actions.pending.count > before, !state.actions.draining, !state.flushScheduled else { return false }
                state.flushScheduled = true
                return true
            }
            if flush, !transport.afterCurrentEvents({ [weak self] in self?.flushPending() }) { flushPending() }
            return
        }
        run { machine in
            switch event {
            case .open: return []
            case .text: return []
            case .binary(let size): return machine.binaryReceived(generation: generation, size: size, now: now)
            case .closed(let code, let reason): return machine.socketClosed(generation: generation, code: code, reason: reason)
            case .failed(let message): return machine.socketFailed(generation: generation, message: message)
            }
        }
    }

    // MARK: - Running the machine

    /// Applies an event to the machine and drains the actions.
    func run(_ event: (inout Machine) -> [Action]) {
        run { state in ((), event(&state.machine)) }
    }

    func run<Result>(_ event: (inout Machine) -> (Result, [Action])) -> Result {
        run { state in event(&state.machine) }
    }

    /// The transition and the queueing of its actions happen under one lock, so actions leave
    /// in the order the machine chose them, whatever thread each event came from; one thread
    /// drains at a time, outside the lock.
    func run<Result>(_ event: (inout State) -> (Result, [Action])) -> Result {
        let (result, batch) = state.withLock { state -> (Result, [Action]?) in
            let (result, actions) = event(&state)
            state.actions.pending.append(contentsOf: actions)
            return (result, state.actions.claim())
        }
        if let batch { drain(batch) }
        return result
    }

    /// A timer fired: its handle is released and the machine told, under one lock.
    private func timerFired(_ id: Machine.TimerID, token: UInt64) {
        let now = scheduler.now
        run { state in
            guard let timer = state.timers[id], timer.token == token else { return ((), state.machine.timerFired(id, now: now)) }
            state.timers[id] = nil
            var actions = state.machine.timerFired(id, now: now)
            if now - timer.deadline >= Machine.frozenTimerLateness { actions += state.machine.resumedAfterFreeze(now: now) }
            return ((), actions)
        }
    }

    /// Drains what the text frames of the last read left pending, unless another thread is
    /// draining (it takes them) or already took them.
    private func flushPending() {
        let batch = state.withLock { state -> [Action]? in
            state.flushScheduled = false
            return state.actions.claim()
        }
        if let batch { drain(batch) }
    }

    /// Performs `batch`, then whatever was queued meanwhile, until nothing is pending.
    private func drain(_ first: [Action]) {
        var batch = first
        var handoff: [DeliveryOutbox.Item] = []
        while true {
            var last: (name: String, channel: RealtimeChannel?)?
            var lastRoom: (name: String, room: Room?)?
            // Events go to the outbox together, under one of its locks, before any other action
            // (which may queue there too, in order).
            handoff.removeAll(keepingCapacity: true)
            for action in batch {
                switch action {
                case .deliver(let event):
                    // The channel of the previous delivery is looked up once (a stream on one channel
                    // costs no lock per event): the machine decided this delivery while it was subscribed.
                    if last?.name != event.channel {
                        last = (event.channel, state.withLock { $0.channelObjects[event.channel] })
                    }
                    if let channel = last?.channel { handoff.append(.channel(channel, event)) }
                case .deliverRoom(let delivery):
                    // Likewise for a room; a leave between two batches is seen at the next lookup,
                    // and a left room's handlers are not called (`Room.markLeft`).
                    if lastRoom?.name != delivery.room {
                        lastRoom = (delivery.room, state.withLock { $0.roomObjects[delivery.room] })
                    }
                    if let room = lastRoom?.room { handoff.append(.room(room, delivery)) }
                default:
                    outbox.enqueue(contentsOf: handoff)
                    handoff.removeAll(keepingCapacity: true)
                    perform(action)
                }
            }
            outbox.enqueue(contentsOf: handoff)
            batch.removeAll(keepingCapacity: true)
            guard let next = state.withLock({ $0.actions.next(after: batch) }) else { return }
            batch = next
        }
    }

    private func perform(_ action: Action) {
        switch action {
        case .open(let generation):
            do {
                let socket = try transport.open(url: options.endpoint) { [weak self] event in
                    self?.socketEvent(event, generation: generation)
                }
                state.withLock { $0.socket = (generation, socket) }
                reading.attach(socket)
            } catch {
                let message = "cannot open \(options.endpoint): \(error)"
                run { $0.openFailed(generation: generation, message: message) }
            }
        case .send(let text, let generation):
            socket(of: generation, forget: false)?.send(text: text)
        case .close(let code, let reason, let generation):
            socket(of: generation, forget: true)?.close(code: code.rawValue, reason: reason)
        case .abort(let generation):
            socket(of: generation, forget: true)?.abort()
        case .forget(let generation):
            _ = socket(of: generation, forget: true)
        case .schedule(let id, let deadline):
            let token = state.withLock { state in
                state.lastTimerToken += 1
                return state.lastTimerToken
            }
            let work = scheduler.schedule(at: deadline) { [weak self] in self?.timerFired(id, token: token) }
            state.withLock { state in
                defer { state.timers[id] = (token, deadline, work) }
                return state.timers[id]?.work
            }?.cancel()
        case .cancel(let id):
            state.withLock { $0.timers.removeValue(forKey: id)?.work }?.cancel()
        case .authorize(let request, let id):
            let options = options
            let task = Task(executorPreference: Self.executor) { [weak self] in
                let result = await AuthorizationRequests.channel(request, options: options)
                self?.run { $0.authorizationAnswered(channel: request.channelName, request: id, result) }
                self?.state.withLock { $0.authAnswersTaken += 1 }
            }
            state.withLock { $0.requests[id] = task }
        case .authenticate(let socketID, let id):
            let options = options
            let task = Task(executorPreference: Self.executor) { [weak self] in
                let result = await AuthorizationRequests.user(socketID: socketID, options: options)
                guard let self else { return }
                let now = self.scheduler.now
                self.run { $0.signinAuthenticated(request: id, result, now: now) }
                self.state.withLock { $0.authAnswersTaken += 1 }
            }
            state.withLock { $0.requests[id] = task }
        case .cancelRequest(let id):
            state.withLock { $0.requests.removeValue(forKey: id) }?.cancel()
        case .publishState(let change):
            let observers = stateObservers
            outbox.enqueue { observers.send(change) }
        case .report(let error):
            let observers = errorObservers
            outbox.enqueue { observers.send(error) }
        case .reportSignin(let error):
            let observers = signinErrorObservers
            outbox.enqueue { observers.send(error) }
        case .deliver(let event):
            state.withLock { $0.channelObjects[event.channel] }?.enqueue(event)
        case .stream(let event):
            reconnectEvents.send(event)
        case .authorizeRooms(let names, let id):
            let options = options
            let task = Task(executorPreference: Self.executor) { [weak self] in
                let result = await AuthorizationRequests.rooms(names, options: options)
                guard let self else { return }
                let now = self.scheduler.now
                self.run { $0.roomsAuthorized(request: id, result, now: now) }
                self.state.withLock { $0.authAnswersTaken += 1 }
            }
            state.withLock { $0.requests[id] = task }
        case .deliverRoom(let delivery):
            state.withLock { $0.roomObjects[delivery.room] }?.enqueue(delivery)
        case .settleRoom(let name, let error):
            state.withLock { $0.roomObjects[name] }?.settle(error)
        case .finishHistory(let id, let result):
            state.withLock { $0.historyWaiters.removeValue(forKey: id) }?.resume(returning: result)
        }
    }

    /// The socket of `generation`, if it is the current one; `forget` releases it.
    private func socket(of generation: UInt64, forget: Bool) -> (any RealtimeSocket)? {
        state.withLock { state in
            guard let current = state.socket, current.generation == generation else { return nil }
            if forget { state.socket = nil }
            return current.socket
        }
    }
}
