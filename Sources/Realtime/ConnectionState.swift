/// The state of a realtime connection: always one of the six of the
/// realtime-connection-lifecycle seed ("The six states").
public enum ConnectionState: String, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// The client exists and has not opened a socket yet.
    case initialized
    /// A socket is opening, or is open and waiting for the server handshake.
    case connecting
    /// The handshake arrived: the connection has an id and can subscribe.
    case connected
    /// The connection dropped and a reconnect is scheduled (a backoff delay, a delegate's veto,
    /// or waiting for the network). An immediate retry (close codes 4200–4299) stays
    /// `connecting`, even while the reconnector keeps its 100 ms minimum between attempts.
    case unavailable
    /// The app called `disconnect()`; nothing is scheduled.
    case disconnected
    /// The server refused this connection (close code 4000–4099); the client does not retry.
    case failed

    /// The state's name, as in the seed (`connected`, `unavailable`, …).
    public var description: String { rawValue }
}

/// One transition of `ConnectionState`, as given to `onConnectionStateChange`.
public struct ConnectionStateChange: Sendable, Hashable, CustomStringConvertible {
    /// The state before.
    public var previous: ConnectionState
    /// The state now.
    public var current: ConnectionState

    /// Creates a transition.
    public init(previous: ConnectionState, current: ConnectionState) {
        self.previous = previous
        self.current = current
    }

    /// `previous -> current`.
    public var description: String { "\(previous) -> \(current)" }
}
