import RealtimeProtocol

/// The limits a connection is held to, as plain values (from `RealtimeHub.Configuration`).
struct ConnectionLimits: Equatable {
    /// How long a pinged connection has to answer.
    var pongTimeout: Duration
    /// Protocol errors tolerated; one more closes with 4300.
    var maxProtocolErrors: Int
    /// Frames a second (pings included); one more closes with 4301.
    var framesPerSecond: Int
    /// Bytes a second of frames received and of what the connection asked the server to
    /// write (subscription confirmations); more closes with 4301.
    var bytesPerSecond: Int
    /// Client events (and room sends) a second; one more closes with 4301.
    var clientEventsPerSecond: Int
    /// Room joins, refreshes and history requests a second; more are refused `rate_limited`.
    var roomRequestsPerSecond: Int
    /// Bytes of history and `joined` frames a second (`RealtimeHub.readBytesPerSecond`).
    var readBytesPerSecond: Int
    /// Bytes of streamed replay a second (`RealtimeHub.replayBytesPerSecond`): a replay past it
    /// waits for the next second, never refused.
    var replayBytesPerSecond: Int
}

/// One connection's clocks and per-second budgets, and the decisions on them: when it is
/// pinged or closed for silence, when a signin came too late, and when it sent or asked for
/// more than its limits. A value: the hub keeps one per connection and performs what it
/// decides (sends the ping, closes the connection).
///
/// Rules: Pusher protocol 7 (a connection silent for its activity timeout is pinged, and closed
/// with 4201 when no pong comes; 4300 for repeated protocol errors, 4301 over a rate limit);
/// Pusher's user authentication timeout (4009 without a signin in time).
struct ConnectionBudget {
    /// What the sweep does with the connection now.
    enum Liveness: Equatable {
        /// Nothing: it was heard from recently, or its ping is not yet overdue.
        case fine
        /// Send a ping (it was silent for its activity timeout).
        case ping
        /// Close it with this code: 4201 (no pong in time) or 4009 (no signin in time).
        case close(RealtimeCloseCode)
    }

    /// When the connection opened.
    private(set) var openedAt: ContinuousClock.Instant
    /// When it last sent a frame.
    private(set) var lastActivity: ContinuousClock.Instant
    /// When the sweep pinged it, unanswered so far.
    private(set) var pingSentAt: ContinuousClock.Instant?
    /// Protocol errors and refused requests so far.
    private(set) var protocolErrors = 0
    private var frames: RateWindow
    private var bytes: RateWindow
    private var clientEvents: RateWindow
    private var roomRequests: RateWindow
    private var roomReads: RateWindow
    private var replays: RateWindow

    /// A connection that opened at `instant`.
    init(openedAt instant: ContinuousClock.Instant) {
        openedAt = instant
        lastActivity = instant
        frames = RateWindow(instant)
        bytes = RateWindow(instant)
        clientEvents = RateWindow(instant)
        roomRequests = RateWindow(instant)
        roomReads = RateWindow(instant)
        replays = RateWindow(instant)
    }

    /// A frame of `size` bytes arrived: the connection is alive (an outstanding ping counts as
    /// answered), and the frame counts against the frame and byte budgets.
    ///
    /// - Returns: whether both budgets still hold (false: close with 4301).
    mutating func received(bytes size: Int, at instant: ContinuousClock.Instant, limits: ConnectionLimits) -> Bool {
        lastActivity = instant
        pingSentAt = nil
        let frameCount = frames.spend(1, at: instant)
        let byteCount = bytes.spend(size, at: instant)
        return frameCount <= limits.framesPerSecond && byteCount <= limits.bytesPerSecond
    }

    /// The sweep's decision: a signin deadline passed without a signin closes with 4009; an
    /// unanswered ping past `pongTimeout` closes with 4201; silence for `activityTimeout`
    /// sends a ping (marked sent).
    ///
    /// - Parameters:
    ///   - signinDeadline: the app's user authentication timeout, `nil` for none.
    ///   - signedIn: whether the connection signed in.
    mutating func sweep(at instant: ContinuousClock.Instant, activityTimeout: Duration, signinDeadline: Duration?, signedIn: Bool, limits: ConnectionLimits) -> Liveness {
        if !signedIn, let signinDeadline, instant - openedAt >= signinDeadline { return .close(.unauthorized) }
        if let pingSentAt { return instant - pingSentAt >= limits.pongTimeout ? .close(.pongNotReceived) : .fine }
        guard instant - lastActivity >= activityTimeout else { return .fine }
        pingSentAt = instant
        return .ping
    }

    /// Counts a refused or failed request.
    ///
    /// - Returns: whether the connection is still within `maxProtocolErrors` (false: close
    ///   with 4300).
    mutating func failed(limits: ConnectionLimits) -> Bool {
        protocolErrors += 1
        return protocolErrors <= limits.maxProtocolErrors
    }

    /// Counts a client event or room send.
    ///
    /// - Returns: whether it is within `clientEventsPerSecond` (false: close with 4301).
    mutating func clientEvent(at instant: ContinuousClock.Instant, limits: ConnectionLimits) -> Bool {
        clientEvents.spend(1, at: instant) <= limits.clientEventsPerSecond
    }

    /// Counts a room join, leave, refresh or history request.
    ///
    /// - Returns: whether it is within `roomRequestsPerSecond` (false: answer `rate_limited`).
    mutating func roomRequest(at instant: ContinuousClock.Instant, limits: ConnectionLimits) -> Bool {
        roomRequests.spend(1, at: instant) <= limits.roomRequestsPerSecond
    }

    /// Charges what the connection made the server write (a subscription's confirmation) to
    /// its byte budget.
    ///
    /// - Returns: whether the budget still holds (false: close with 4301).
    mutating func charge(bytes size: Int, at instant: ContinuousClock.Instant, limits: ConnectionLimits) -> Bool {
        bytes.spend(size, at: instant) <= limits.bytesPerSecond
    }

    /// Bytes of history and `joined` frames the connection may still be sent this second, or
    /// `nil` for a fresh second (where any one request fits).
    func readBudgetLeft(at instant: ContinuousClock.Instant, limits: ConnectionLimits) -> Int? {
        let spent = roomReads.spent(at: instant)
        return spent == 0 ? nil : max(0, limits.readBytesPerSecond - spent)
    }

    /// Charges bytes of history or `joined` frames queued to the connection.
    mutating func chargeRead(bytes size: Int, at instant: ContinuousClock.Instant) {
        roomReads.spend(size, at: instant)
    }

    /// Bytes of streamed replay the connection may still be sent this second (0: its next
    /// page waits for the next second).
    func replayBudgetLeft(at instant: ContinuousClock.Instant, limits: ConnectionLimits) -> Int {
        max(0, limits.replayBytesPerSecond - replays.spent(at: instant))
    }

    /// Charges bytes of replayed frames queued to the connection.
    mutating func chargeReplay(bytes size: Int, at instant: ContinuousClock.Instant) {
        replays.spend(size, at: instant)
    }
}
