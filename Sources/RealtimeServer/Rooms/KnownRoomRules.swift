/// The rules the hub remembers for one app's rooms after their last member left (learned from
/// tokens and publishes), at most `limit`, the oldest remembered forgotten first.
///
/// Every operation is amortised constant time: a new room is appended to an insertion order
/// read from a head index. Evicting "the first key" of a dictionary instead scanned the
/// emptied front of its table and lengthened its probe chains, so at the bound every room
/// created cost a scan: anonymous members creating rooms at 100,000 held the hub's lock long
/// enough to delay a good client's ping by 100–250 ms.
struct KnownRoomRules {
    /// Most rooms remembered.
    let limit: Int
    private var records: [String: RoomRuleRecord] = [:]
    /// Rooms in the order they were first remembered, `order[head...]` live.
    private var order: [String] = []
    private var head = 0

    init(limit: Int) { self.limit = limit }

    /// Rooms remembered.
    var count: Int { records.count }

    /// The rule remembered for `room`, or `nil`.
    subscript(room: String) -> RoomRuleRecord? { records[room] }

    /// Remembers `record` for `room`; a room not remembered yet takes the place of the oldest
    /// one at the bound.
    mutating func remember(_ record: RoomRuleRecord, for room: String) {
        if records.updateValue(record, forKey: room) != nil { return }
        order.append(room)
        while records.count > limit, head < order.count {
            records[order[head]] = nil
            head += 1
        }
        if head > 1024, head * 2 > order.count {
            order.removeFirst(head)
            head = 0
        }
    }
}
