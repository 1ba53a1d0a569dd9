import RealtimeProtocol

/// A presence channel's members, each once, in the order the server listed or added them.
/// Adding, replacing and removing one member cost O(1) (a dictionary and an insertion
/// sequence); the ordered list is built when read.
struct PresenceMembers: Hashable, Sendable {
    private var byID: [String: (sequence: UInt64, member: PresenceMember)] = [:]
    private var nextSequence: UInt64 = 0

    static func == (lhs: PresenceMembers, rhs: PresenceMembers) -> Bool { lhs.list == rhs.list }
    func hash(into hasher: inout Hasher) { hasher.combine(list) }

    /// The members from a `subscription_succeeded` list, duplicates dropped.
    init(_ members: [PresenceMember] = []) {
        for member in members where byID[member.userID] == nil { _ = add(member) }
    }

    /// Adds a member, or replaces the info of one already listed.
    ///
    /// - Returns: whether the member was new.
    mutating func add(_ member: PresenceMember) -> Bool {
        if let existing = byID[member.userID] {
            byID[member.userID] = (existing.sequence, member)
            return false
        }
        nextSequence += 1
        byID[member.userID] = (nextSequence, member)
        return true
    }

    /// Removes a member; returns whether it was listed.
    mutating func remove(_ userID: String) -> Bool { byID.removeValue(forKey: userID) != nil }

    /// The members in order.
    var list: [PresenceMember] { byID.values.sorted { $0.sequence < $1.sequence }.map(\.member) }

    var count: Int { byID.count }
}
