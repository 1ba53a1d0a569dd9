import SystemSupport
import Reconnect

/// An in-memory `ReconnectableStream` whose connection attempts do what the test scripted:
/// succeed, fail, hang until aborted, or be refused. It reports the same events a real stream
/// would, synchronously, and counts what the reconnector asked of it.
public final class ScriptedStream: ReconnectableStream {
    /// What the next connection attempts do.
    public enum Behaviour: Sendable, Equatable {
        /// Opened, then ready.
        case succeed
        /// Opened, then disconnected before ready (a handshake or authentication failure).
        case failAfterOpen
        /// Disconnected with an error without opening (connection refused, no route).
        case fail
        /// Nothing happens until `abortConnectAttempt()` (a hung connect).
        case hang
        /// Refused for good (bad credentials): `refused` then `disconnected`.
        case refuse(String)
    }

    /// The error a scripted failure reports.
    public struct Failure: Error, Equatable, Sendable {
        /// What failed.
        public var reason: String
    }

    /// What `verifyConnection()` finds.
    public enum Liveness: Sendable, Equatable {
        /// The connection answers: nothing happens.
        case alive
        /// The connection is dead: it is reported disconnected.
        case dead
    }

    private enum Phase { case disconnected, connecting, connected }

    private struct State {
        var behaviour: Behaviour = .succeed
        var liveness: Liveness = .alive
        var phase = Phase.disconnected
        var attempts = 0
        var aborts = 0
        var verifications = 0
        var lastConnectMethod = ConnectMethod.standard
        var methodsUsed: [ConnectMethod] = []
    }

    /// The host given at creation.
    public let destinationHost: String
    /// The events channel the reconnector listens to.
    public let reconnectEvents = StreamEventRelay()
    private let state = Locked(State())

    /// Creates a disconnected stream.
    ///
    /// - Parameter host: the host it pretends to connect to.
    public init(host: String = "fake.test") {
        destinationHost = host
    }

    /// What the next attempts do (`.succeed` by default).
    public var behaviour: Behaviour {
        get { state.withLock { $0.behaviour } }
        set { state.withLock { $0.behaviour = newValue } }
    }

    /// What `verifyConnection()` finds (`.alive` by default).
    public var liveness: Liveness {
        get { state.withLock { $0.liveness } }
        set { state.withLock { $0.liveness = newValue } }
    }

    /// Connection attempts made by anyone (the app's `connect()` included).
    public var attempts: Int { state.withLock { $0.attempts } }
    /// Calls of `abortConnectAttempt()` that found an attempt to abort.
    public var aborts: Int { state.withLock { $0.aborts } }
    /// Calls of `verifyConnection()`.
    public var verifications: Int { state.withLock { $0.verifications } }
    /// Whether the stream is connected (opened or ready).
    public var isConnected: Bool { state.withLock { $0.phase == .connected } }

    /// The app connects the stream itself (as the first connect of an app would).
    public func connect() { connect(using: .standard) }

    /// The app connects with `method` (a stream with two ways to connect, as XMPP's plain and
    /// "old school" direct TLS): the reconnector reconnects the same way.
    public func connect(using method: ConnectMethod) {
        state.withLock { $0.lastConnectMethod = method }
        startConnectAttempt(using: method)
    }

    /// The method of every attempt, the app's and the reconnector's, in order.
    public var methodsUsed: [ConnectMethod] { state.withLock { $0.methodsUsed } }

    /// How the app last connected (`ReconnectableStream`).
    public var lastConnectMethod: ConnectMethod { state.withLock { $0.lastConnectMethod } }

    /// Records `method`, then runs the scripted behaviour.
    public func startConnectAttempt(using method: ConnectMethod) {
        state.withLock { $0.methodsUsed.append(method) }
        startConnectAttempt()
    }

    /// The app disconnects on purpose: `toldToDisconnect`, then `disconnected`.
    public func disconnect() {
        reconnectEvents.send(.toldToDisconnect)
        state.withLock { $0.phase = .disconnected }
        reconnectEvents.send(.disconnected(error: nil))
    }

    /// The connection drops by accident (the network went away, the server died).
    ///
    /// - Parameters:
    ///   - reason: the error's text.
    ///   - retry: the retry timing the peer asked for (a 42xx close code asks `.immediately`).
    public func drop(_ reason: String = "connection reset", retry: RetryTiming = .policy) {
        state.withLock { $0.phase = .disconnected }
        reconnectEvents.send(.disconnected(error: Failure(reason: reason), retry: retry))
    }

    /// The peer refuses a connected stream for good (a conflict, a termination).
    ///
    /// - Parameter reason: why.
    public func refuse(_ reason: String) {
        state.withLock { $0.phase = .disconnected }
        reconnectEvents.send(.refused(reason: reason))
        reconnectEvents.send(.disconnected(error: Failure(reason: reason)))
    }

    // MARK: ReconnectableStream

    /// Runs the scripted behaviour.
    public func startConnectAttempt() {
        let behaviour = state.withLock { state -> Behaviour in
            state.attempts += 1
            state.phase = .connecting
            return state.behaviour
        }
        reconnectEvents.send(.willConnect)
        switch behaviour {
        case .succeed:
            reconnectEvents.send(.opened)
            state.withLock { $0.phase = .connected }
            reconnectEvents.send(.ready)
        case .failAfterOpen:
            reconnectEvents.send(.opened)
            state.withLock { $0.phase = .disconnected }
            reconnectEvents.send(.disconnected(error: Failure(reason: "handshake failed")))
        case .fail:
            state.withLock { $0.phase = .disconnected }
            reconnectEvents.send(.disconnected(error: Failure(reason: "connection refused")))
        case .hang:
            break
        case .refuse(let reason):
            state.withLock { $0.phase = .disconnected }
            reconnectEvents.send(.refused(reason: reason))
            reconnectEvents.send(.disconnected(error: Failure(reason: reason)))
        }
    }

    /// Ends a hanging attempt with `disconnected`.
    public func abortConnectAttempt() {
        let wasConnecting = state.withLock { state -> Bool in
            guard state.phase == .connecting else { return false }
            state.aborts += 1
            state.phase = .disconnected
            return true
        }
        if wasConnecting { reconnectEvents.send(.disconnected(error: Failure(reason: "aborted"))) }
    }

    /// Counts the call; a `.dead` connection is reported disconnected.
    public func verifyConnection() {
        let dead = state.withLock { state -> Bool in
            state.verifications += 1
            guard state.liveness == .dead, state.phase == .connected else { return false }
            state.phase = .disconnected
            return true
        }
        if dead { reconnectEvents.send(.disconnected(error: Failure(reason: "no pong"))) }
    }
}
