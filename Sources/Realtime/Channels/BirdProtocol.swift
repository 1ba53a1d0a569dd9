import RealtimeProtocol

/// The protocol's names as the seed's Swift snippets use them: `BirdProtocol.Event.subscriptionSucceeded`
/// (realtime-connection-lifecycle seed, "What happens to channels"). Bound with
/// `RealtimeChannel.bind(_:_:)`, an event is named in the namespace the client speaks
/// (`bird:subscription_succeeded`, or `pusher:…` for a Pusher-compatible server).
public enum BirdProtocol {
    /// A protocol event a channel delivers to its bindings.
    public struct Event: Hashable, Sendable {
        /// The bare name (`subscription_succeeded`).
        public let name: ProtocolEventName

        /// Creates an event from its bare name.
        public init(_ name: ProtocolEventName) { self.name = name }

        /// The subscription is in place (after every resubscription); presence channels have
        /// their members then.
        public static let subscriptionSucceeded = Event(.subscriptionSucceeded)
        /// The subscription was refused: the server's `{"code", "message"}`, or the failed
        /// authorisation's `{"type": "AuthError", "error", "status"?}`.
        public static let subscriptionError = Event(.subscriptionError)
        /// A member joined a presence channel: `{"user_id", "user_info"?}`.
        public static let memberAdded = Event(.memberAdded)
        /// A member left a presence channel: `{"user_id"}`.
        public static let memberRemoved = Event(.memberRemoved)
        /// An error the server attributed to the channel: `{"message", "code"?}`.
        public static let error = Event(.error)

        /// The event's full name in `namespace` (`bird:subscription_succeeded`).
        public func name(in namespace: ProtocolNamespace) -> String { namespace.event(name) }
    }
}
