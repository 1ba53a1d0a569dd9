extension StrictJSON {
    /// The fields of a `room_event` frame's data, read in one pass with no dictionary built
    /// (the client's per-event path; docs/rooms-protocol.md "Server to client").
    public struct RoomEventFields: Sendable, Hashable {
        /// `event`.
        public var event: String
        /// `data`'s JSON text as sent (checked against the grammar), `null` when absent.
        public var data: String
        /// `meta`, when present and not null: a kept event.
        public var meta: Meta?

        /// A kept event's meta.
        public struct Meta: Sendable, Hashable {
            /// `id`: a whole number, 1 or more.
            public var id: UInt64
            /// `at`: milliseconds since 1970.
            public var at: Int64
            /// `from`: a string, or `nil` for null or absent.
            public var from: String?
            /// `replayed`: `true` only when present and true.
            public var replayed: Bool
        }
    }

    /// Reads `{"event", "data", "meta"?}` (any member order, other members checked and skipped).
    /// `nil` when the text is not exactly one JSON object by RFC 8259's grammar, `event` is not a
    /// string, or `meta` is neither null nor an object whose `id` is a whole number of at most
    /// 16 digits and at least 1, `at` such a number, `from` a string or null and `replayed` a
    /// Boolean.
    public static func roomEvent(_ text: String) -> RoomEventFields? {
        var copy = text
        return copy.withUTF8 { bytes in
            var builder = Builder(parser: Parser(bytes: bytes))
            var event: String?
            var data: String?
            var meta: RoomEventFields.Meta?
            let parsed = builder.rawKeyMembers { builder, key in
                switch true {
                case key.equals("event"):
                    guard builder.parser.current == UInt8(ascii: "\""), let value = builder.string() else { return false }
                    event = value
                case key.equals("data"):
                    let start = builder.parser.index
                    guard builder.parser.value(depth: 1) else { return false }
                    data = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<builder.parser.index]), as: UTF8.self)
                case key.equals("meta"):
                    if builder.parser.current == UInt8(ascii: "n") { return builder.parser.literal("null") }
                    var fields = RoomEventFields.Meta(id: 0, at: 0, from: nil, replayed: false)
                    var sawAt = false
                    let read = builder.rawKeyMembers { builder, key in
                        switch true {
                        case key.equals("id"):
                            guard let id = builder.wholeNumber(), id >= 1 else { return false }
                            fields.id = UInt64(id)
                        case key.equals("at"):
                            guard let at = builder.wholeNumber() else { return false }
                            fields.at = at
                            sawAt = true
                        case key.equals("from"):
                            if builder.parser.current == UInt8(ascii: "n") { return builder.parser.literal("null") }
                            guard builder.parser.current == UInt8(ascii: "\""), let from = builder.string() else { return false }
                            fields.from = from
                        case key.equals("replayed"):
                            if builder.parser.literal("true") { fields.replayed = true } else { return builder.parser.literal("false") }
                        default:
                            return builder.parser.value(depth: 2)
                        }
                        return true
                    }
                    guard read, fields.id >= 1, sawAt else { return false }
                    meta = fields
                default:
                    return builder.parser.value(depth: 1)
                }
                return true
            }
            guard parsed, let event else { return nil }
            return RoomEventFields(event: event, data: data ?? "null", meta: meta)
        }
    }
}
