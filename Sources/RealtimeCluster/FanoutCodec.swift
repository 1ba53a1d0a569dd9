import RealtimeProtocol
import RealtimeServer

/// The bytes of a message on the cluster's pub/sub channels: one header line of
/// space-separated fields, then the variable parts back to back, each sized in the header
/// (binary-safe: event data may hold any byte, newlines included).
///
/// - Room event, written by `RedisRoomStore`'s append script:
///   `r <epoch> <id> <at> <event bytes> <data bytes> <from bytes or -1>\n<event><data><from>`
/// - Channel event: `c <origin node> <event bytes> <data bytes or -1> <user bytes or -1>
///   <excluding bytes or -1>\n<event><data><user><excluding>` (its node delivered it already:
///   it skips its own)
/// - Presence change, on a channel's or a room's channel: `p <origin node> <1 joined | 0 left>
///   <user bytes> <info bytes or -1> <excluding bytes or -1>\n<user><info><excluding>`
///   (written by `RedisFanout`'s presence scripts)
/// - Terminate a user's connections, on an app's channel: `t <origin node> <user bytes>\n<user>`
/// - Kick a user from a room, on an app's channel: `k <origin node> <room bytes> <user bytes>
///   <reason bytes or -1>\n<room><user><reason>`
enum FanoutCodec {
    /// Largest message accepted, in bytes: a WebSocket message's 1 MiB (a client event's data
    /// is not capped below it yet), a sender's id, names and the header.
    static let maxMessageSize = 1024 * 1024 + 64 * 1024

    /// Why a message was not understood.
    struct Malformed: Error, CustomStringConvertible {
        let description: String
    }

    static func encode(_ event: ChannelFanoutEvent, origin: String) -> String {
        func size(_ text: String?) -> String { text.map { String($0.utf8.count) } ?? "-1" }
        return "c \(origin) \(event.event.utf8.count) \(size(event.data)) \(size(event.userID)) \(size(event.excluding))\n"
            + event.event + (event.data ?? "") + (event.userID ?? "") + (event.excluding ?? "")
    }

    static func encode(_ change: PresenceFanoutEvent, origin: String) -> String {
        func size(_ text: String?) -> String { text.map { String($0.utf8.count) } ?? "-1" }
        return "p \(origin) \(change.joined ? 1 : 0) \(change.user.utf8.count) \(size(change.info)) \(size(change.excluding))\n"
            + change.user + (change.info ?? "") + (change.excluding ?? "")
    }

    static func encodeKick(room: String, user: String, reason: String?, origin: String) -> String {
        "k \(origin) \(room.utf8.count) \(user.utf8.count) \(reason.map { String($0.utf8.count) } ?? "-1")\n" + room + user + (reason ?? "")
    }

    /// Decodes a message of `topic` (the channel it came on says which room or channel).
    ///
    /// - Returns: the message, and the node a channel event came from (`nil` for a room event).
    static func decode(_ bytes: [UInt8], topic: FanoutTopic) throws(Malformed) -> (message: FanoutMessage, origin: String?) {
        guard bytes.count <= maxMessageSize else { throw Malformed(description: "\(bytes.count) bytes, more than \(maxMessageSize)") }
        guard let newline = bytes.firstIndex(of: 0x0A) else { throw Malformed(description: "no header line") }
        let fields = bytes[..<newline].split(separator: 0x20).map { String(decoding: $0, as: UTF8.self) }
        var offset = newline + 1
        func part(_ length: Int) throws(Malformed) -> String? {
            guard length >= 0 else { return nil }
            guard length <= bytes.count - offset else { throw Malformed(description: "a part longer than the message") }
            defer { offset += length }
            return String(decoding: bytes[offset..<offset + length], as: UTF8.self)
        }
        func lengths(_ texts: ArraySlice<String>) throws(Malformed) -> [Int] {
            var values: [Int] = []
            for text in texts {
                guard let value = Int(text), value >= -1 else { throw Malformed(description: "a bad size \(text.prefix(20))") }
                values.append(value)
            }
            return values
        }
        switch (fields.first, topic) {
        case ("r", .room(let app, let room)):
            guard fields.count == 7, let id = UInt64(fields[2]), let at = Int64(fields[3]) else { throw Malformed(description: "a bad room header") }
            let sizes = try lengths(fields[4...])
            guard sizes[0] >= 0, sizes[1] >= 0, let event = try part(sizes[0]), let data = try part(sizes[1]) else {
                throw Malformed(description: "a room event without name or data")
            }
            let from = try part(sizes[2])
            guard offset == bytes.count else { throw Malformed(description: "bytes after the room event") }
            return (.room(app: app, room: room, epoch: fields[1], record: RoomEventRecord(id: id, at: at, event: event, data: data, from: from)), nil)
        case ("c", .channel(let app, let channel)):
            guard fields.count == 6 else { throw Malformed(description: "a bad channel header") }
            let sizes = try lengths(fields[2...])
            guard sizes[0] >= 0, let event = try part(sizes[0]) else { throw Malformed(description: "a channel event without a name") }
            let data = try part(sizes[1])
            let user = try part(sizes[2])
            let excluding = try part(sizes[3])
            guard offset == bytes.count else { throw Malformed(description: "bytes after the channel event") }
            return (.channel(ChannelFanoutEvent(app: app, channel: channel, event: event, data: data, userID: user, excluding: excluding)), fields[1])
        case ("t", .app(let app)):
            guard fields.count == 3, let size = Int(fields[2]), size >= 0, let user = try part(size), offset == bytes.count else {
                throw Malformed(description: "a bad terminate message")
            }
            return (.terminateUser(app: app, user: user), fields[1])
        case ("k", .app(let app)):
            guard fields.count == 5 else { throw Malformed(description: "a bad kick header") }
            let sizes = try lengths(fields[2...])
            guard sizes[0] >= 0, sizes[1] >= 0, let room = try part(sizes[0]), let user = try part(sizes[1]) else {
                throw Malformed(description: "a kick without room or user")
            }
            let reason = try part(sizes[2])
            guard offset == bytes.count else { throw Malformed(description: "bytes after the kick") }
            return (.kickRoomUser(app: app, room: room, user: user, reason: reason), fields[1])
        case ("p", .channel), ("p", .room):
            guard fields.count == 6, fields[2] == "0" || fields[2] == "1" else { throw Malformed(description: "a bad presence header") }
            let sizes = try lengths(fields[3...])
            guard sizes[0] >= 0, let user = try part(sizes[0]) else { throw Malformed(description: "a presence change without a user") }
            let info = try part(sizes[1])
            let excluding = try part(sizes[2])
            guard offset == bytes.count else { throw Malformed(description: "bytes after the presence change") }
            return (.presence(PresenceFanoutEvent(topic: topic, user: user, info: info, joined: fields[2] == "1", excluding: excluding)), fields[1])
        default:
            throw Malformed(description: "a message of another kind than its channel's")
        }
    }
}
