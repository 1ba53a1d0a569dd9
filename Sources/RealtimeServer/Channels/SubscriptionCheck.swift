import RealtimeProtocol

/// Whether a connection may subscribe to a channel, decided on plain values before the hub
/// changes anything: the channel's name, a user channel's owner, the connection's channel
/// limit, the authorisation's signature, and a presence channel's `channel_data` and its
/// size. A presence channel's capacity, which needs the channel's members, is
/// `admitsPresence`.
///
/// Rules: Pusher Channels protocol 7, "Channel authorisation" (the signature of
/// `socket_id:channel[:channel_data]` with the app's secret) and "presence channels"
/// (`channel_data` with a `user_id`); Pusher's user channels (`#server-to-user-<id>`, the
/// signed-in user's own); our bounds (`RealtimeHub.maxChannelsPerConnection`, the app's
/// `maxPresenceUserInfoBytes` and `maxPresenceMembers`).
enum SubscriptionCheck {
    /// The decision.
    enum Verdict: Equatable {
        /// Refuse with `bird:subscription_error` carrying the message and code.
        case refuse(String, RealtimeCloseCode)
        /// Subscribe; on a presence channel, as this member.
        case subscribe(PresenceMember?)
    }

    /// Checks a subscription request.
    ///
    /// - Parameters:
    ///   - request: the request as the client sent it.
    ///   - socketID: the connection's socket id (what the signature covers).
    ///   - userID: the connection's signed-in user, `nil` before a signin.
    ///   - subscribed: the channels the connection holds.
    ///   - app: the connection's app (its key and secret, and presence limits).
    static func check(_ request: SubscribeRequest, socketID: String, userID: String?, subscribed: Set<String>, app: RealtimeApp) -> Verdict {
        let channel = request.channel
        guard RealtimeHub.isValidChannelName(channel) else { return .refuse("invalid channel name", .unauthorized) }
        // A user channel is the signed-in user's own, and needs nothing more (Pusher's rule).
        if channel.hasPrefix(RealtimeHub.serverToUserPrefix), channel != userID.map({ RealtimeHub.serverToUserPrefix + $0 }) {
            return .refuse("a #server-to-user- channel is for the signed-in user's own id", .unauthorized)
        }
        guard subscribed.count < RealtimeHub.maxChannelsPerConnection || subscribed.contains(channel) else {
            return .refuse("at most \(RealtimeHub.maxChannelsPerConnection) channels per connection", .clientEventRejected)
        }
        let kind = ChannelKind(channelName: channel)
        guard kind.needsAuthorization else { return .subscribe(nil) }
        guard let auth = request.auth else { return .refuse("authorisation required", .unauthorized) }
        let isPresence = kind == .presence
        // Sized before its signature is checked or it is parsed: a user id and `user_info`
        // within the app's limit.
        let infoLimit = app.maxPresenceUserInfoBytes
        let dataLimit = infoLimit + RealtimeHub.presenceChannelDataOverhead
        if isPresence, let channelData = request.channelData, channelData.utf8.count > dataLimit {
            return .refuse("channel_data over \(dataLimit) bytes (user_info is at most \(infoLimit))", .overCapacity)
        }
        let signed = ChannelAuthorization.subscriptionString(socketID: socketID, channel: channel, channelData: isPresence ? request.channelData : nil)
        guard ChannelAuthorization(key: app.key, secret: app.secret).verify(auth, signs: signed) else { return .refuse("invalid signature", .unauthorized) }
        guard isPresence else { return .subscribe(nil) }
        guard let channelData = request.channelData,
              let member = try? RealtimeMessage(event: "", data: channelData).decodeData(PresenceMember.self) else {
            return .refuse("presence channels need channel_data with a user_id", .unauthorized)
        }
        if let info = member.userInfo, (try? RealtimeMessage.jsonText(info))?.utf8.count ?? .max > infoLimit {
            return .refuse("user_info over \(infoLimit) bytes", .overCapacity)
        }
        return .subscribe(member)
    }

    /// The users of a presence topic as this node sees the cluster: those of the cluster's
    /// `view` and this node's `local` ones not in it yet (the bus brings a node's own
    /// registration back after a while); `nil` without a view.
    static func clusterUsers<Local: Collection<String>>(view: [String: JSONValue?]?, local: Local) -> Int? {
        view.map { view in view.count + local.count { view[$0] == nil } }
    }

    /// Whether a presence channel takes `user`: one already present always (another socket of
    /// the same user), a new one while the channel has fewer than `limit` users, counted as
    /// the most of this node's members and the cluster's (`clusterUsers`: the cluster's view
    /// with this node's members not in it yet, which the caller counts in).
    ///
    /// - Returns: `nil` when admitted, else the refusal.
    static func admitsPresence(user: String, present: Bool, localUsers: Int, clusterUsers: Int?, limit: Int) -> Verdict? {
        guard !present, max(localUsers, clusterUsers ?? 0) >= limit else { return nil }
        return .refuse("presence channel full: at most \(limit) members", .overCapacity)
    }
}
