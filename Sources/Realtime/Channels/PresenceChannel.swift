import Reachability
import RealtimeProtocol

/// A `presence-` channel: what `BirdRealtime.subscribe(_:)` returns for such a name, so the
/// seed's `bird.subscribe("presence-room-1") as? PresenceChannel` holds (realtime-connection-
/// lifecycle seed, "What happens to channels"). Its `members` are replaced by the server's list
/// at every (re)subscription; member events tell of each user who joins or leaves once.
public final class PresenceChannel: RealtimeChannel, @unchecked Sendable {
    /// Calls `handler` on the delivery queue with each member who joins (`member_added`), once
    /// per user: a repeated add changes nothing and is not told.
    ///
    /// - Returns: a token whose `cancel()` removes the handler.
    @discardableResult
    public func onMemberAdded(_ handler: @escaping @Sendable (PresenceMember) -> Void) -> ObservationToken {
        bind(.memberAdded) { data in
            if let member = data.flatMap({ try? RealtimeMessage(event: "", data: $0).decodeData(PresenceMember.self) }) { handler(member) }
        }
    }

    /// Calls `handler` on the delivery queue with the user id of each member who leaves
    /// (`member_removed`) and was listed.
    ///
    /// - Returns: a token whose `cancel()` removes the handler.
    @discardableResult
    public func onMemberRemoved(_ handler: @escaping @Sendable (String) -> Void) -> ObservationToken {
        bind(.memberRemoved) { data in
            if let member = data.flatMap({ try? RealtimeMessage(event: "", data: $0).decodeData(PresenceMember.self) }) { handler(member.userID) }
        }
    }
}
