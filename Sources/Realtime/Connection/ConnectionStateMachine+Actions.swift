import RealtimeProtocol
import Reconnect

/// What the machine asks of its owner: the timers it arms and the actions it returns, in order.
extension ConnectionStateMachine {
    /// The timers the machine arms; each names what it is for, so a stale one is recognised.
    enum TimerID: Hashable, Sendable {
        case activityCheck(generation: UInt64)
        case pongDeadline(generation: UInt64, sequence: UInt64)
        case authorization(channel: String, request: UInt64)
        case signin(request: UInt64)
        /// The rooms' auth batching window closed.
        case roomAuthBatch
        /// A batched room auth request is asked again after a transient failure.
        case roomAuthRetry(request: UInt64)
        /// A room's token reached its `keepUntil` (refresh while joined).
        case roomToken(room: String)
        /// A refused join (`rate_limited`, `store_full`) is tried again.
        case roomRetry(room: String)
        /// A history request's deadline.
        case roomHistory(request: UInt64)
        /// A join's or rejoin's deadline for its `joined`.
        case roomJoin(room: String)
    }

    /// What the owner does, in order.
    enum Action: Sendable {
        /// Open a socket for `generation` (the owner reports a failure with `openFailed`).
        case open(generation: UInt64)
        /// Send a frame on the socket of `generation`, if it is still the owner's socket.
        case send(String, generation: UInt64)
        /// Close the socket of `generation` with a code, then forget it.
        case close(RealtimeCloseCode, reason: String, generation: UInt64)
        /// Drop the socket of `generation` without a close frame, then forget it.
        case abort(generation: UInt64)
        /// Forget the socket of `generation` (it ended by itself).
        case forget(generation: UInt64)
        /// Arm a timer (replacing one armed under the same id).
        case schedule(TimerID, at: ContinuousClock.Instant)
        /// Disarm a timer.
        case cancel(TimerID)
        /// Ask for a channel authorisation; answer with `authorizationAnswered`.
        case authorize(ChannelAuthorizationRequest, request: UInt64)
        /// Ask for the user authentication of a signin; answer with `signinAuthenticated`.
        case authenticate(socketID: String, request: UInt64)
        /// Stop the task of a request (its answer is no longer wanted).
        case cancelRequest(UInt64)
        /// Tell the state observers.
        case publishState(ConnectionStateChange)
        /// Tell the error observers.
        case report(RealtimeError)
        /// Tell the signin-error observers.
        case reportSignin(AuthorizationError)
        /// Queue an event for a channel's bindings.
        case deliver(RealtimeEvent)
        /// Tell the `Reconnector`.
        case stream(StreamEvent)
        /// Ask the room auth route for these rooms; answer with `roomsAuthorized`.
        case authorizeRooms([String], request: UInt64)
        /// Queue an event for a room's handlers.
        case deliverRoom(RoomDelivery)
        /// A room became joined (`nil`) or ended (its error): `ready()` waiters are answered.
        case settleRoom(String, RoomError?)
        /// A history request is answered.
        case finishHistory(UInt64, Result<RoomHistoryPage, RoomError>)
    }
}
