/// Handlers by event name and for every event, in the order they were added, each under an id
/// that removes it: what a channel's bindings and a room's listeners are kept in (behind their
/// owner's lock). Delivery copies the two lists out (a retain, thanks to copy-on-write), so
/// handlers run outside the lock and may add or remove handlers.
struct HandlerTable<Handler> {
    private var lastID: UInt64 = 0
    private var byEvent: [String: [(id: UInt64, handler: Handler)]] = [:]
    private var all: [(id: UInt64, handler: Handler)] = []

    /// Adds a handler for `event`, or for every event when `nil`.
    ///
    /// - Returns: its id, for `remove`.
    mutating func add(_ handler: Handler, for event: String?) -> UInt64 {
        lastID += 1
        if let event { byEvent[event, default: []].append((lastID, handler)) } else { all.append((lastID, handler)) }
        return lastID
    }

    /// Removes the handler with `id`, wherever it is; nothing if it is gone already (a scan of
    /// the event names in use: a few per channel or room).
    mutating func remove(_ id: UInt64) {
        if let index = all.firstIndex(where: { $0.id == id }) {
            all.remove(at: index)
            return
        }
        for (name, entries) in byEvent where entries.contains(where: { $0.id == id }) {
            byEvent[name] = entries.count == 1 ? nil : entries.filter { $0.id != id }
            return
        }
    }

    /// The handlers for `event`, then those for every event, in the order they were added.
    func handlers(for event: String) -> (named: [(id: UInt64, handler: Handler)], all: [(id: UInt64, handler: Handler)]) {
        (byEvent[event] ?? [], all)
    }

    /// How many handlers there are.
    var count: Int { byEvent.values.reduce(all.count) { $0 + $1.count } }
}
