import Dispatch
@_exported import RealtimeProtocol
import Reachability
import ReachabilityNetlink
import Reconnect
import WebSocket

/// A realtime client: one WebSocket connection kept alive, with channels
/// (realtime-connection-lifecycle seed).
///
/// ```swift
/// let bird = BirdRealtime(options: .init(appKey: "demo-key", host: "127.0.0.1", port: 6001))
/// bird.onConnectionStateChange { previous, current in print(previous, "->", current) }
/// let prices = bird.subscribe("prices")
/// prices.bind("price-update") { event in print(event.data ?? "") }
/// bird.connect()
/// ```
///
/// Reconnection is a `Reconnector` (exposed as `reconnector`, so an app can add a
/// `shouldAttemptAutoReconnect` delegate) with full-jitter backoff, driven by the server's
/// netlink reachability: when the path comes back the client retries at once, and when it
/// changes under a live socket the client pings with a short deadline. Thread-safe; every
/// handler runs on `Options.deliveryQueue`, in order.
///
/// Keep a strong reference for as long as the connection should live: releasing the client
/// disconnects it (`deinit` calls `disconnect()`), channels included.
public final class BirdRealtime: Sendable {
    /// The options the client was made with.
    public let options: Options
    /// The connection: `connection.connectionId`, `connection.connectionState`.
    public let connection: RealtimeConnection
    /// The reconnector keeping `connection` alive: add delegates to veto attempts (for example
    /// on a wwan interface), observe its `events()` for the backoff delays it chooses.
    public let reconnector: Reconnector
    private let reconnectorObservation: ObservationToken

    /// Creates a client; nothing happens until `connect()`.
    ///
    /// - Parameters:
    ///   - options: server, app key, namespace, timeouts, delivery queue.
    ///   - transport: opens sockets (`WebSocketTransport` by default; an in-memory transport
    ///     in tests).
    ///   - scheduler: time and timers (real time by default; `ManualClock` in tests).
    ///   - random: the random source for backoff jitter.
    ///   - reachability: makes the reachability source for the server's host; `nil` uses
    ///     netlink (`NetworkReachability`) when `options.watchesReachability` is set.
    public init(
        options: Options,
        transport: (any RealtimeTransport)? = nil,
        scheduler: any ReconnectScheduler = DispatchReconnectScheduler(),
        random: any RandomNumberGenerator & Sendable = SystemRandomNumberGenerator(),
        reachability: (@Sendable (String) throws -> any ReachabilitySource)? = nil
    ) {
        self.options = options
        var contextOptions = WebSocketContext.Options()
        contextOptions.certificateAuthorityFile = options.certificateAuthorityFile
        contextOptions.maxMessageSize = max(0, options.maxMessageSize)
        contextOptions.maxBufferedAmount = max(0, options.maxBufferedAmount)
        // One connection: 64 KiB reads, one hand-off to the app per read.
        contextOptions.readBufferSize = 64 << 10
        connection = RealtimeConnection(
            options: options,
            transport: transport ?? WebSocketTransport(options: contextOptions),
            scheduler: scheduler
        )
        let configuration = Self.reconnectConfiguration(options)
        let makeReachability: (@Sendable (String) throws -> any ReachabilitySource)?
        if let reachability {
            makeReachability = reachability
        } else if options.watchesReachability {
            makeReachability = { host in
                try NetworkReachability(host: host, deliveryQueue: DispatchQueue(label: "BirdRealtime.reachability"))
            }
        } else {
            makeReachability = nil
        }
        reconnector = Reconnector(configuration: configuration, scheduler: scheduler, random: random, reachability: makeReachability)
        let connection = connection
        let floor = configuration.minimumAttemptInterval
        reconnectorObservation = reconnector.onEvent { event in
            switch event {
            case .scheduled(_, let delay) where delay > floor:
                connection.waitingForRetry()
            case .vetoed, .waitingForReachability:
                connection.waitingForRetry()
            default:
                break
            }
        }
        reconnector.activate(connection)
    }

    /// The reconnector's rules from `options`: full-jitter backoff, the connect timeout as the
    /// attempt timeout, the stable-connection duration and the short-connection allowance.
    static func reconnectConfiguration(_ options: Options) -> ReconnectConfiguration {
        var configuration = ReconnectConfiguration()
        configuration.policy = .backoff(options.backoff)
        configuration.attemptTimeout = options.connectTimeout
        configuration.stableConnectionDuration = max(.zero, options.stableConnectionDuration)
        configuration.shortConnectionAllowance = max(0, options.shortConnectionAllowance)
        return configuration
    }

    deinit {
        reconnectorObservation.cancel()
        reconnector.deactivate()
        connection.disconnect()
    }

    // MARK: - Connection

    /// The current state (seed, "The six states").
    public var connectionState: ConnectionState { connection.connectionState }

    /// Opens the connection: from `initialized`, `disconnected` or `failed` a new connection
    /// (with new authorisation); from `unavailable` an attempt now instead of after the
    /// backoff. Does nothing while `connecting` with a socket open or `connected`. Channels
    /// subscribed before are resubscribed after the handshake.
    public func connect() {
        guard connection.prepareConnect() else { return }
        if reconnector.isReconnecting { reconnector.stop() }
        reconnector.manualStart(immediately: true)
    }

    /// Closes the connection on purpose: state `disconnected`, nothing scheduled. Channels and
    /// their bindings are kept for a later `connect()` (seed, "Intentional disconnect").
    public func disconnect() {
        connection.disconnect()
    }

    /// Calls `handler(previous, current)` on the delivery queue for every state transition.
    ///
    /// - Returns: a token whose `cancel()` removes the handler.
    @discardableResult
    public func onConnectionStateChange(_ handler: @escaping @Sendable (ConnectionState, ConnectionState) -> Void) -> ObservationToken {
        connection.onStateChange { handler($0.previous, $0.current) }
    }

    /// Every state transition from now on, as an `AsyncStream` (unbounded buffer).
    public func connectionStateChanges() -> AsyncStream<ConnectionStateChange> { connection.stateChanges() }

    /// Calls `handler` on the delivery queue with every connection-level error: server
    /// `error` events not tied to a channel, close codes, frames that are not valid messages,
    /// transport failures and pong timeouts (seed, "Connection errors versus channel errors").
    ///
    /// - Returns: a token whose `cancel()` removes the handler.
    @discardableResult
    public func onError(_ handler: @escaping @Sendable (RealtimeError) -> Void) -> ObservationToken {
        connection.onError(handler)
    }

    /// Every connection-level error from now on, as an `AsyncStream` (unbounded buffer).
    public func errors() -> AsyncStream<RealtimeError> { connection.errors() }

    // MARK: - Signin

    /// Signs the user in on this connection and on every later one (seed, "What happens to
    /// channels"): the user-auth endpoint (or `userAuthenticator`) is asked with the current
    /// socket id, then `<ns>:signin` is sent. Failures, now or on a later connection, go to
    /// `onSigninError`.
    public func signin() { connection.signin() }

    /// Calls `handler` on the delivery queue for every failed signin: the authenticator
    /// refused or timed out, or the server refused the signature.
    ///
    /// - Returns: a token whose `cancel()` removes the handler.
    @discardableResult
    public func onSigninError(_ handler: @escaping @Sendable (AuthorizationError) -> Void) -> ObservationToken {
        connection.onSigninError(handler)
    }

    // MARK: - Channels

    /// Subscribes to `name` and returns its channel: the same object for the same name until
    /// it is unsubscribed. Sent at once when connected, otherwise after the next handshake;
    /// resubscribed after every reconnect with its bindings kept. Private, presence and
    /// encrypted channels are authorised first (`authEndpoint` or `authorizer`), again for
    /// every new connection id; a refusal arrives on the channel as `<ns>:subscription_error`,
    /// whose data is the server's `{"code", "message"}` when the server refused, or
    /// `{"type": "AuthError", "error": text, "status": HTTP status if any}` when the
    /// authorisation itself failed (the endpoint refused, broke, timed out, or answered badly).
    ///
    /// - Parameter name: the channel name (`prices`).
    /// - Returns: the channel.
    @discardableResult
    public func subscribe(_ name: String) -> RealtimeChannel {
        connection.channel(named: name)
    }

    /// Unsubscribes from `name`: `<ns>:unsubscribe` is sent when connected, and the channel is
    /// not resubscribed after later reconnects. A later `subscribe(name)` makes a new channel.
    ///
    /// - Parameter name: the channel name.
    public func unsubscribe(_ name: String) { connection.unsubscribe(name) }

    /// The channel subscribed as `name`, if any.
    public func channel(named name: String) -> RealtimeChannel? { connection.existingChannel(named: name) }

    /// The names of the subscribed channels, in subscription order.
    public var channelNames: [String] { connection.channelNames }

    // MARK: - Rooms

    /// Joins the room `name` and returns it: the same object for the same name until it is
    /// left (rooms seed, "Joining"). Joined at once when connected, otherwise after the next
    /// handshake; rejoined from its position after every reconnect. Its token comes from a
    /// public grant (`Options.grants`) or the auth route (`roomAuthEndpoint` or
    /// `roomAuthorizer`), in one request for every room joined in the same moment, and is kept
    /// until 10 minutes before it expires. Calling `join` on a failed room tries it again.
    ///
    /// - Parameters:
    ///   - name: the room name (`order:1042`): 1…164 of `A–Z a–z 0–9 _ - = @ , . ; :`;
    ///     another name gives a room that fails with `invalid_room`.
    ///   - position: where an earlier process left the room (`Room.position`, which is
    ///     `Codable`: saved to a file, read back after a restart). The first join asks for
    ///     the events after it: within the room's history they come first, marked `replayed`;
    ///     past it, the gap is told on the room (the rooms seed, "Saved positions"). Used only by a
    ///     room this client does not hold yet (or one that failed without a position); a room
    ///     already joined keeps its own.
    /// - Returns: the room.
    @discardableResult
    public func join(_ name: String, from position: RoomPosition? = nil) -> Room { connection.join(name, from: position) }

    /// The room joined as `name` (joining, joined or failed), or `nil`.
    public func room(_ name: String) -> Room? { connection.existingRoom(named: name) }

    /// Leaves the room `name`: `room_leave` is sent when joined, and it is never rejoined. A
    /// later `join(name)` makes a new room, with no position.
    public func leave(_ name: String) { connection.leave(name) }

    /// The names of the joined rooms, in join order.
    public var roomNames: [String] { connection.roomNames }

    /// Replaces the public grants (a newer answer of the backend's `config()`), taken as
    /// received now.
    public func setRoomGrants(_ configuration: RoomConfiguration) { connection.setRoomGrants(configuration) }
}
