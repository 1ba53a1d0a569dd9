import RealtimeProtocol

/// A presence channel opening on a cluster node: its first subscribers' confirmation
/// lists every node's members, read from the bus's registry on the lane, never under the hub's
/// lock nor on the WebSocket service thread. The presence changes the bus brings during the
/// read are kept and applied to the list read, in order: each user ends as its last change left
/// it, whether the read saw that change or not.
extension RealtimeHub {
    /// Most presence changes kept for one channel while its members are read; past it the view
    /// is read once more after.
    static let maxViewChanges = 10_000

    /// Keeps a presence change of a channel whose members are being read (nothing to do for a
    /// channel without a read on its way: it has no view, so no member was told of anything).
    func keepViewChange(_ change: PresenceFanoutEvent, channel name: String, app: String, in state: inout State) {
        guard let kept = state.channels[app]?[name]?.viewChanges else { return }
        guard kept.count < Self.maxViewChanges else {
            state.channels[app]?[name]?.viewChangesOverflowed = true
            return
        }
        state.channels[app]?[name]?.viewChanges?.append(change)
    }

    /// Reads the cluster's members of a presence channel (on the lane, no lock held; or not,
    /// when the lane was full: then this node's members stand in, as when Redis cannot say),
    /// makes them the channel's view with the changes kept meanwhile, and confirms every
    /// subscription that waited for it. A confirmation past its subscriber's byte budget
    /// closes it with 4301, as a direct one does.
    func openPresenceView(app: RealtimeApp, channel name: String, read: Bool) {
        let topic = FanoutTopic.channel(app: app.id, channel: name)
        let members = read ? clusterMembers(topic, limit: Self.maxClusterPresenceMembers) : nil
        let (overBudget, readAgain) = withState { presenceViewRead(app: app, channel: name, members: members, in: &$0) }
        // This node's members stood in: the cluster's are read at the next sweeps until one read succeeds.
        if members == nil, configurationStorage.fanout != nil { presenceViewsToRead.withLock { _ = $0.insert(topic) } }
        for socketID in overBudget { apply(.close(.clientEventRejected, "Rate limit exceeded"), socketID: socketID) }
        // Read once more on the lane (the caller may be the service thread, the lane full).
        if readAgain, !submitPresenceWork(on: topic, { [self] in refreshPresence([topic]) }) {
            presenceViewsToRead.withLock { _ = $0.insert(topic) }
            log("\(topic) not read again now: the room lane is full (left to the next sweeps)")
        }
    }

    /// The cluster's members of a presence channel were read (`nil`: not read, or Redis could
    /// not say; this node's members stand in), under the lock: they become the channel's view
    /// with the changes kept meanwhile applied, and every subscription that waited for it is
    /// confirmed.
    ///
    /// - Returns: the subscribers whose confirmation went past their byte budget (closed with
    ///   4301 by the caller), and whether more changes came during the read than were kept
    ///   (the view is read once more).
    func presenceViewRead(app: RealtimeApp, channel name: String, members: [(user: String, info: JSONValue?)]?,
                          in state: inout State) -> (overBudget: [String], readAgain: Bool) {
        guard var record = state.channels[app.id]?[name], record.clusterView == nil else { return ([], false) }
        var view = members.map { Dictionary($0.map { ($0.user, $0.info) }, uniquingKeysWith: { first, _ in first }) } ?? record.members.mapValues(\.info)
        for change in record.viewChanges ?? [] {
            _ = Self.apply(change, info: change.info.flatMap(StrictJSON.parse), to: &view)
        }
        let readAgain = record.viewChangesOverflowed
        record.clusterView = view
        record.viewChanges = nil
        record.viewChangesOverflowed = false
        let waiting = record.awaitingView
        record.subscribers.append(contentsOf: waiting)
        record.awaitingView = []
        state.channels[app.id]?[name] = record
        var overBudget: [String] = []
        for socketID in waiting {
            guard let connection = state.connections[socketID] else { continue }
            let own = connection.presenceUser[name].map { PresenceMember(userID: $0, userInfo: record.members[$0]?.info ?? nil) }
            let confirmation = subscriptionSucceeded(name, app: app, namespace: connection.namespace, own: own, in: state)
            state.send(confirmation, to: connection)
            if !charge(confirmation.utf8.count, to: socketID, in: &state) { overBudget.append(socketID) }
        }
        return (overBudget, readAgain)
    }
}
