import RealtimeProtocol

/// Channels on the connection: the `RealtimeChannel` objects and their commands into the machine.
extension RealtimeConnection {
    func channel(named name: String) -> RealtimeChannel {
        let now = scheduler.now
        return run { state in
            if let existing = state.channelObjects[name] { return (existing, []) }
            let channel = makeChannel(name)
            state.channelObjects[name] = channel
            return (channel, state.machine.subscribe(name, now: now))
        }
    }

    func existingChannel(named name: String) -> RealtimeChannel? { state.withLock { $0.channelObjects[name] } }

    var channelNames: [String] { state.withLock { $0.machine.channels.order } }

    func unsubscribe(_ name: String) {
        run { state in
            state.channelObjects[name] = nil
            return ((), state.machine.unsubscribe(name))
        }
    }

    /// What the current connection knows of a channel (for `RealtimeChannel`'s reads).
    func record(of name: String) -> ChannelTable.Record? { state.withLock { $0.machine.channels[name] } }

    private func makeChannel(_ name: String) -> RealtimeChannel {
        let parts = RealtimeChannel.Parts(
            outbox: outbox,
            record: { [weak self] name in self?.record(of: name) },
            onUnsubscribe: { [weak self] name in self?.unsubscribe(name) },
            onTrigger: { [weak self] channel, event, data in self?.trigger(event, data: data, on: channel) ?? false })
        return RealtimeChannel.Kind(channelName: name) == .presence
            ? PresenceChannel(name: name, namespace: options.namespace, parts: parts)
            : RealtimeChannel(name: name, namespace: options.namespace, parts: parts)
    }

    /// Sends a client event (the channel checked the name and kind).
    private func trigger(_ event: String, data: String, on channel: String) -> Bool {
        run { $0.trigger(event, data: data, on: channel) }
    }
}
