/// Socket ids in the order they were added, with appending, removing and looking one up in
/// constant time: a channel's subscribers and a room's members (the order of delivery). With
/// an array, each of 10,000 subscribers leaving paid a pass over the others, and each joining
/// a copy of them all.
///
/// A removed id leaves an empty slot, skipped by iteration; the slots are compacted when more
/// than half of them are empty, so the cost stays amortized constant and the memory bounded.
struct SubscriberList: Sequence {
    private var slots: [String?] = []
    private var positions: [String: Int] = [:]

    /// Ids in the list.
    var count: Int { positions.count }
    /// Whether the list holds no id.
    var isEmpty: Bool { positions.isEmpty }

    /// Whether `id` is in the list.
    func contains(_ id: String) -> Bool { positions[id] != nil }

    /// Adds `id` at the end, unless it is in the list already.
    mutating func append(_ id: String) {
        guard positions[id] == nil else { return }
        positions[id] = slots.count
        slots.append(id)
    }

    /// Adds each id at the end in order, as `append` does.
    mutating func append(contentsOf ids: some Sequence<String>) {
        for id in ids { append(id) }
    }

    /// Removes `id`, if it is in the list.
    mutating func remove(_ id: String) {
        guard let position = positions.removeValue(forKey: id) else { return }
        slots[position] = nil
        if slots.count > 16, positions.count * 2 < slots.count { compact() }
    }

    private mutating func compact() {
        let ids = slots.compactMap { $0 }
        slots = ids
        positions = Dictionary(uniqueKeysWithValues: ids.enumerated().map { ($0.element, $0.offset) })
    }

    /// The ids in order.
    struct Iterator: IteratorProtocol {
        fileprivate var base: IndexingIterator<[String?]>

        mutating func next() -> String? {
            while let slot = base.next() {
                if let id = slot { return id }
            }
            return nil
        }
    }

    func makeIterator() -> Iterator { Iterator(base: slots.makeIterator()) }
}
