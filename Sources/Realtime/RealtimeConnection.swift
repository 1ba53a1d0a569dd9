import Dispatch
import Foundation
import Locking
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
/// retry; anything else → `unavailable` and the backoff policy. Each socket carries a
/// generation number: frames, closes and timers of an older socket are ignored once a newer
/// one exists (DESIGN.md: frames of the old socket delivered after the new one is up; a pong
/// deadline of the old connection killing the new one).
public final class RealtimeConnection: ReconnectableStream {
    private struct State {
        var state: ConnectionState = .initialized
        var connectionId: String?
        /// Incremented for every socket and every end of one; events carry the value they
        /// were created with and are dropped when it is stale.
        var generation: UInt64 = 0
        var socket: (any RealtimeSocket)?
        var handshaken = false
        var activityTimeout: Duration = .seconds(120)
        var activityTimer: (any ScheduledWork)?
        /// When the last frame arrived; the activity timer compares against it when it fires,
        /// so a frame costs a clock read, not a new timer.
        var lastActivity: ContinuousClock.Instant?
        var pongTimer: (any ScheduledWork)?
        /// The pending pong deadline came from a path change (a failed probe backs off and
        /// waits for reachability instead of retrying at once).
        var probingPathChange = false
        var channels: [String: RealtimeChannel] = [:]
        /// Subscription order, for resubscribing in the same order.
        var channelOrder: [String] = []
        /// Authorisations in flight for this connection, by channel name.
        var pendingAuthorizations: [String: PendingRequest] = [:]
        var nextRequestID: UInt64 = 0
        /// `signin()` was called: sign in on every new connection.
        var signinRequested = false
        /// The signin of this connection in flight (authenticating, or waiting for the server).
        var pendingSignin: PendingRequest?
        /// The user data the server accepted on this connection.
        var signedInUserData: String?
    }

    /// An authorisation or signin in flight: its id (answers carrying another id are stale),
    /// its timeout and its task.
    private struct PendingRequest {
        var id: UInt64
        var timer: (any ScheduledWork)?
        var task: Task<Void, Never>?
        /// Signin only: the server has been sent `<ns>:signin` and its answer is awaited.
        var awaitingServer = false

        func cancel() {
            timer?.cancel()
            task?.cancel()
        }
    }

    /// The host watched for reachability (from the options).
    public let destinationHost: String
    /// Where the connection reports to its `Reconnector`.
    public let reconnectEvents = StreamEventRelay()

    /// Authorisations and signins run here, not on the cooperative pool, so that they finish
    /// even while the app blocks every pool thread.
    private static let executor = DispatchTaskExecutor(label: "Realtime.authorization")

    private let options: BirdRealtime.Options
    private let transport: any RealtimeTransport
    private let scheduler: any ReconnectScheduler
    private let state = Locked(State())
    private let outbox: DeliveryOutbox
    private let stateObservers = ObserverList<ConnectionStateChange>()
    private let errorObservers = ObserverList<RealtimeError>()
    private let signinErrorObservers = ObserverList<AuthorizationError>()

    init(options: BirdRealtime.Options, transport: any RealtimeTransport, scheduler: any ReconnectScheduler) {
        self.options = options
        self.transport = transport
        self.scheduler = scheduler
        outbox = DeliveryOutbox(queue: options.deliveryQueue)
        destinationHost = options.destinationHost
    }

    // MARK: - Public state

    /// The socket id of the current connection (`"123.456"`), set from the handshake before
    /// the state becomes `connected`; `nil` whenever the state is not `connected`.
    public var connectionId: String? { state.withLock { $0.connectionId } }

    /// The current state.
    public var connectionState: ConnectionState { state.withLock { $0.state } }

    /// The activity timeout in force: the handshake's `activity_timeout`, or the options'
    /// default (120 s) when the handshake had none.
    public var activityTimeout: Duration { state.withLock { $0.activityTimeout } }

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

    /// The user data the server accepted after `signin()` on the current connection; `nil`
    /// before that and after every drop (until the automatic signin of the next connection).
    public var signedInUserData: String? { state.withLock { $0.signedInUserData } }

    // MARK: - App commands

    /// Sets the state to `connecting` unless a socket is already opening or open.
    ///
    /// - Returns: whether the caller should start a connection (through the reconnector).
    func prepareConnect() -> Bool {
        state.withLock { state in
            switch state.state {
            case .connecting where state.socket != nil, .connected: return false
            default:
                set(.connecting, in: &state)
                return true
            }
        }
    }

    /// Closes the socket with 1000 and reports an intentional disconnect: state
    /// `disconnected`, nothing scheduled.
    func disconnect() {
        let changed = state.withLock { state -> Bool in
            guard state.state != .disconnected else { return false }
            state.socket?.close(code: RealtimeCloseCode.normal.rawValue, reason: "disconnect()")
            endSocket(in: &state)
            set(.disconnected, in: &state)
            return true
        }
        guard changed else { return }
        reconnectEvents.send(.toldToDisconnect)
        reconnectEvents.send(.disconnected(error: nil, retry: .policy))
    }

    /// Marks the connection as waiting for a retry (`unavailable`) when no socket is open:
    /// the reconnector scheduled a delay or a delegate vetoed the attempt.
    func waitingForRetry() {
        state.withLock { state in
            if state.socket == nil, state.state == .connecting { set(.unavailable, in: &state) }
        }
    }

    // MARK: - Channels

    func channel(named name: String) -> RealtimeChannel {
        state.withLock { state in
            if let existing = state.channels[name] { return existing }
            let onUnsubscribe: @Sendable (String) -> Void = { [weak self] name in self?.unsubscribe(name) }
            let onTrigger: @Sendable (String, String, String) -> Bool = { [weak self] channel, event, data in
                self?.trigger(event, data: data, on: channel) ?? false
            }
            let channel = RealtimeChannel.Kind(channelName: name) == .presence
                ? PresenceChannel(name: name, namespace: options.namespace, outbox: outbox, onUnsubscribe: onUnsubscribe, onTrigger: onTrigger)
                : RealtimeChannel(name: name, namespace: options.namespace, outbox: outbox, onUnsubscribe: onUnsubscribe, onTrigger: onTrigger)
            state.channels[name] = channel
            state.channelOrder.append(name)
            if state.handshaken { subscribeOrAuthorize(name, in: &state) }
            return channel
        }
    }

    func existingChannel(named name: String) -> RealtimeChannel? { state.withLock { $0.channels[name] } }

    var channelNames: [String] { state.withLock { $0.channelOrder } }

    func unsubscribe(_ name: String) {
        state.withLock { state in
            guard let channel = state.channels.removeValue(forKey: name) else { return }
            state.channelOrder.removeAll { $0 == name }
            state.pendingAuthorizations.removeValue(forKey: name)?.cancel()
            channel.setSubscribed(false)
            if state.handshaken, let text = try? RealtimeMessage(
                event: options.namespace.event(.unsubscribe), payload: UnsubscribeRequest(channel: name)).text {
                state.socket?.send(text: text)
            }
        }
    }

    // MARK: - ReconnectableStream

    /// Opens a new socket (any older one is dropped and its events ignored).
    public func startConnectAttempt() {
        let generation = state.withLock { state -> UInt64? in
            // The app's disconnect() (or a refusal) may have come between the reconnector's
            // decision and this call: it wins, nothing opens.
            guard state.state != .disconnected, state.state != .failed else { return nil }
            state.socket?.abort()
            endSocket(in: &state)
            set(.connecting, in: &state)
            return state.generation
        }
        guard let generation else { return }
        reconnectEvents.send(.willConnect)
        let failed = state.withLock { state -> StreamEvent? in
            guard state.generation == generation else { return nil }
            do {
                state.socket = try transport.open(url: options.endpoint) { [weak self] event in
                    self?.socketEvent(event, generation: generation)
                }
                return nil
            } catch {
                return failAttempt(RealtimeError(kind: .transport, message: "cannot open \(options.endpoint): \(error)"), in: &state)
            }
        }
        if let failed { reconnectEvents.send(failed) }
    }

    /// Gives up an attempt that has no handshake yet (the reconnector's attempt timeout).
    public func abortConnectAttempt() {
        let failed = state.withLock { state -> StreamEvent? in
            guard !state.handshaken, state.socket != nil else { return nil }
            state.socket?.abort()
            return failAttempt(RealtimeError(kind: .transport, message: "no handshake within the connect timeout"), in: &state)
        }
        if let failed { reconnectEvents.send(failed) }
    }

    /// The path to the server changed while connected: ping now with the short deadline
    /// (`Options.pathChangePongTimeout`) instead of waiting for the activity timeout.
    public func verifyConnection() {
        state.withLock { state in
            guard state.handshaken else { return }
            sendPing(deadline: options.pathChangePongTimeout, pathChange: true, in: &state)
        }
    }

    // MARK: - Socket events

    private func socketEvent(_ event: RealtimeTransportEvent, generation: UInt64) {
        let streamEvents = state.withLock { state -> [StreamEvent] in
            guard state.generation == generation else { return [] }
            switch event {
            case .open:
                return []
            case .text(let text):
                return received(text, in: &state)
            case .binary(let size):
                noteActivity(in: &state)
                report(RealtimeError(kind: .protocolViolation, message: "binary frame of \(size) bytes ignored"), in: &state)
                return []
            case .closed(let code, let reason):
                return closed(code: code, reason: reason, in: &state)
            case .failed(let message):
                return [failAttempt(RealtimeError(kind: .transport, message: message), in: &state)]
            }
        }
        for event in streamEvents { reconnectEvents.send(event) }
    }

    private func received(_ text: String, in state: inout State) -> [StreamEvent] {
        noteActivity(in: &state)
        let message: RealtimeMessage
        do {
            message = try RealtimeMessage(parsing: text)
        } catch {
            report(RealtimeError(kind: .protocolViolation, message: "\(error)"), in: &state)
            return []
        }
        let namespace = options.namespace
        let split = ProtocolNamespace.split(message.event).flatMap { $0.namespace == namespace ? $0 : nil }
        guard state.handshaken else {
            switch split?.name {
            case ProtocolEventName.connectionEstablished.rawValue?:
                return handshake(message, in: &state)
            case ProtocolEventName.error.rawValue?:
                reportServerError(message, in: &state)
            default:
                report(RealtimeError(kind: .protocolViolation, message: "\(message.event) before the handshake, ignored"), in: &state)
            }
            return []
        }
        guard let split else {
            if let channel = message.channel.flatMap({ state.channels[$0] }) {
                if channel.kind == .encrypted {
                    deliverDecrypted(message, on: channel, in: &state)
                } else {
                    deliver(message, as: message.event, in: &state)
                }
            } else {
                // An event in flight when the app unsubscribed, or a server bug: reported, so
                // nothing disappears silently.
                report(RealtimeError(kind: .protocolViolation, message: "\(message.event) for \(message.channel ?? "no channel"), which is not subscribed"), in: &state)
            }
            return []
        }
        switch split.name {
        case ProtocolEventName.ping.rawValue:
            state.socket?.send(text: RealtimeMessage(event: namespace.event(.pong), data: "{}").text)
        case ProtocolEventName.pong.rawValue:
            break
        case ProtocolEventName.subscriptionSucceeded.rawValue:
            if let name = message.channel, let channel = state.channels[name] {
                if channel.kind == .presence {
                    guard let presence = try? message.decodeData(PresenceSubscriptionData.self).presence else {
                        report(RealtimeError(kind: .protocolViolation, message: "presence subscription_succeeded for \(name) without a member list"), in: &state)
                        return []
                    }
                    var seen = Set<String>()
                    channel.setMembers(presence.ids.filter { seen.insert($0).inserted }.map { PresenceMember(userID: $0, userInfo: presence.hash[$0]) })
                }
                channel.setSubscribed(true)
                deliver(message, as: namespace.event(.subscriptionSucceeded), in: &state)
            } else {
                report(RealtimeError(kind: .protocolViolation, message: "subscription_succeeded for \(message.channel ?? "no channel"), which is not subscribed"), in: &state)
            }
        case ProtocolEventName.memberAdded.rawValue, ProtocolEventName.memberRemoved.rawValue:
            guard let name = message.channel, let channel = state.channels[name], channel.kind == .presence,
                  let member = try? message.decodeData(PresenceMember.self) else {
                report(RealtimeError(kind: .protocolViolation, message: "\(message.event) without a presence channel or member, ignored"), in: &state)
                return []
            }
            let added = split.name == ProtocolEventName.memberAdded.rawValue
            // Each member is listed once: a repeated add or an unknown removal changes nothing.
            if added ? channel.addMember(member) : channel.removeMember(member.userID) {
                deliver(message, as: namespace.event(added ? .memberAdded : .memberRemoved), in: &state)
            }
        case ProtocolEventName.signinSuccess.rawValue:
            if state.pendingSignin?.awaitingServer == true {
                state.pendingSignin?.cancel()
                state.pendingSignin = nil
                let userData = (try? message.decodeData([String: String].self))?["user_data"]
                state.signedInUserData = userData ?? message.data
            } else {
                report(RealtimeError(kind: .protocolViolation, message: "signin_success without a signin, ignored"), in: &state)
            }
        case ProtocolEventName.subscriptionError.rawValue:
            if let name = message.channel, let channel = state.channels[name] {
                channel.setSubscribed(false)
                deliver(message, as: namespace.event(.subscriptionError), in: &state)
            } else {
                reportServerError(message, in: &state)
            }
        case ProtocolEventName.error.rawValue:
            if message.channel.flatMap({ state.channels[$0] }) != nil {
                deliver(message, as: message.event, in: &state)
            } else if state.pendingSignin?.awaitingServer == true,
                      let payload = try? message.decodeData(ErrorPayload.self),
                      payload.code == Int(RealtimeCloseCode.unauthorized.rawValue) {
                // The answer to our signin: a refusal is an error with code 4009 (DESIGN.md,
                // "Signin"); other errors meanwhile are the connection's.
                state.pendingSignin = nil
                reportSignin(.refusedByServer(code: payload.code, message: payload.message), in: &state)
            } else {
                reportServerError(message, in: &state)
            }
        case ProtocolEventName.connectionEstablished.rawValue:
            report(RealtimeError(kind: .protocolViolation, message: "a second handshake on one connection, ignored"), in: &state)
        default:
            if let channel = message.channel.flatMap({ state.channels[$0] }) {
                if channel.kind == .encrypted {
                    deliverDecrypted(message, on: channel, in: &state)
                } else {
                    deliver(message, as: message.event, in: &state)
                }
            } else {
                report(RealtimeError(kind: .protocolViolation, message: "unexpected \(message.event), ignored"), in: &state)
            }
        }
        return []
    }

    private func handshake(_ message: RealtimeMessage, in state: inout State) -> [StreamEvent] {
        // Read leniently: only the socket id is required; an activity timeout that is not a
        // positive number (a string, 30.5 is fine, 1e30 is clamped) falls back to the default.
        let fields = (try? message.decodeData([String: JSONValue].self)) ?? [:]
        guard let socketID = fields["socket_id"]?.string, !socketID.isEmpty else {
            // Seed, "The six states": a handshake without an id is an error and the socket is
            // closed; the connection retries with backoff.
            let failure = RealtimeError(kind: .handshake, message: "handshake without a socket id: \(message.data ?? "no data")")
            state.socket?.close(code: 1002, reason: "handshake without a socket id")  // RFC 6455 §7.4.1: protocol error
            return [failAttempt(failure, in: &state)]
        }
        state.connectionId = socketID
        state.handshaken = true
        if let seconds = fields["activity_timeout"]?.number, seconds.isFinite, seconds > 0 {
            state.activityTimeout = .seconds(min(seconds, 86_400))
        } else {
            state.activityTimeout = options.activityTimeout
        }
        set(.connected, in: &state)
        scheduleActivityTimer(in: &state)
        for name in state.channelOrder { subscribeOrAuthorize(name, in: &state) }
        if state.signinRequested { startSignin(in: &state) }
        return [.opened, .ready]
    }

    private func closed(code: UInt16, reason: String, in state: inout State) -> [StreamEvent] {
        let closeCode = RealtimeCloseCode(rawValue: code)
        let kind: RealtimeError.Kind = code == RealtimeCloseCode.abnormal.rawValue ? .transport : .closed
        let message = !reason.isEmpty ? reason
            : kind == .transport ? "the connection dropped without a close frame" : "closed with \(code)"
        let failure = RealtimeError(kind: kind, code: Int(code), message: message)
        report(failure, in: &state)
        endSocket(in: &state)
        switch closeCode.reaction {
        case .fail:
            set(.failed, in: &state)
            return [.refused(reason: "\(code) \(reason)"), .disconnected(error: failure, retry: .policy)]
        case .reconnectNow:
            set(.connecting, in: &state)
            return [.disconnected(error: failure, retry: .immediately)]
        case .backOff:
            set(.unavailable, in: &state)
            return [.disconnected(error: failure, retry: .policy)]
        }
    }

    // MARK: - Stale-connection check

    /// A frame arrived: the connection is alive. Records the time (the activity timer checks
    /// it when it fires) and ends a pending probe.
    private func noteActivity(in state: inout State) {
        guard state.handshaken else { return }
        state.lastActivity = scheduler.now
        if let pongTimer = state.pongTimer {
            pongTimer.cancel()
            state.pongTimer = nil
            state.probingPathChange = false
        }
        if state.activityTimer == nil { scheduleActivityTimer(in: &state) }
    }

    /// Arms the activity timer for `activityTimeout` after the last frame.
    private func scheduleActivityTimer(in state: inout State) {
        state.activityTimer?.cancel()
        let generation = state.generation
        let due = (state.lastActivity ?? scheduler.now) + state.activityTimeout
        state.activityTimer = scheduler.schedule(at: due) { [weak self] in
            self?.activityTimerFired(generation: generation)
        }
    }

    /// The activity timer fired: ping if the connection has been silent for the whole
    /// timeout, otherwise re-arm for the rest of it.
    private func activityTimerFired(generation: UInt64) {
        state.withLock { state in
            guard state.generation == generation, state.handshaken else { return }
            state.activityTimer = nil
            if let last = state.lastActivity, scheduler.now < last + state.activityTimeout {
                return scheduleActivityTimer(in: &state)
            }
            guard state.pongTimer == nil else { return }
            sendPing(deadline: options.pongTimeout, pathChange: false, in: &state)
        }
    }

    private func sendPing(deadline: Duration, pathChange: Bool, in state: inout State) {
        state.socket?.send(text: RealtimeMessage(event: options.namespace.event(.ping), data: "{}").text)
        let due = scheduler.now + deadline
        // Keep an earlier deadline already pending; a path change shortens a longer one.
        if state.pongTimer != nil, !pathChange { return }
        state.pongTimer?.cancel()
        state.probingPathChange = pathChange
        let generation = state.generation
        state.pongTimer = scheduler.schedule(at: due) { [weak self] in
            self?.pongTimerFired(generation: generation)
        }
    }

    private func pongTimerFired(generation: UInt64) {
        let streamEvents = state.withLock { state -> [StreamEvent] in
            guard state.generation == generation, state.handshaken else { return [] }
            let pathChange = state.probingPathChange
            let failure = RealtimeError(kind: .pongTimeout, code: Int(RealtimeCloseCode.pongNotReceived.rawValue),
                                        message: pathChange ? "no pong after the network path changed" : "no pong within the pong timeout")
            report(failure, in: &state)
            state.socket?.close(code: RealtimeCloseCode.pongNotReceived.rawValue, reason: "pong not received")
            endSocket(in: &state)
            // Seed: close with an immediate-retry code. After a path change the path is known
            // to be gone: wait for reachability (or the backoff) instead of failing at once.
            set(pathChange ? .unavailable : .connecting, in: &state)
            return [.disconnected(error: failure, retry: pathChange ? .policy : .immediately)]
        }
        for event in streamEvents { reconnectEvents.send(event) }
    }

    // MARK: - Helpers (called with the lock held)

    /// Ends the current socket after a failure that backs off (seed: network failures take the
    /// backoff path): reports `failure`, forgets the socket, goes `unavailable`, and returns
    /// what to tell the reconnector.
    private func failAttempt(_ failure: RealtimeError, in state: inout State) -> StreamEvent {
        report(failure, in: &state)
        endSocket(in: &state)
        set(.unavailable, in: &state)
        return .disconnected(error: failure, retry: .policy)
    }

    /// Forgets the current socket: later events of it are ignored, timers are cancelled, and
    /// channels are no longer subscribed (subscriptions belong to the connection).
    private func endSocket(in state: inout State) {
        state.generation &+= 1
        state.socket = nil
        state.handshaken = false
        state.connectionId = nil
        state.activityTimer?.cancel()
        state.activityTimer = nil
        state.lastActivity = nil
        state.pongTimer?.cancel()
        state.pongTimer = nil
        state.probingPathChange = false
        for channel in state.channels.values { channel.setSubscribed(false) }
        // Answers for this connection's id are useless to the next one (seed: "it cannot reuse
        // the old signature, which contains the old id").
        for pending in state.pendingAuthorizations.values { pending.cancel() }
        state.pendingAuthorizations = [:]
        state.pendingSignin?.cancel()
        state.pendingSignin = nil
        state.signedInUserData = nil
    }

    private func set(_ new: ConnectionState, in state: inout State) {
        let previous = state.state
        guard previous != new else { return }
        state.state = new
        let change = ConnectionStateChange(previous: previous, current: new)
        let observers = stateObservers
        outbox.enqueue { observers.send(change) }
    }

    private func report(_ error: RealtimeError, in state: inout State) {
        let observers = errorObservers
        outbox.enqueue { observers.send(error) }
    }

    private func reportServerError(_ message: RealtimeMessage, in state: inout State) {
        let payload = try? message.decodeData(ErrorPayload.self)
        report(RealtimeError(kind: .server, code: payload?.code, message: payload?.message ?? message.data ?? "error without data"), in: &state)
    }

    private func deliver(_ message: RealtimeMessage, as name: String, data: String? = nil, in state: inout State) {
        guard let channelName = message.channel, let channel = state.channels[channelName] else { return }
        channel.enqueue(RealtimeEvent(event: name, channel: channelName, data: data ?? message.data, userID: message.userID))
    }

    /// Opens an encrypted channel's event with its shared secret before any handler runs; an
    /// event that does not open is reported and never delivered.
    private func deliverDecrypted(_ message: RealtimeMessage, on channel: RealtimeChannel, in state: inout State) {
        let failure: String
        if let key = channel.sharedSecret {
            do {
                let payload = try message.decodeData(EncryptedPayload.self)
                let plaintext = try SecretBox.open(payload, key: key)
                guard let text = String(validating: plaintext, as: UTF8.self) else {
                    throw SecretBoxError.malformed("the plaintext is not UTF-8")
                }
                deliver(message, as: message.event, data: text, in: &state)
                return
            } catch {
                failure = "\(error)"
            }
        } else {
            failure = "no shared secret for the channel"
        }
        report(RealtimeError(kind: .decryption, message: "\(message.event) on \(channel.name) not delivered: \(failure)"), in: &state)
    }

    private func sendSubscribe(_ name: String, auth: String? = nil, channelData: String? = nil, in state: inout State) {
        let request = SubscribeRequest(channel: name, auth: auth, channelData: channelData)
        guard let text = try? RealtimeMessage(event: options.namespace.event(.subscribe), payload: request).text else { return }
        state.socket?.send(text: text)
    }

    // MARK: - Authorisation and signin

    /// Subscribes a public channel at once; asks for an authorisation for the others, signed
    /// for this connection's id.
    private func subscribeOrAuthorize(_ name: String, in state: inout State) {
        guard let channel = state.channels[name] else { return }
        guard channel.kind.needsAuthorization else { return sendSubscribe(name, in: &state) }
        guard let socketID = state.connectionId else { return }
        state.pendingAuthorizations[name]?.cancel()
        state.nextRequestID += 1
        let id = state.nextRequestID
        let request = ChannelAuthorizationRequest(socketID: socketID, channelName: name)
        let options = options
        let timeout = options.authTimeout
        let timer = scheduler.schedule(at: scheduler.now + timeout) { [weak self] in
            self?.authorizationFinished(name, id: id, .failure(.timedOut(timeout)))
        }
        let task = Task(executorPreference: Self.executor) { [weak self] in
            let result = await Self.authorize(request, options: options)
            self?.authorizationFinished(name, id: id, result)
        }
        state.pendingAuthorizations[name] = PendingRequest(id: id, timer: timer, task: task)
    }

    private static func authorize(_ request: ChannelAuthorizationRequest, options: BirdRealtime.Options) async -> Result<ChannelAuthorizationResponse, AuthorizationError> {
        var closure: (@Sendable () async throws -> ChannelAuthorizationResponse)?
        if let authorizer = options.authorizer { closure = { try await authorizer(request) } }
        return await obtain(
            closure: closure,
            endpoint: options.authEndpoint, missing: "authEndpoint or authorizer",
            fields: [("socket_id", request.socketID), ("channel_name", request.channelName)], options: options)
    }

    /// Asks the app's closure if there is one, else POSTs `fields` to `endpoint`; a closure's
    /// error other than `AuthorizationError` becomes `.authorizer`.
    private static func obtain<Answer: Decodable & Sendable>(
        closure: (@Sendable () async throws -> Answer)?, endpoint: URL?, missing: String,
        fields: [(String, String)], options: BirdRealtime.Options
    ) async -> Result<Answer, AuthorizationError> {
        if let closure {
            do {
                return .success(try await closure())
            } catch let error as AuthorizationError {
                return .failure(error)
            } catch {
                return .failure(.authorizer("\(error)"))
            }
        }
        guard let endpoint else { return .failure(.notConfigured(missing)) }
        do {
            return .success(try await AuthEndpoint.post(endpoint, fields: fields, headers: options.authHeaders,
                                                        timeout: options.authTimeout, as: Answer.self))
        } catch {
            return .failure(error)
        }
    }

    /// An authorisation answered (or timed out). Answers of an older request — one made for a
    /// previous connection id, or replaced since — are discarded.
    private func authorizationFinished(_ name: String, id: UInt64, _ result: Result<ChannelAuthorizationResponse, AuthorizationError>) {
        state.withLock { state in
            guard let pending = state.pendingAuthorizations[name], pending.id == id else { return }
            state.pendingAuthorizations[name] = nil
            pending.cancel()
            guard state.handshaken, let channel = state.channels[name] else { return }
            switch result.flatMap({ response in validate(response, for: channel).map { (response, $0) } }) {
            case .success(let (response, (me, secret))):
                channel.authorized(me: me, sharedSecret: secret)
                sendSubscribe(name, auth: response.auth, channelData: response.channelData, in: &state)
            case .failure(let error):
                channel.setSubscribed(false)
                var fields: [String: JSONValue] = ["type": .string("AuthError"), "error": .string("\(error)")]
                if let status = error.status { fields["status"] = .number(Double(status)) }
                let data = (try? RealtimeMessage.jsonText(JSONValue.object(fields))) ?? "{}"
                channel.enqueue(RealtimeEvent(event: options.namespace.event(.subscriptionError), channel: name, data: data))
            }
        }
    }

    /// Checks an authorisation answer against what the channel's kind needs.
    private func validate(_ response: ChannelAuthorizationResponse, for channel: RealtimeChannel) -> Result<(PresenceMember?, [UInt8]?), AuthorizationError> {
        guard !response.auth.isEmpty else { return .failure(.invalidResponse("an empty auth")) }
        switch channel.kind {
        case .presence:
            guard let text = response.channelData,
                  let member = try? JSONDecoder().decode(PresenceMember.self, from: Data(text.utf8)) else {
                return .failure(.invalidResponse("a presence authorisation without channel_data holding a user_id"))
            }
            return .success((member, nil))
        case .encrypted:
            guard let text = response.sharedSecret, let key = Data(base64Encoded: text), key.count == SecretBox.keySize else {
                return .failure(.invalidResponse("an encrypted channel's authorisation without a 32-byte base64 shared_secret"))
            }
            return .success((nil, Array(key)))
        case .private, .public:
            return .success((nil, nil))
        }
    }

    /// Asks for signin now if connected, and on every later connection.
    func signin() {
        state.withLock { state in
            state.signinRequested = true
            if state.handshaken, state.pendingSignin == nil, state.signedInUserData == nil { startSignin(in: &state) }
        }
    }

    private func startSignin(in state: inout State) {
        guard let socketID = state.connectionId else { return }
        state.pendingSignin?.cancel()
        state.nextRequestID += 1
        let id = state.nextRequestID
        let options = options
        let timeout = options.authTimeout
        let timer = scheduler.schedule(at: scheduler.now + timeout) { [weak self] in
            self?.signinAuthenticated(id: id, .failure(.timedOut(timeout)))
        }
        let task = Task(executorPreference: Self.executor) { [weak self] in
            let result = await Self.authenticate(socketID: socketID, options: options)
            self?.signinAuthenticated(id: id, result)
        }
        state.pendingSignin = PendingRequest(id: id, timer: timer, task: task)
    }

    private static func authenticate(socketID: String, options: BirdRealtime.Options) async -> Result<UserAuthenticationResponse, AuthorizationError> {
        var closure: (@Sendable () async throws -> UserAuthenticationResponse)?
        if let authenticator = options.userAuthenticator { closure = { try await authenticator(socketID) } }
        return await obtain(
            closure: closure,
            endpoint: options.userAuthEndpoint, missing: "userAuthEndpoint or userAuthenticator",
            fields: [("socket_id", socketID)], options: options)
    }

    private func signinAuthenticated(id: UInt64, _ result: Result<UserAuthenticationResponse, AuthorizationError>) {
        state.withLock { state in
            guard var pending = state.pendingSignin, pending.id == id, !pending.awaitingServer, state.handshaken else { return }
            pending.timer?.cancel()
            switch result {
            case .success(let response):
                pending.awaitingServer = true
                // The server's answer gets the same deadline as the authentication.
                let timeout = options.authTimeout
                pending.timer = scheduler.schedule(at: scheduler.now + timeout) { [weak self] in
                    self?.signinUnanswered(id: id, timeout: timeout)
                }
                state.pendingSignin = pending
                let request = SigninRequest(auth: response.auth, userData: response.userData)
                if let text = try? RealtimeMessage(event: options.namespace.event(.signin), payload: request).text {
                    state.socket?.send(text: text)
                }
            case .failure(let error):
                state.pendingSignin = nil
                pending.task?.cancel()
                reportSignin(error, in: &state)
            }
        }
    }

    /// The server never answered our `<ns>:signin`.
    private func signinUnanswered(id: UInt64, timeout: Duration) {
        state.withLock { state in
            guard let pending = state.pendingSignin, pending.id == id, pending.awaitingServer else { return }
            state.pendingSignin = nil
            reportSignin(.timedOut(timeout), in: &state)
        }
    }

    private func reportSignin(_ error: AuthorizationError, in state: inout State) {
        let observers = signinErrorObservers
        outbox.enqueue { observers.send(error) }
    }

    /// Sends a client event (the channel checked the name, kind and subscription).
    private func trigger(_ event: String, data: String, on channel: String) -> Bool {
        state.withLock { state in
            guard state.handshaken, state.channels[channel]?.subscribed == true, let socket = state.socket else { return false }
            return socket.send(text: RealtimeMessage(event: event, channel: channel, data: data).text)
        }
    }
}
