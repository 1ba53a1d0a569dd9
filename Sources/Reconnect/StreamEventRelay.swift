import Locking

/// Carries a stream's events to the `Reconnector` attached to it. The stream owns the relay
/// and calls `send(_:)`; the relay holds the reconnector's handler, which captures the
/// reconnector weakly, so stream and reconnector never retain each other.
public final class StreamEventRelay: Sendable {
    private let handler = Locked<(@Sendable (StreamEvent) -> Void)?>(nil)

    /// Creates a relay with no listener.
    public init() {}

    /// Reports an event; does nothing when no reconnector is attached.
    ///
    /// - Parameter event: what happened to the stream.
    public func send(_ event: StreamEvent) {
        handler.withLock { $0 }?(event)
    }

    /// Installs (or, with `nil`, removes) the listener.
    func setHandler(_ newHandler: (@Sendable (StreamEvent) -> Void)?) {
        handler.withLock { $0 = newHandler }
    }
}
