import Foundation
import RealtimeProtocol

/// An event delivered to a channel's bindings: an app event published to the channel, or one
/// of the protocol's channel events (`bird:subscription_succeeded`,
/// `bird:subscription_error`), named in the connection's namespace.
public struct RealtimeEvent: Sendable, Hashable {
    /// The event name as the app binds it (`price-update`, `bird:subscription_succeeded`).
    public var event: String
    /// The channel it arrived on.
    public var channel: String
    /// The event's data: the JSON text the publisher sent (`nil` when there was none).
    public var data: String?
    /// The sender's user id, for client events on presence channels.
    public var userID: String?

    /// Creates an event.
    public init(event: String, channel: String, data: String?, userID: String? = nil) {
        self.event = event
        self.channel = channel
        self.data = data
        self.userID = userID
    }

    /// Decodes `data` as JSON into `T`.
    ///
    /// - Throws: `ProtocolError.missingField("data")` without data, `.invalidField("data", …)`
    ///   when it does not decode as `T`.
    public func decodeData<T: Decodable>(_ type: T.Type) throws(ProtocolError) -> T {
        try RealtimeMessage(event: event, channel: channel, data: data).decodeData(type)
    }
}
