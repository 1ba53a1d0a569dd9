/// What a channel's name makes of it, by prefix (DESIGN.md "The wire protocol", Pusher's
/// channel types): the one rule the client, the server and the signer share.
public enum ChannelKind: String, Sendable, Hashable {
    /// Anyone may subscribe; no authorisation.
    case `public`
    /// `private-…`: subscriptions are authorised for the connection's socket id.
    case `private`
    /// `presence-…`: authorised, with a member list.
    case presence
    /// `private-encrypted-…`: authorised; event data is sealed with the channel's shared secret
    /// (libsodium secretbox), which the server never sees.
    case encrypted

    /// The kind for a channel name, by its prefix.
    public init(channelName name: String) {
        if name.hasPrefix("private-encrypted-") {
            self = .encrypted
        } else if name.hasPrefix("private-") {
            self = .private
        } else if name.hasPrefix("presence-") {
            self = .presence
        } else {
            self = .public
        }
    }

    /// Whether subscribing needs an authorisation.
    public var needsAuthorization: Bool { self != .public }

    /// Whether members may send client events (`client-…`): private and presence channels,
    /// not encrypted ones (client libraries do not encrypt them, so one would reach members
    /// expecting end-to-end encryption in clear text; Pusher refuses them too).
    public var allowsClientEvents: Bool { self == .private || self == .presence }
}
