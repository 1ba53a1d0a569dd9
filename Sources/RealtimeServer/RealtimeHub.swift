import Foundation
import SystemSupport
import RealtimeProtocol

/// The reference server's core, without I/O: connections, channels, presence, publishing and
/// pruning. The transport calls `open`, `receive`, `closed`; the HTTP API calls `publish` and
/// `terminate`; a timer calls `sweep`. Thread-safe.
///
/// Protocol: Pusher Channels protocol 7 in the `bird` or `pusher` namespace (DESIGN.md, "The
/// wire protocol"). The hub decides under its lock, with the decisions of each concern made by
/// a value type (`ConnectionBudget`, `SubscriptionCheck`, a `Channel`'s presence, a `Room`'s
/// admissions and cursor), and writes after it (`withState`): deliveries to one subscriber keep
/// the order decided, and no socket is written while the lock is held.
public final class RealtimeHub: Sendable {
    /// Limits and timeouts.
    public struct Configuration: Sendable {
        /// The apps served.
        public var apps: [RealtimeApp]
        /// How long a pinged connection has to answer before it is closed with 4201.
        public var pongTimeout: Duration = .seconds(30)
        /// Protocol errors tolerated on one connection; one more closes it with 4300.
        public var maxProtocolErrors = 10
        /// Client events allowed per connection per second; more close it with 4301.
        public var clientEventsPerSecond = 10
        /// Frames of any kind a connection may send per second (pings included); one more
        /// closes it with 4301. A read budget: what one peer makes the service thread parse.
        /// 2,000 by default: room for a client resubscribing its 1,000 channels at once.
        public var inboundMessagesPerSecond = 2_000
        /// Bytes of frames a connection may send per second; more close it with 4301.
        public var inboundBytesPerSecond = 1 << 20
        /// Most connections across all apps, whatever their own limits: one more is closed with
        /// 4100 (over capacity). `RealtimeServer` sets it below the process's descriptor limit, so
        /// accepting never fails for want of a descriptor (libwebsockets spun on a failing accept).
        public var maxTotalConnections = Int.max
        /// Room joins, refreshes and history requests allowed per connection per second; more
        /// are answered with the room error `rate_limited` (a join can replay up to 2 MiB, a
        /// page 1 MiB: the budget bounds what one connection makes the server read and write).
        public var roomRequestsPerSecond = 200
        /// Most room requests (sends, joins, history pages) and presence changes waiting for
        /// the history store and the cluster's registry at once (`RoomLane`): while the store
        /// does not answer they wait, and past this many a room request is refused with the
        /// retriable room error `store_full`. 10,000 by default. The bound is per lane: on a
        /// Redis Cluster each master's rooms wait on a lane of their own (at most
        /// `RoomLane.maxShards`, 64), so a node holds at most 64 times this many.
        public var roomLaneBacklog = 10_000
        /// One line per connection event, or `nil` for silence.
        public var log: (@Sendable (String) -> Void)?
        /// Where rooms keep their history (in this process's memory by default).
        public var roomStore: any RoomHistoryStore = InMemoryRoomStore()
        /// The bus to the cluster's other nodes, or `nil` for one node on its own (the
        /// default). With one, room events reach members through it only, channel events reach
        /// the other nodes through it, and presence is the cluster's (`RealtimeFanout`);
        /// `roomStore` must then be the cluster's shared store, the one that hands kept room
        /// events to this bus.
        public var fanout: (any RealtimeFanout)?
        /// The rule of a room the hub has seen no token or rule for (an app-server publish to a
        /// room nobody joined yet): history 100, kept 30 minutes.
        public var defaultRoomRule = RoomRule(history: 100)
        /// The wall clock for event times and token expiry, in milliseconds since 1970.
        public var wallClock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
        /// Told of every webhook event of an app with a `webhookURL`, from the hub's threads
        /// (never under its lock, in the order the hub decided them): it should only enqueue
        /// (the server's `WebhookDispatcher` does), since a service thread may be the caller.
        public var webhooks: (@Sendable (RealtimeApp, WebhookEvent) -> Void)?

        /// Bytes queued for clients on the whole node past which streamed replays wait (128 MiB
        /// by default): each connection may hold `replayQueuedBytes` and a page, so 1,000
        /// members resuming a long room and never reading would otherwise hold 580 MB
        /// (measured). Read from `queuedBytes`; without it, only each connection's bound holds.
        public var replayMemoryBudget = 128 * 1024 * 1024
        /// The bytes queued for clients on the whole node, summed by the transport (the
        /// server's `WebSocketContext.bufferedAmount`s), or `nil` when unknown.
        public var queuedBytes: (@Sendable () -> Int)?
        /// How long a connection's queue may stay over 512 KiB (`RealtimeHub.replayQueuedBytes`)
        /// while the node is over `replayMemoryBudget` before the connection is dropped (no close
        /// frame: it would wait behind what the client does not read; the client sees 1006,
        /// backs off and resumes from its position), the longest first, until the node is back
        /// under it (10 s by default). Replaying or not: a member of a live room that stops
        /// reading holds the node's memory as a resumer does.
        public var replayStallDeadline: Duration = .seconds(10)

        /// Bytes of streamed replay a second that the node's connections are sent together,
        /// each connection that replays in a second getting an equal share (`NodeReplayPace`);
        /// each is also held to `RealtimeHub.replayBytesPerSecond` (16 MiB) alone. 32 MiB by
        /// default: a resume of 100,000 events of 300 bytes takes about a second alone, and ten
        /// members rejoining far back again and again no longer slow everyone's sends (issue
        /// 47, item 4).
        public var replayBytesPerSecond = 32 * 1024 * 1024

        /// Where deferred work runs (`HubExecutor`), or `nil` for Dispatch queues (the server).
        package var executor: (any HubExecutor)?
        /// Gives the next socket id, or `nil` for two random 32-bit numbers (Pusher's
        /// `1234.5678`); one already open is asked again. A simulation gives them from its seed.
        package var socketIDs: (@Sendable () -> String)?

        /// Creates a configuration.
        ///
        /// - Parameter apps: the apps served.
        public init(apps: [RealtimeApp]) { self.apps = apps }
    }

    struct Member {
        var info: JSONValue?
        var sockets: Set<String>
    }

    struct Channel {
        /// Subscribers in subscription order (order of delivery).
        var subscribers = SubscriberList()
        var members: [String: Member] = [:]
        /// With a fan-out, a presence channel's members as this node's subscribers were told:
        /// read from the cluster when the channel opened here, then changed only by the bus's
        /// presence changes (`RealtimeHub.deliverPresence`), so a change already listed is never
        /// told again.
        var clusterView: [String: JSONValue?]?
        /// With a fan-out, subscribers of a presence channel that opened on this node whose
        /// `subscription_succeeded` waits for the cluster's members to be read (on the lane):
        /// nothing of the channel is delivered to them before it.
        var awaitingView: [String] = []
        /// While the cluster's members are read, the presence changes the bus brought meanwhile,
        /// applied to the list read (`PresenceView`); `nil` when no read is on its way.
        var viewChanges: [PresenceFanoutEvent]?
        /// More changes came during the read than are kept: the view is read again after.
        var viewChangesOverflowed = false
    }

    struct Connection {
        var socketID: String
        var app: RealtimeApp
        var namespace: ProtocolNamespace
        var output: any ConnectionOutput
        var channels: Set<String> = []
        var userID: String?
        var presenceUser: [String: String] = [:]
        var rooms: Set<String> = []
        /// Its clocks and per-second budgets, and the decisions on them.
        var budget: ConnectionBudget
        /// The join (`JoinJob.generation`) whose streamed replay waits for room on its socket
        /// and looks again on a timer (`RealtimeHub.joinTurn`), or `nil`.
        var replayLooker: UInt64?
        /// Its other streamed replays waiting for room, by room: they ask for their turns again
        /// when the one that looks finds it, or ends. A room's newer join replaces its older
        /// one's (a join and leave repeated while the socket is full leaves one), so at most one
        /// per room of the connection (100).
        var replayParked: [String: RealtimeHub.JoinJob] = [:]
        /// Since when its queue has been over `RealtimeHub.replayQueuedBytes` at every look of
        /// the sweep while the node is over `Configuration.replayMemoryBudget` (it does not
        /// read), or `nil`: the longest are dropped first (`RealtimeHub.sweepSlowReaders`).
        var queueFullSince: ContinuousClock.Instant?

        /// Hands the parked replays over to be resumed, in room order; no stream looks any more.
        mutating func takeParkedReplays() -> [RealtimeHub.JoinJob] {
            defer { replayParked = [:] }
            replayLooker = nil
            return replayParked.sorted { $0.key < $1.key }.map(\.value)
        }
    }

    struct State {
        var connections: [String: Connection] = [:]
        /// Open connections by app id (the per-app limit is checked without a scan).
        var connectionsByApp: [String: Int] = [:]
        /// Channels by app id, then channel name.
        var channels: [String: [String: Channel]] = [:]
        /// Rooms with members on this node, by app id, then room name.
        var rooms: [String: [String: Room]] = [:]
        /// Rules learned from tokens and publishes for rooms without members, by app id.
        var knownRules: [String: KnownRoomRules] = [:]
        /// The node's replays paced together, each connection its share
        /// (`Configuration.replayBytesPerSecond`).
        var replayPace = NodeReplayPace(bytesPerSecond: Configuration(apps: []).replayBytesPerSecond)
        /// The highest bytes queued for clients and connections since the heap was last
        /// trimmed (`sweepSlowReaders`).
        var heapTrim = HeapTrimTrigger()
        /// Whether the last sweep found the node over its replay memory (the connections'
        /// `queueFullSince` are set while it is).
        var slowReadersWatched = false
        /// When the history store last dropped expired events (`sweep`).
        var lastStoreExpiry = ContinuousClock.Instant.now
        /// The last `JoinJob.generation` given out.
        var joinGeneration: UInt64 = 0
        /// Presence changes the bus brought while a topic's members were being read again
        /// (`refreshPresence`): applied over the list read, which may predate them.
        var presenceReads: [FanoutTopic: PresenceRead] = [:]
        var open = true
        /// Writes decided under the lock, in the order decided, performed after it
        /// (`RealtimeHub.withState`).
        var outbox = DrainQueue<Delivery>()
    }

    let configurationStorage: Configuration
    /// The limits every connection is held to (`ConnectionBudget`), from the configuration.
    let limits: ConnectionLimits
    var roomStore: any RoomHistoryStore { configurationStorage.roomStore }
    let now: @Sendable () -> ContinuousClock.Instant
    let state = Locked(State())
    /// Where the hub's writes go on being performed once one caller has performed its share
    /// (`RealtimeHub.maxDrainRounds`): the outbox still has one drainer at a time.
    let outboxQueue = DispatchQueue(label: "RealtimeServer.outbox")
    /// Where the hub waits on its room store and the cluster's presence registry, never
    /// under `state`'s lock (`RoomLane`).
    let lane: RoomLane
    /// Where the cluster presence sweep (this node's liveness) waits on the bus's Redis: a lane
    /// of its own, off the sweep's thread and never behind the room lane's work.
    let presenceLane: RoomLane
    /// Whether the cluster's bus last said it was ready (not lost since): apart from `state`,
    /// so the health check never waits for the hub's lock.
    let fanoutConnected = Locked(false)
    /// Presence views whose read from the bus's registry failed or was not queued (a Redis
    /// failing over as the bus came back, a full lane): read again at each sweep until one
    /// read succeeds. At most one per presence topic this node has a view of.
    let presenceViewsToRead = Locked(Set<FanoutTopic>())
    /// Counters since the hub started, served by `GET /metrics`.
    public let metrics: RealtimeMetrics
    /// The operator's console's live log (recording only while a console looks).
    public let console: ConsoleLog

    /// Creates a hub.
    ///
    /// - Parameters:
    ///   - configuration: apps, limits, logging.
    ///   - now: the time source (a manual clock in tests).
    public init(configuration: Configuration, now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }) {
        self.configurationStorage = configuration
        self.limits = ConnectionLimits(
            pongTimeout: configuration.pongTimeout, maxProtocolErrors: configuration.maxProtocolErrors,
            framesPerSecond: configuration.inboundMessagesPerSecond, bytesPerSecond: configuration.inboundBytesPerSecond,
            clientEventsPerSecond: configuration.clientEventsPerSecond, roomRequestsPerSecond: configuration.roomRequestsPerSecond,
            readBytesPerSecond: Self.readBytesPerSecond, replayBytesPerSecond: Self.replayBytesPerSecond)
        self.now = now
        let metrics = RealtimeMetrics()
        self.metrics = metrics
        self.console = ConsoleLog(apps: configuration.apps.map(\.id), wallMilliseconds: configuration.wallClock)
        self.lane = RoomLane(maxBacklog: configuration.roomLaneBacklog, executor: configuration.executor, now: now,
                             displaced: { metrics.roomLaneRefused.bump() }) {
            [store = configuration.roomStore] app, room in store.shard(app: app, room: room)
        }
        self.presenceLane = RoomLane(label: "RealtimeServer.presence", maxBacklog: 16, executor: configuration.executor, now: now)
        state.withLock { $0.replayPace = NodeReplayPace(bytesPerSecond: configuration.replayBytesPerSecond) }
    }

    /// The app with this key, if served.
    public func app(key: String) -> RealtimeApp? { configurationStorage.apps.first { $0.key == key } }

    /// The app with this id, if served.
    public func app(id: String) -> RealtimeApp? { configurationStorage.apps.first { $0.id == id } }

    // MARK: - Connections

    /// Accepts a new connection for the app with `appKey`: sends the handshake, or closes it
    /// with 4001 (unknown app), 4100 (over capacity) or 4200 (shutting down).
    ///
    /// - Parameters:
    ///   - appKey: the key from the `/app/{key}` path.
    ///   - namespace: the namespace to speak on this connection.
    ///   - output: the transport.
    /// - Returns: the new socket id, or `nil` when the connection was refused.
    @discardableResult
    public func open(appKey: String, namespace: ProtocolNamespace, output: any ConnectionOutput) -> String? {
        guard let app = app(key: appKey) else {
            metrics.refusedUnknownApp.bump()
            output.close(code: RealtimeCloseCode.unknownApp.rawValue, reason: "Application does not exist")
            log("refused unknown app key \(appKey.prefix(40)) (4001)")
            return nil
        }
        let instant = now()
        let result = withState { admit(app: app, namespace: namespace, output: output, at: instant, in: &$0) }
        switch result {
        case .accepted(let socketID):
            metrics.connectionsOpened.bump()
            log("connected \(socketID) app \(app.id) (\(namespace))")
            return socketID
        case .refused(let code):
            if code == .overCapacity { metrics.refusedOverCapacity.bump() } else { metrics.refusedShuttingDown.bump() }
            output.close(code: code.rawValue, reason: code == .overCapacity ? "Over capacity" : "Server shutting down")
            log("refused connection for app \(app.id) (\(code))")
            return nil
        }
    }

    /// A connection of `app` arrives, under the lock: refused while shutting down (4200) or over
    /// the app's or the node's connections (4100), else given a fresh socket id (two random
    /// 32-bit numbers, as Pusher's `1234.5678`) and sent `connection_established`.
    func admit(app: RealtimeApp, namespace: ProtocolNamespace, output: any ConnectionOutput, at instant: ContinuousClock.Instant,
               in state: inout State) -> Refusable<String> {
        guard state.open else { return .refused(.reconnectNow) }
        let count = state.connectionsByApp[app.id, default: 0]
        guard count < app.maxConnections, state.connections.count < configurationStorage.maxTotalConnections else { return .refused(.overCapacity) }
        var socketID: String
        repeat {
            socketID = configurationStorage.socketIDs?() ?? "\(UInt32.random(in: 1...UInt32.max)).\(UInt32.random(in: 1...UInt32.max))"
        } while state.connections[socketID] != nil
        state.connectionsByApp[app.id, default: 0] += 1
        state.connections[socketID] = Connection(
            socketID: socketID, app: app, namespace: namespace, output: output, budget: ConnectionBudget(openedAt: instant))
        let handshake = ConnectionEstablished(socketID: socketID, activityTimeout: app.activityTimeout)
        state.queue(.send(output, Self.message(namespace.event(.connectionEstablished), payload: handshake)))
        note(.connect, app: app.id, socketID: socketID, detail: "\(namespace)", in: &state)
        return .accepted(socketID)
    }

    /// Handles a text frame from a connection.
    ///
    /// - Parameters:
    ///   - text: the frame.
    ///   - socketID: the sender.
    public func receive(text: String, from socketID: String) {
        metrics.messagesReceived.bump()
        metrics.bytesReceived.bump(text.utf8.count)
        let message: RealtimeMessage
        do {
            message = try RealtimeMessage(parsing: text)
        } catch {
            protocolError(socketID, error.description)
            return
        }
        let instant = now()
        let outcome = withState { received(message, bytes: text.utf8.count, from: socketID, at: instant, in: &$0) }
        apply(outcome, socketID: socketID)
    }

    /// A frame of `bytes` parsed into `message` arrived from a connection, under the lock: over
    /// the connection's frames or bytes a second it is closed with 4301, else handled.
    func received(_ message: RealtimeMessage, bytes: Int, from socketID: String, at instant: ContinuousClock.Instant, in state: inout State) -> Outcome {
        guard var connection = state.connections[socketID] else { return .ignored }
        let within = connection.budget.received(bytes: bytes, at: instant, limits: limits)
        state.connections[socketID] = connection
        guard within else { return .close(.clientEventRejected, "Rate limit exceeded") }
        return handle(message, from: connection, at: instant, in: &state)
    }

    /// Handles a binary frame: the protocol is text only, so it is a protocol error.
    ///
    /// - Parameter socketID: the sender.
    public func receiveBinary(from socketID: String) {
        protocolError(socketID, "binary frames are not supported")
    }

    /// Forgets a closed connection: leaves its channels (presence members removed).
    ///
    /// - Parameter socketID: the connection.
    public func closed(_ socketID: String) {
        if withState({ forget(socketID, in: &$0) }) != nil { log("disconnected \(socketID)") }
    }

    /// Closes a connection with a close code, after the frames queued to it, and forgets it.
    ///
    /// - Returns: whether the connection was open.
    @discardableResult
    func close(_ socketID: String, code: RealtimeCloseCode, reason: String) -> Bool {
        let closed = withState { state -> Bool in
            guard let connection = state.connections[socketID] else { return false }
            state.close(connection, code: code.rawValue, reason: reason)
            forget(socketID, in: &state)
            return true
        }
        if closed { metrics.countClose(code.rawValue) }
        return closed
    }

    /// Removes a connection from the state: it leaves its rooms and channels (presence members
    /// removed, the others told).
    ///
    /// - Returns: the connection, or `nil` when there was none.
    @discardableResult
    func forget(_ socketID: String, in state: inout State) -> Connection? {
        guard let connection = state.connections[socketID] else { return nil }
        for room in connection.rooms { leaveRoom(room, socketID: socketID, app: connection.app.id, in: &state) }
        state.connections[socketID] = nil
        let remaining = state.connectionsByApp[connection.app.id, default: 1] - 1
        state.connectionsByApp[connection.app.id] = remaining > 0 ? remaining : nil
        for channel in connection.channels { leave(channel, connection: connection, in: &state) }
        metrics.connectionsClosed.bump()
        note(.disconnect, app: connection.app.id, socketID: socketID, userID: connection.userID, in: &state)
        return connection
    }

    /// Pings connections silent for their app's activity timeout, closes with 4201 those that
    /// did not answer a ping within `pongTimeout`, and with 4009 those that did not sign in
    /// within their app's `userAuthenticationTimeout`. Call it periodically (every second).
    public func sweep() {
        console.sweep(now: now())
        let tick = withState { sweepTick(at: now(), in: &$0) }
        // The store is asked on each room's shard's lane (one check waiting per shard at
        // most): the sweep's thread never waits on it, a frozen master holds its own rooms'
        // checks only, and no join's read runs between a check's read and its answer.
        if !tick.quietRooms.isEmpty { lane.submitPerShard("quiet rooms", tick.quietRooms, room: { ($0.app, $0.room) }) { [self] rooms in checkRooms(rooms) } }
        if tick.expireStore { lane.submitOnce("store expiry") { [self] in roomStore.expire(now: wallMilliseconds()) } }
        sweepClusterPresence()
        readPresenceViewsAgain()
        sweepSlowReaders()
        for (socketID, code) in tick.expired where close(socketID, code: code, reason: code == .unauthorized ? "Unauthorized: signin required" : "Pong reply not received") {
            log("pruned \(socketID) (\(code))")
        }
    }

    /// What one tick of the sweep leaves to perform once the lock is released.
    struct SweepTick {
        /// Connections to close: 4201 (no pong in time) or 4009 (no signin in time).
        var expired: [(socketID: String, code: RealtimeCloseCode)] = []
        /// Rooms to compare with the store (`checkRooms`).
        var quietRooms: [QuietRoom] = []
        /// Whether the history store drops its expired events now (every 5 s).
        var expireStore = false
    }

    /// One tick of the sweep, under the lock: pings queued to connections silent for their
    /// app's activity timeout (Pusher protocol: `pusher:ping`), rooms' counts and expired
    /// tokens (`sweepRooms`), and what is left to perform (`SweepTick`).
    func sweepTick(at instant: ContinuousClock.Instant, in state: inout State) -> SweepTick {
        var tick = SweepTick()
        for (socketID, connection) in state.connections {
            var budget = connection.budget
            switch budget.sweep(
                at: instant, activityTimeout: .seconds(connection.app.activityTimeout),
                signinDeadline: connection.app.userAuthenticationTimeout.map { .seconds($0) }, signedIn: connection.userID != nil, limits: limits) {
            case .fine:
                break
            case .ping:
                state.connections[socketID]?.budget = budget
                state.send(RealtimeMessage(event: connection.namespace.event(.ping), data: "{}").text, to: connection)
            case .close(let code):
                tick.expired.append((socketID, code))
            }
        }
        sweepRooms(in: &state)
        tick.quietRooms = quietRooms(in: state)
        if instant - state.lastStoreExpiry >= .seconds(5) {
            state.lastStoreExpiry = instant
            tick.expireStore = true
        }
        return tick
    }

    /// Closes every connection with 4200 (reconnect now) and refuses new ones: a graceful
    /// shutdown, so clients reconnect at once (to another node, later).
    public func shutdown() {
        let socketIDs = withState { state -> [String] in
            state.open = false
            return Array(state.connections.keys)
        }
        for socketID in socketIDs { close(socketID, code: .reconnectNow, reason: "Server shutting down") }
    }

    // MARK: - Helpers

    /// A connection admitted with its value, or refused with a close code.
    enum Refusable<Value> {
        case accepted(Value)
        case refused(RealtimeCloseCode)
    }

    private func protocolError(_ socketID: String, _ text: String) {
        let outcome = withState { state -> Outcome in
            guard let connection = state.connections[socketID] else { return .ignored }
            return rejection(connection, text, code: nil, in: &state)
        }
        apply(outcome, socketID: socketID)
    }

    func log(_ line: String) { configurationStorage.log?(line) }

    static func message(_ event: String, channel: String? = nil, payload: some Encodable) -> String {
        // The payload types here always encode.
        (try? RealtimeMessage(event: event, channel: channel, payload: payload).text) ?? ""
    }
}
