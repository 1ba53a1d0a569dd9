import RealtimeProtocol

/// The hub's server API (what the HTTP API and embedding programs call): publishing to
/// channels and users, closing and dropping connections, and the channel and presence
/// listings. With a cluster's fan-out, publishes and terminations reach every node.
extension RealtimeHub {
    /// Delivers an event to every subscriber of each channel, in publish order: at once to
    /// this node's, through the cluster's bus (when there is one) to the other nodes'.
    ///
    /// - Parameters:
    ///   - appID: the app.
    ///   - channels: channel names.
    ///   - event: the event name (an app event, never a protocol one).
    ///   - data: the payload text.
    ///   - excluding: a socket id not to deliver to (the publisher's own connection).
    /// - Returns: how many frames were queued.
    @discardableResult
    public func publish(appID: String, channels: [String], event: String, data: String, excluding: String? = nil) -> Int {
        let events = channels.map { ChannelFanoutEvent(app: appID, channel: $0, event: event, data: data, excluding: excluding) }
        let delivered = withState { state in events.reduce(0) { $0 + deliverChannel($1, in: &state) } }
        // This node's subscribers have it; the bus takes it to the other nodes (which skip
        // their own node's messages).
        for event in events { fanOut(event) }
        return delivered
    }

    /// Delivers an event to every connection signed in as `userID` that subscribed to its user
    /// channel (`#server-to-user-<id>`, as Pusher's libraries do after a signin), on every node:
    /// Pusher's `send_to_user`.
    ///
    /// - Returns: how many frames this node queued.
    @discardableResult
    public func sendToUser(appID: String, userID: String, event: String, data: String) -> Int {
        publish(appID: appID, channels: [Self.serverToUserPrefix + userID], event: event, data: data)
    }

    /// Hands a channel event delivered here to the cluster's other nodes, if there are any; a
    /// bus that is down is logged (channel events are not kept: the other nodes' subscribers
    /// miss it, as Pusher's do across a drop).
    func fanOut(_ event: ChannelFanoutEvent) {
        guard let fanout = configurationStorage.fanout else { return }
        do throws(RoomStoreError) { try fanout.publish(event) } catch {
            log("channel event on \(event.channel.prefix(80)) reached this node only: \(error)")
        }
    }

    /// Queues a channel event to this node's subscribers of its channel, but `excluding`.
    ///
    /// - Returns: how many frames were queued.
    func deliverChannel(_ event: ChannelFanoutEvent, in state: inout State) -> Int {
        metrics.eventsPublished.bump()
        guard let channel = state.channels[event.app]?[event.channel] else {
            note(.event, app: event.app, socketID: event.excluding, channel: event.channel, userID: event.userID, event: event.event,
                              detail: "no subscriber on this node, \(event.data?.utf8.count ?? 0) bytes", in: &state)
            return 0
        }
        let frame = RealtimeMessage(event: event.event, channel: event.channel, data: event.data, userID: event.userID).text
        var delivered = 0
        for socketID in channel.subscribers where socketID != event.excluding {
            // Only the output is read: the connection's whole record is not copied (and its
            // sets and strings retained and released) for each of a crowd's deliveries.
            guard let output = state.connections[socketID]?.output else { continue }
            state.send(frame, to: output)
            delivered += 1
        }
        note(.event, app: event.app, socketID: event.excluding, channel: event.channel, userID: event.userID, event: event.event,
                          detail: "\(delivered == 1 ? "1 delivery" : "\(delivered) deliveries"), \(event.data?.utf8.count ?? 0) bytes", in: &state)
        return delivered
    }

    /// Closes a connection with 4009 (the terminate API).
    ///
    /// - Parameters:
    ///   - appID: the app the connection must belong to.
    ///   - socketID: the connection.
    /// - Returns: whether such a connection existed.
    @discardableResult
    public func terminate(appID: String, socketID: String) -> Bool {
        close(appID: appID, socketID: socketID, code: RealtimeCloseCode.unauthorized.rawValue, reason: "Connection terminated")
    }

    /// Closes one connection with any close code: operators' and tests' fault injection (a
    /// 4201 to make a client reconnect at once, a 4100 to make it back off).
    ///
    /// - Parameters:
    ///   - appID: the app the connection must belong to.
    ///   - socketID: the connection.
    ///   - code: a close code that may be sent (1000, 3000–4999; RFC 6455 §7.4).
    ///   - reason: the close reason (at most 123 bytes).
    /// - Returns: whether such a connection existed.
    @discardableResult
    public func close(appID: String, socketID: String, code: UInt16, reason: String) -> Bool {
        guard end(appID: appID, socketID: socketID, with: { .close($0, code: code, reason: reason) }) else { return false }
        metrics.countClose(code)
        log("closed \(socketID) (\(code))")
        return true
    }

    /// Drops one connection without a close frame, as a dead network path would (the client
    /// sees 1006).
    ///
    /// - Returns: whether such a connection existed.
    @discardableResult
    public func drop(appID: String, socketID: String) -> Bool {
        guard end(appID: appID, socketID: socketID, with: { .abort($0) }) else { return false }
        log("dropped \(socketID)")
        return true
    }

    /// Queues the close or drop of an app's connection (after the frames queued to it) and
    /// forgets it.
    private func end(appID: String, socketID: String, with delivery: (any ConnectionOutput) -> Delivery) -> Bool {
        withState { state in
            guard let connection = state.connections[socketID], connection.app.id == appID else { return false }
            state.queue(delivery(connection.output))
            forget(socketID, in: &state)
            return true
        }
    }

    /// Closes with 4009 every connection signed in as `userID` (Pusher's terminate-user API),
    /// on every node of a cluster.
    ///
    /// - Returns: how many connections of this node were closed.
    @discardableResult
    public func terminateUser(appID: String, userID: String) -> Int {
        let closed = terminateLocalUser(appID: appID, userID: userID)
        if let fanout = configurationStorage.fanout {
            do throws(RoomStoreError) { try fanout.terminate(app: appID, user: userID) } catch {
                log("terminate_connections for \(userID.prefix(80)) reached this node only: \(error)")
            }
        }
        return closed
    }

    /// Closes with 4009 this node's connections signed in as `userID`.
    func terminateLocalUser(appID: String, userID: String) -> Int {
        let sockets = withState { state in
            state.connections.values.filter { $0.app.id == appID && $0.userID == userID }.map(\.socketID)
        }
        return sockets.filter { terminate(appID: appID, socketID: $0) }.count
    }

    /// Occupied channels of an app with their subscriber counts.
    public func channels(appID: String) -> [String: Int] {
        channelCounts(appID: appID).mapValues(\.subscriptions)
    }

    /// Occupied channels of an app: subscriptions (connections, this node's) and users (for a
    /// presence channel: distinct users, the cluster's as this node sees them; 0 otherwise).
    public func channelCounts(appID: String) -> [String: (subscriptions: Int, users: Int)] {
        withState { state in
            (state.channels[appID] ?? [:]).compactMapValues { channel in
                channel.subscribers.isEmpty ? nil : (channel.subscribers.count, channel.clusterView?.count ?? channel.members.count)
            }
        }
    }

    /// User ids present on a presence channel, sorted: on every live node of a cluster.
    public func presenceMembers(appID: String, channel: String) -> [String] {
        if let members = clusterMembers(.channel(app: appID, channel: channel), limit: Self.maxClusterPresenceMembers) {
            return members.map(\.user)
        }
        return withState { $0.channels[appID]?[channel]?.members.keys.sorted() ?? [] }
    }

    /// Open connections (all apps).
    public var connectionCount: Int { withState { $0.connections.count } }

    /// The socket ids of an app's open connections on this node, in no order: for operators'
    /// and tests' fault injection with ``close(appID:socketID:code:reason:)``.
    public func socketIDs(appID: String) -> [String] {
        withState { state in state.connections.filter { $0.value.app.id == appID }.map(\.key) }
    }
}
