/// What a subscriber sends and how it reads what comes back: the commands, plain or sharded,
/// and each reply (a message, a confirmation, a `PONG`, a sharded refusal) turned into events.
extension RedisSubscriber {
    /// Channels per (un)subscribe command: one when sharded.
    var batch: Int { sharded ? 1 : Self.batch }

    /// The (un)subscribe command's name: sharded or not.
    func verb(subscribe: Bool) -> String {
        switch (sharded, subscribe) {
        case (false, true): "SUBSCRIBE"
        case (false, false): "UNSUBSCRIBE"
        case (true, true): "SSUBSCRIBE"
        case (true, false): "SUNSUBSCRIBE"
        }
    }

    /// The sharded (un)subscriptions sent and not yet answered, oldest first.
    struct Awaiting {
        private var entries: [(subscribe: Bool, channel: String)] = []
        private var head = 0

        mutating func append(contentsOf more: [(subscribe: Bool, channel: String)]) { entries += more }

        /// The oldest, taken out.
        mutating func next() -> (subscribe: Bool, channel: String)? {
            guard head < entries.count else { return nil }
            defer {
                head += 1
                if head > 1024, head * 2 > entries.count {
                    entries.removeFirst(head)
                    head = 0
                }
            }
            return entries[head]
        }

        /// Whether the oldest is `channel`'s (un)subscription.
        func isNext(subscribe: Bool, _ channel: String) -> Bool {
            head < entries.count && entries[head].subscribe == subscribe && entries[head].channel == channel
        }
    }

    /// Handles one reply; false when it is not a pub/sub reply.
    func handle(_ value: RedisValue, ready: inout Bool, awaiting: inout Awaiting) -> Bool {
        // Out of subscribed mode (no channel in the set) PING answers as a plain command.
        switch value {
        case .status("PONG"): return true
        case .error(let message) where sharded:
            // The answer to the oldest (un)subscription: that channel's refusal, not the
            // connection's failure. `MOVED <slot> <host:port>`: not served here.
            guard let refused = awaiting.next() else { return false }
            // An unsubscription refused (its slot not served here) leaves nothing to follow.
            guard refused.subscribe else { return true }
            if message.hasPrefix("MOVED "),
               let slot = message.split(separator: " ").dropFirst().first.flatMap({ Int($0) }), (0..<RedisClusterSlot.count).contains(slot) {
                handler(.slotMoved(slot))
            } else {
                handler(.refused(channel: refused.channel, message: message))
            }
            return true
        case .bulk(let bytes) where bytes == Array("ready".utf8):
            if !ready {
                ready = true
                handler(.ready)
            }
            return true
        default: break
        }
        guard let parts = value.array, let kind = parts.first?.string else { return false }
        switch kind {
        case "message" where parts.count == 3 && !sharded, "smessage" where parts.count == 3 && sharded:
            guard let channel = parts[1].string, case .bulk(let payload) = parts[2] else { return false }
            handler(.message(channel: channel, payload: payload))
        case "subscribe" where parts.count == 3 && !sharded, "ssubscribe" where parts.count == 3 && sharded:
            if sharded, let channel = parts[1].string, awaiting.isNext(subscribe: true, channel) { _ = awaiting.next() }
            // Confirmations of the initial set are summed up by `.ready`.
            if ready, let channel = parts[1].string, channels.contains(channel) { handler(.subscribed(channel)) }
        case "unsubscribe" where !sharded:
            break
        case "sunsubscribe" where sharded:
            guard parts.count >= 2, let channel = parts[1].string else { break }
            // Ours, answered; else unasked for: the server dropped the channel's slot.
            if awaiting.isNext(subscribe: false, channel) {
                _ = awaiting.next()
            } else if channels.contains(channel) {
                handler(.slotMoved(RedisClusterSlot.of(channel)))
            }
        case "pong" where parts.count == 2:
            if !ready, parts[1].string == "ready" {
                ready = true
                handler(.ready)
            }
        default:
            return false
        }
        return true
    }
}
