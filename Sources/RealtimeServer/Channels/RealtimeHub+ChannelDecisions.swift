import RealtimeProtocol

/// A channel's presence on its own values (Pusher Channels protocol 7, presence channels):
/// members are users, each with the sockets it subscribed from; `member_added` is told when a
/// user's first socket arrives and `member_removed` when its last one leaves, never per
/// socket.
extension RealtimeHub.Channel {
    /// Adds a socket of a presence user.
    ///
    /// - Returns: whether the user is new to the channel (its arrival is to be told); a user
    ///   already present keeps the `user_info` it arrived with.
    mutating func addMember(_ user: String, info: JSONValue?, socket: String) -> Bool {
        if var existing = members[user] {
            existing.sockets.insert(socket)
            members[user] = existing
            return false
        }
        members[user] = RealtimeHub.Member(info: info, sockets: [socket])
        return true
    }

    /// Removes a socket of a presence user.
    ///
    /// - Returns: whether that was the user's last socket (its departure is to be told).
    mutating func removeMember(_ user: String, socket: String) -> Bool {
        guard var member = members[user] else { return false }
        member.sockets.remove(socket)
        guard member.sockets.isEmpty else {
            members[user] = member
            return false
        }
        members[user] = nil
        return true
    }
}
