import RealtimeProtocol

extension RealtimeHub {
    /// What handling a message requires after the lock is released.
    enum Outcome {
        case ignored
        case handled
        case close(RealtimeCloseCode, String)
        /// Handled here; the event goes to the cluster's other nodes once the lock is released.
        case fanOut(ChannelFanoutEvent)
        /// A member's room event, kept on the room's lane once the lock is released
        /// (`runRoomSend`).
        case roomSend(RoomSendJob)
        /// A member's page of history, read on the room's lane (`runHistory`).
        case history(HistoryJob)
        /// A presence channel opened on a cluster node: the cluster's members are read on the
        /// node's lane (`openPresenceView`), its first subscribers' confirmations waiting.
        case presenceView(app: RealtimeApp, channel: String)
        /// A join registered pending: its first turn on the lane is asked once the lock is
        /// released (`queueJoin`).
        case join(JoinJob)
    }

    /// Most channels one connection may hold (keeps a subscribe flood bounded).
    static let maxChannelsPerConnection = 1000
    /// Largest `data` of a protocol event other than the room ones (subscribe, signin, ping…):
    /// a presence `channel_data` at its limit with a signature fits many times over.
    static let maxProtocolDataBytes = 8 * 1024
    /// The room events, whose data rules are their own (docs/rooms-protocol.md).
    static let roomEvents: Set<ProtocolEventName?> = [.roomJoin, .roomLeave, .roomRefresh, .roomSend, .roomHistory]
    /// Bytes a presence `channel_data` may hold beyond the app's `user_info` limit: the user
    /// id and the JSON around them.
    static let presenceChannelDataOverhead = 256

    /// Pusher's user channel, `#server-to-user-<user id>`: after a signin, Pusher's libraries
    /// subscribe to it, and the server's `sendToUser` (Pusher's `send_to_user`) publishes there.
    public static let serverToUserPrefix = "#server-to-user-"

    /// Channel names: Pusher's alphabet, at most 164 characters; or a user channel
    /// (`serverToUserPrefix` and a user id in that alphabet).
    static func isValidChannelName(_ name: String) -> Bool {
        guard name.hasPrefix(serverToUserPrefix) else { return AuthorizationSigner.isValidChannelName(name) }
        return name.utf8.count <= 164 && AuthorizationSigner.isValidChannelName(String(name.dropFirst(serverToUserPrefix.count)))
    }

    func handle(_ message: RealtimeMessage, from connection: Connection, at instant: ContinuousClock.Instant, in state: inout State) -> Outcome {
        let namespace = connection.namespace
        guard let (_, name, isInternal) = ProtocolNamespace.split(message.event) else {
            if message.event.hasPrefix("client-") { return clientEvent(message, from: connection, at: instant, in: &state) }
            return rejection(connection, "unknown event \(message.event.prefix(60))", code: nil, in: &state)
        }
        guard !isInternal else {
            return rejection(connection, "internal events cannot be sent by clients", code: nil, in: &state)
        }
        let event = ProtocolEventName(rawValue: name)
        if !Self.roomEvents.contains(event), let size = message.data?.utf8.count, size > Self.maxProtocolDataBytes {
            // Refused before it is decoded: none of these events needs that much.
            return rejection(connection, "\(message.event.prefix(60)) data over \(Self.maxProtocolDataBytes) bytes", code: nil, in: &state)
        }
        switch event {
        case .ping:
            state.send(RealtimeMessage(event: namespace.event(.pong), data: "{}").text, to: connection)
            return .handled
        case .pong:
            return .handled
        case .roomJoin, .roomLeave, .roomRefresh, .roomSend, .roomHistory:
            return handleRoom(ProtocolEventName(rawValue: name), message, from: connection, at: instant, in: &state)
        case .subscribe:
            do {
                return subscribe(try message.decodeData(SubscribeRequest.self), connection: connection, in: &state)
            } catch {
                return rejection(connection, error.description, code: nil, in: &state)
            }
        case .unsubscribe:
            do {
                let request = try message.decodeData(UnsubscribeRequest.self)
                guard connection.channels.contains(request.channel) else { return .handled }
                state.connections[connection.socketID]?.channels.remove(request.channel)
                leave(request.channel, connection: connection, in: &state)
                note(.unsubscribe, app: connection.app.id, socketID: connection.socketID, channel: request.channel, userID: connection.userID, in: &state)
                return .handled
            } catch {
                return rejection(connection, error.description, code: nil, in: &state)
            }
        case .signin:
            do {
                return signin(try message.decodeData(SigninRequest.self), connection: connection, in: &state)
            } catch {
                return rejection(connection, error.description, code: nil, in: &state)
            }
        default:
            return rejection(connection, "unknown event \(message.event.prefix(60))", code: nil, in: &state)
        }
    }

    /// Sends an `error` event; too many errors close the connection with 4300.
    func rejection(_ connection: Connection, _ text: String, code: RealtimeCloseCode?, in state: inout State) -> Outcome {
        metrics.protocolErrors.bump()
        note(.error, app: connection.app.id, socketID: connection.socketID, userID: connection.userID, detail: text, in: &state)
        state.send(Self.message(connection.namespace.event(.error), payload: ErrorPayload(message: text, code: code.map { Int($0.rawValue) })), to: connection)
        return countFailure(connection, in: &state)
    }

    /// Counts a refused or failed request (a bad frame, a refused subscription, a failed
    /// signin) toward the connection's error limit: past `maxProtocolErrors` it is closed
    /// with 4300.
    func countFailure(_ connection: Connection, in state: inout State) -> Outcome {
        guard state.connections[connection.socketID]?.budget.failed(limits: limits) ?? true else {
            return .close(.genericError, "Too many protocol errors")
        }
        return .handled
    }

    /// Hands a webhook event to the configured sink when the app has a webhook URL: with no
    /// lock held (under the hub's lock, `State.webhook` queues it).
    func webhook(_ app: RealtimeApp, _ event: WebhookEvent) {
        guard app.webhookURL != nil, let sink = configurationStorage.webhooks else { return }
        sink(app, event)
    }

    /// Performs what a decision left for after the lock: a close, the bus's share of a channel
    /// event, or a room request's work on its lane (refused at once when the lane does not
    /// take it).
    func apply(_ outcome: Outcome, socketID: String) {
        let work: LaneJob
        switch outcome {
        case .ignored, .handled:
            return
        case .close(let code, let reason):
            if close(socketID, code: code, reason: reason) { log("closed \(socketID) (\(code): \(reason))") }
            return
        case .fanOut(let event):
            return fanOut(event)
        case .join(let job):
            return queueJoin(job)
        case .roomSend(let job):
            work = LaneJob(client: job.socketID, room: (job.app.id, job.room), run: { [self] in runRoomSend(job) },
                           refused: { [self] in sendQueued(job.refusal(Self.laneRefusal), to: job.socketID) })
        case .history(let job):
            work = LaneJob(client: job.socketID, room: (job.app, job.room), run: { [self] in runHistory(job) },
                           refused: { [self] in sendQueued(job.refusal(Self.laneRefusal), to: job.socketID) })
        case .presenceView(let app, let channel):
            work = LaneJob(client: RoomLane.node, run: { [self] in openPresenceView(app: app, channel: channel, read: true) },
                           refused: { [self] in openPresenceView(app: app, channel: channel, read: false) })
        }
        if !lane.submit(work) {
            metrics.roomLaneRefused.bump()
            work.refused()
        }
    }

    // MARK: - Subscriptions

    private func subscribe(_ request: SubscribeRequest, connection: Connection, in state: inout State) -> Outcome {
        let namespace = connection.namespace
        func refuse(_ text: String, _ code: RealtimeCloseCode) -> Outcome {
            metrics.subscriptionsRefused.bump()
            note(.error, app: connection.app.id, socketID: connection.socketID, channel: request.channel,
                              userID: connection.userID, detail: "subscription refused (\(code.rawValue)): \(text)", in: &state)
            state.send(Self.message(namespace.event(.subscriptionError), channel: request.channel, payload: ErrorPayload(message: text, code: Int(code.rawValue))), to: connection)
            return countFailure(connection, in: &state)
        }
        let member: PresenceMember?
        switch SubscriptionCheck.check(request, socketID: connection.socketID, userID: connection.userID, subscribed: connection.channels, app: connection.app) {
        case .refuse(let text, let code): return refuse(text, code)
        case .subscribe(let admitted): member = admitted
        }
        let channel = request.channel
        let kind = ChannelKind(channelName: channel)
        if connection.channels.contains(channel) {
            // Its confirmation waits for the cluster's members: it comes once they are read.
            if state.channels[connection.app.id]?[channel]?.awaitingView.contains(connection.socketID) == true { return .handled }
            // Already subscribed: confirm again without a second membership.
            let own = connection.presenceUser[channel].map { PresenceMember(userID: $0, userInfo: state.channels[connection.app.id]?[channel]?.members[$0]?.info) }
            let confirmation = subscriptionSucceeded(channel, app: connection.app, namespace: namespace, own: own, in: state)
            guard charge(confirmation.utf8.count, to: connection.socketID, in: &state) else { return .close(.clientEventRejected, "Rate limit exceeded") }
            state.send(confirmation, to: connection)
            return .handled
        }
        if let member, let existing = state.channels[connection.app.id]?[channel],
           case .refuse(let text, let code) = SubscriptionCheck.admitsPresence(
               user: member.userID, present: existing.members[member.userID] != nil, localUsers: existing.members.count,
               clusterUsers: SubscriptionCheck.clusterUsers(view: existing.clusterView, local: existing.members.keys),
               limit: connection.app.maxPresenceMembers) {
            return refuse(text, code)
        }
        state.connections[connection.socketID]?.channels.insert(channel)
        note(.subscribe, app: connection.app.id, socketID: connection.socketID, channel: channel, userID: member?.userID ?? connection.userID, in: &state)
        if state.channels[connection.app.id]?[channel] == nil {
            if configurationStorage.fanout != nil { state.queue(.follow(.channel(app: connection.app.id, channel: channel))) }
            state.webhook(connection.app, .init(name: "channel_occupied", channel: channel))
        }
        // Taken out while it changes (put back below): a copy left in the dictionary would make
        // every change copy the channel's lists.
        var record = state.channels[connection.app.id]?.removeValue(forKey: channel) ?? Channel()
        // A presence channel opening on a cluster node: the cluster's members are read on the
        // lane (never under the lock) and the subscription confirmed then (`openPresenceView`).
        let awaitsView = kind == .presence && configurationStorage.fanout != nil && record.clusterView == nil
        if awaitsView { record.awaitingView.append(connection.socketID) } else { record.subscribers.append(connection.socketID) }
        var announce: PresenceMember?
        if let member {
            state.connections[connection.socketID]?.presenceUser[channel] = member.userID
            if record.addMember(member.userID, info: member.userInfo, socket: connection.socketID) {
                let topic = FanoutTopic.channel(app: connection.app.id, channel: channel)
                let event = WebhookEvent(name: "member_added", channel: channel, userID: member.userID)
                if clusterPresence(joined: true, topic: topic, user: member.userID, info: member.userInfo, excluding: connection.socketID, app: connection.app, webhook: event, in: &state) {
                    announce = member
                }
            }
        }
        if awaitsView {
            let startsRead = record.viewChanges == nil
            if startsRead { record.viewChanges = [] }
            state.channels[connection.app.id, default: [:]][channel] = record
            guard startsRead else { return .handled }
            return .presenceView(app: connection.app, channel: channel)
        }
        state.channels[connection.app.id, default: [:]][channel] = record
        let confirmation = subscriptionSucceeded(channel, app: connection.app, namespace: namespace, own: member, in: state)
        state.send(confirmation, to: connection)
        // What a subscription makes the server write counts against the subscriber's read
        // budget: a presence list of 100 members with 1 KB each is 100 KB for 200 B asked.
        let withinBudget = charge(confirmation.utf8.count, to: connection.socketID, in: &state)
        if let announce {
            state.webhook(connection.app, .init(name: "member_added", channel: channel, userID: announce.userID))
            broadcastInternal(.memberAdded, channel: channel, app: connection.app, payload: announce, excluding: connection.socketID, in: &state)
        }
        return withinBudget ? .handled : .close(.clientEventRejected, "Rate limit exceeded")
    }

    /// Spends `bytes` of the connection's per-second byte budget (`inboundBytesPerSecond`) on
    /// what it asked the server to write; false once the budget is spent.
    func charge(_ bytes: Int, to socketID: String, in state: inout State) -> Bool {
        state.connections[socketID]?.budget.charge(bytes: bytes, at: now(), limits: limits) ?? true
    }

    /// The `subscription_succeeded` frame; a presence channel's lists its members: with a
    /// fan-out the node's view of the cluster's (`Channel.clusterView`) and `own`, the
    /// subscribing user (whose arrival the bus may not have brought yet), else this node's.
    func subscriptionSucceeded(_ channel: String, app: RealtimeApp, namespace: ProtocolNamespace, own: PresenceMember?, in state: State) -> String {
        let event = namespace.internalEvent(.subscriptionSucceeded)
        guard ChannelKind(channelName: channel) == .presence, let record = state.channels[app.id]?[channel] else {
            return RealtimeMessage(event: event, channel: channel, data: "{}").text
        }
        var list = record.members.mapValues(\.info)
        if var view = record.clusterView {
            if let own, view[own.userID] == nil { view.updateValue(own.userInfo, forKey: own.userID) }
            list = view
        }
        let ids = Array(list.keys.sorted().prefix(Self.maxClusterPresenceMembers))
        let hash = Dictionary(ids.map { ($0, (list[$0] ?? nil) ?? .null) }, uniquingKeysWith: { first, _ in first })
        return Self.message(event, channel: channel, payload: PresenceSubscriptionData(presence: .init(ids: ids, hash: hash, count: ids.count)))
    }

    /// Removes a connection from a channel; a presence user's last socket leaving is announced.
    func leave(_ channel: String, connection: Connection, in state: inout State) {
        // Taken out while it changes (put back below, unless vacated), as in `subscribe`.
        guard var record = state.channels[connection.app.id]?.removeValue(forKey: channel) else { return }
        record.subscribers.remove(connection.socketID)
        record.awaitingView.removeAll { $0 == connection.socketID }
        var departed: String?
        if let userID = connection.presenceUser[channel], record.removeMember(userID, socket: connection.socketID) {
            let topic = FanoutTopic.channel(app: connection.app.id, channel: channel)
            let event = WebhookEvent(name: "member_removed", channel: channel, userID: userID)
            if clusterPresence(joined: false, topic: topic, user: userID, info: nil, excluding: connection.socketID, app: connection.app, webhook: event, in: &state) {
                departed = userID
            }
        }
        state.connections[connection.socketID]?.presenceUser[channel] = nil
        let vacated = record.subscribers.isEmpty && record.awaitingView.isEmpty
        state.channels[connection.app.id]?[channel] = vacated ? nil : record
        if let departed { state.webhook(connection.app, .init(name: "member_removed", channel: channel, userID: departed)) }
        if vacated {
            if configurationStorage.fanout != nil {
                state.presenceReads[.channel(app: connection.app.id, channel: channel)]?.invalidate()
                state.queue(.unfollow(.channel(app: connection.app.id, channel: channel)))
            }
            state.webhook(connection.app, .init(name: "channel_vacated", channel: channel))
        }
        if let departed {
            broadcastInternal(.memberRemoved, channel: channel, app: connection.app, payload: PresenceMember(userID: departed), excluding: connection.socketID, in: &state)
        }
    }

    /// Most members a presence channel's `subscription_succeeded` lists from the cluster.
    static let maxClusterPresenceMembers = 10_000

    func broadcastInternal(_ name: ProtocolEventName, channel: String, app: RealtimeApp, payload: PresenceMember, excluding: String?, in state: inout State) {
        guard let record = state.channels[app.id]?[channel] else { return }
        for socketID in record.subscribers where socketID != excluding {
            guard let target = state.connections[socketID] else { continue }
            state.send(Self.message(target.namespace.internalEvent(name), channel: channel, payload: payload), to: target)
        }
    }

    // MARK: - Client events and signin

    private func clientEvent(_ message: RealtimeMessage, from connection: Connection, at instant: ContinuousClock.Instant, in state: inout State) -> Outcome {
        guard let channel = message.channel, connection.channels.contains(channel) else {
            return rejection(connection, "client events need a subscribed channel", code: .unauthorized, in: &state)
        }
        let kind = ChannelKind(channelName: channel)
        guard kind != .public else {
            return rejection(connection, "client events are only allowed on private and presence channels", code: .clientEventRejected, in: &state)
        }
        guard kind.allowsClientEvents else {
            return rejection(connection, "client events are not allowed on encrypted channels", code: .clientEventRejected, in: &state)
        }
        if case .close(let code, let reason) = countClientEvent(connection, at: instant, in: &state) { return .close(code, reason) }
        let userID = connection.presenceUser[channel]
        let event = ChannelFanoutEvent(app: connection.app.id, channel: channel, event: message.event, data: message.data, userID: userID, excluding: connection.socketID)
        _ = deliverChannel(event, in: &state)
        state.webhook(connection.app, .init(name: "client_event", channel: channel, userID: userID ?? connection.userID, event: message.event, data: message.data, socketID: connection.socketID))
        return configurationStorage.fanout == nil ? .handled : .fanOut(event)
    }

    /// Counts one client-sent event (channel client event or room send) in the connection's
    /// one-second window; past `clientEventsPerSecond` the connection is closed with 4301.
    func countClientEvent(_ connection: Connection, at instant: ContinuousClock.Instant, in state: inout State) -> Outcome {
        guard state.connections[connection.socketID]?.budget.clientEvent(at: instant, limits: limits) ?? true else {
            return .close(.clientEventRejected, "Client event rate limit exceeded")
        }
        return .handled
    }

    private func signin(_ request: SigninRequest, connection: Connection, in state: inout State) -> Outcome {
        let signer = ChannelAuthorization(key: connection.app.key, secret: connection.app.secret)
        let signed = ChannelAuthorization.signinString(socketID: connection.socketID, userData: request.userData)
        guard signer.verify(request.auth, signs: signed),
              let user = try? RealtimeMessage(event: "", data: request.userData).decodeData([String: JSONValue].self),
              let id = user["id"]?.string ?? user["id"]?.number.map(PresenceMember.idText) else {
            state.send(Self.message(connection.namespace.event(.error), payload: ErrorPayload(message: "invalid signin", code: Int(RealtimeCloseCode.unauthorized.rawValue))), to: connection)
            return countFailure(connection, in: &state)
        }
        state.connections[connection.socketID]?.userID = id
        state.send(RealtimeMessage(event: connection.namespace.event(.signinSuccess), data: try? RealtimeMessage.jsonText(["user_data": request.userData])).text, to: connection)
        return .handled
    }
}
