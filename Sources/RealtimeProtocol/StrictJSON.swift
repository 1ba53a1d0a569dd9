/// A strict check of JSON text against RFC 8259's grammar, for data the server keeps and
/// relays as the text it received (room events): Foundation's parsers accept more (trailing
/// commas, a byte-order mark), and such text would break a strict parser in every member.
///
/// Bounded: nesting deeper than `maxDepth` is refused; the work is linear in the text.
///
/// `parse` reads such text into a `JSONValue` with the same grammar: the client reads every
/// room event with it (several times cheaper than `JSONDecoder` into `JSONValue`, whose
/// decoding tries each type in turn and throws for each miss).
public enum StrictJSON {
    /// Deepest nesting of arrays and objects accepted.
    public static let maxDepth = 64

    /// Whether `text` is exactly one JSON value (RFC 8259 §2), with optional whitespace around it.
    public static func isValid(_ text: String) -> Bool {
        var copy = text
        return copy.withUTF8 { bytes in
            var parser = Parser(bytes: bytes)
            parser.skipWhitespace()
            guard parser.value(depth: 0) else { return false }
            parser.skipWhitespace()
            return parser.index == bytes.count
        }
    }

    /// The value of `text` if it is exactly one JSON value by RFC 8259's grammar (as `isValid`),
    /// else `nil`. Numbers become `Double` (RFC 8259 §6: beyond 2^53 precision is lost);
    /// strings are unescaped, `\u` surrogate pairs joined and a lone surrogate replaced with
    /// U+FFFD; a repeated key keeps its last value.
    public static func parse(_ text: String) -> JSONValue? {
        var copy = text
        return copy.withUTF8 { bytes in
            var builder = Builder(parser: Parser(bytes: bytes))
            builder.parser.skipWhitespace()
            guard let value = builder.value(depth: 0) else { return nil }
            builder.parser.skipWhitespace()
            return builder.parser.index == bytes.count ? value : nil
        }
    }

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
            let parsed = builder.members { builder, key in
                switch key {
                case "event":
                    guard builder.parser.current == UInt8(ascii: "\""), let value = builder.string() else { return false }
                    event = value
                case "data":
                    let start = builder.parser.index
                    guard builder.parser.value(depth: 1) else { return false }
                    data = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<builder.parser.index]), as: UTF8.self)
                case "meta":
                    if builder.parser.current == UInt8(ascii: "n") { return builder.parser.literal("null") }
                    var fields = RoomEventFields.Meta(id: 0, at: 0, from: nil, replayed: false)
                    var sawAt = false
                    let read = builder.members { builder, key in
                        switch key {
                        case "id":
                            guard let id = builder.wholeNumber(), id >= 1 else { return false }
                            fields.id = UInt64(id)
                        case "at":
                            guard let at = builder.wholeNumber() else { return false }
                            fields.at = at
                            sawAt = true
                        case "from":
                            if builder.parser.current == UInt8(ascii: "n") { return builder.parser.literal("null") }
                            guard builder.parser.current == UInt8(ascii: "\""), let from = builder.string() else { return false }
                            fields.from = from
                        case "replayed":
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

    /// Builds values on the grammar of `Parser`.
    private struct Builder {
        var parser: Parser

        /// Walks an object at the parser (whitespace allowed around it when it is the whole
        /// text): `member` reads each value after its key and returns whether it was valid.
        mutating func members(_ member: (inout Builder, String) -> Bool) -> Bool {
            let topLevel = parser.index == 0
            parser.skipWhitespace()
            guard parser.current == UInt8(ascii: "{") else { return false }
            parser.index += 1
            parser.skipWhitespace()
            if parser.current == UInt8(ascii: "}") {
                parser.index += 1
            } else {
                while true {
                    guard parser.current == UInt8(ascii: "\""), let key = string() else { return false }
                    parser.skipWhitespace()
                    guard parser.current == UInt8(ascii: ":") else { return false }
                    parser.index += 1
                    parser.skipWhitespace()
                    guard member(&self, key) else { return false }
                    parser.skipWhitespace()
                    if parser.current == UInt8(ascii: "}") {
                        parser.index += 1
                        break
                    }
                    guard parser.current == UInt8(ascii: ",") else { return false }
                    parser.index += 1
                    parser.skipWhitespace()
                }
            }
            guard topLevel else { return true }
            parser.skipWhitespace()
            return parser.index == parser.bytes.count
        }

        /// A whole number of at most 16 digits (exact in a Double and an Int64), or `nil`.
        mutating func wholeNumber() -> Int64? {
            let start = parser.index
            guard parser.current == UInt8(ascii: "-") || parser.current.map({ (0x30...0x39).contains($0) }) == true,
                  parser.number() else { return nil }
            let text = UnsafeBufferPointer(rebasing: parser.bytes[start..<parser.index])
            let negative = text.first == UInt8(ascii: "-")
            let digits = text.dropFirst(negative ? 1 : 0)
            guard digits.count <= 16, digits.allSatisfy({ (0x30...0x39).contains($0) }) else { return nil }
            var value: Int64 = 0
            for byte in digits { value = value * 10 + Int64(byte - 0x30) }
            return negative ? -value : value
        }

        mutating func value(depth: Int) -> JSONValue? {
            switch parser.current {
            case UInt8(ascii: "{")?: return object(depth: depth)
            case UInt8(ascii: "[")?: return array(depth: depth)
            case UInt8(ascii: "\"")?: return string().map(JSONValue.string)
            case UInt8(ascii: "t")?: return parser.literal("true") ? .bool(true) : nil
            case UInt8(ascii: "f")?: return parser.literal("false") ? .bool(false) : nil
            case UInt8(ascii: "n")?: return parser.literal("null") ? .null : nil
            case let byte? where byte == UInt8(ascii: "-") || (0x30...0x39).contains(byte): return number()
            default: return nil
            }
        }

        mutating func object(depth: Int) -> JSONValue? {
            guard depth < StrictJSON.maxDepth else { return nil }
            parser.index += 1
            parser.skipWhitespace()
            var members: [String: JSONValue] = [:]
            if parser.current == UInt8(ascii: "}") {
                parser.index += 1
                return .object(members)
            }
            while true {
                guard parser.current == UInt8(ascii: "\""), let key = string() else { return nil }
                parser.skipWhitespace()
                guard parser.current == UInt8(ascii: ":") else { return nil }
                parser.index += 1
                parser.skipWhitespace()
                guard let member = value(depth: depth + 1) else { return nil }
                members[key] = member
                parser.skipWhitespace()
                if parser.current == UInt8(ascii: "}") {
                    parser.index += 1
                    return .object(members)
                }
                guard parser.current == UInt8(ascii: ",") else { return nil }
                parser.index += 1
                parser.skipWhitespace()
            }
        }

        mutating func array(depth: Int) -> JSONValue? {
            guard depth < StrictJSON.maxDepth else { return nil }
            parser.index += 1
            parser.skipWhitespace()
            var elements: [JSONValue] = []
            if parser.current == UInt8(ascii: "]") {
                parser.index += 1
                return .array(elements)
            }
            while true {
                guard let element = value(depth: depth + 1) else { return nil }
                elements.append(element)
                parser.skipWhitespace()
                if parser.current == UInt8(ascii: "]") {
                    parser.index += 1
                    return .array(elements)
                }
                guard parser.current == UInt8(ascii: ",") else { return nil }
                parser.index += 1
                parser.skipWhitespace()
            }
        }

        /// A string at the opening quote, unescaped; `nil` when it breaks the grammar.
        mutating func string() -> String? {
            let start = parser.index + 1
            guard parser.string() else { return nil }
            let body = UnsafeBufferPointer(rebasing: parser.bytes[start..<(parser.index - 1)])
            // The common case: no escape, already valid UTF-8 (the text came from a String).
            guard body.contains(UInt8(ascii: "\\")) else { return String(decoding: body, as: UTF8.self) }
            var scalars = String.UnicodeScalarView()
            var bytes: [UInt8] = []
            var index = 0
            func flush() {
                if !bytes.isEmpty { scalars.append(contentsOf: String(decoding: bytes, as: UTF8.self).unicodeScalars) }
                bytes.removeAll(keepingCapacity: true)
            }
            func hex(at offset: Int) -> UInt32? {
                guard offset + 4 <= body.count else { return nil }
                var value: UInt32 = 0
                for byte in body[offset..<(offset + 4)] {
                    let digit: UInt8
                    switch byte {
                    case 0x30...0x39: digit = byte - 0x30
                    case 0x41...0x46: digit = byte - 0x41 + 10
                    case 0x61...0x66: digit = byte - 0x61 + 10
                    default: return nil
                    }
                    value = value << 4 | UInt32(digit)
                }
                return value
            }
            while index < body.count {
                let byte = body[index]
                guard byte == UInt8(ascii: "\\") else {
                    bytes.append(byte)
                    index += 1
                    continue
                }
                flush()
                let escaped = body[index + 1]
                index += 2
                switch escaped {
                case UInt8(ascii: "b"): scalars.append("\u{08}")
                case UInt8(ascii: "f"): scalars.append("\u{0C}")
                case UInt8(ascii: "n"): scalars.append("\n")
                case UInt8(ascii: "r"): scalars.append("\r")
                case UInt8(ascii: "t"): scalars.append("\t")
                case UInt8(ascii: "u"):
                    guard let unit = hex(at: index) else { return nil }
                    index += 4
                    if (0xD800...0xDBFF).contains(unit), index + 6 <= body.count, body[index] == UInt8(ascii: "\\"),
                       body[index + 1] == UInt8(ascii: "u"), let low = hex(at: index + 2), (0xDC00...0xDFFF).contains(low) {
                        index += 6
                        scalars.append(Unicode.Scalar(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)) ?? "\u{FFFD}")
                    } else {
                        scalars.append(Unicode.Scalar(unit) ?? "\u{FFFD}")
                    }
                default: scalars.append(Unicode.Scalar(escaped))
                }
            }
            flush()
            return String(scalars)
        }

        mutating func number() -> JSONValue? {
            let start = parser.index
            guard parser.number() else { return nil }
            let text = UnsafeBufferPointer(rebasing: parser.bytes[start..<parser.index])
            // Integers of up to 15 digits are exact in a Double: no string conversion.
            if text.count <= 16, !text.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
                var value: Int64 = 0
                let negative = text.first == UInt8(ascii: "-")
                for byte in text.dropFirst(negative ? 1 : 0) { value = value * 10 + Int64(byte - 0x30) }
                return .number(Double(negative ? -value : value))
            }
            return Double(String(decoding: text, as: UTF8.self)).map(JSONValue.number)
        }
    }

    private struct Parser {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        var current: UInt8? { index < bytes.count ? bytes[index] : nil }

        mutating func skipWhitespace() {
            while let byte = current, byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D { index += 1 }
        }

        mutating func value(depth: Int) -> Bool {
            switch current {
            case UInt8(ascii: "{")?: return container(depth: depth, close: UInt8(ascii: "}"), keyed: true)
            case UInt8(ascii: "[")?: return container(depth: depth, close: UInt8(ascii: "]"), keyed: false)
            case UInt8(ascii: "\"")?: return string()
            case UInt8(ascii: "t")?: return literal("true")
            case UInt8(ascii: "f")?: return literal("false")
            case UInt8(ascii: "n")?: return literal("null")
            case let byte? where byte == UInt8(ascii: "-") || (0x30...0x39).contains(byte): return number()
            default: return false
            }
        }

        mutating func container(depth: Int, close: UInt8, keyed: Bool) -> Bool {
            guard depth < StrictJSON.maxDepth else { return false }
            index += 1
            skipWhitespace()
            if current == close {
                index += 1
                return true
            }
            while true {
                if keyed {
                    guard current == UInt8(ascii: "\""), string() else { return false }
                    skipWhitespace()
                    guard current == UInt8(ascii: ":") else { return false }
                    index += 1
                    skipWhitespace()
                }
                guard value(depth: depth + 1) else { return false }
                skipWhitespace()
                if current == close {
                    index += 1
                    return true
                }
                guard current == UInt8(ascii: ",") else { return false }
                index += 1
                skipWhitespace()
            }
        }

        mutating func string() -> Bool {
            index += 1
            while let byte = current {
                index += 1
                switch byte {
                case UInt8(ascii: "\""): return true
                case UInt8(ascii: "\\"):
                    guard let escaped = current else { return false }
                    index += 1
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                         UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                        continue
                    case UInt8(ascii: "u"):
                        for _ in 0..<4 {
                            guard let hex = current, isHexDigit(hex) else { return false }
                            index += 1
                        }
                    default:
                        return false
                    }
                case 0x00..<0x20:
                    return false
                default:
                    continue
                }
            }
            return false
        }

        mutating func number() -> Bool {
            if current == UInt8(ascii: "-") { index += 1 }
            guard let first = current, isDigit(first) else { return false }
            index += 1
            if first != UInt8(ascii: "0") { while let byte = current, isDigit(byte) { index += 1 } }
            if current == UInt8(ascii: ".") {
                index += 1
                guard let byte = current, isDigit(byte) else { return false }
                while let byte = current, isDigit(byte) { index += 1 }
            }
            if current == UInt8(ascii: "e") || current == UInt8(ascii: "E") {
                index += 1
                if current == UInt8(ascii: "+") || current == UInt8(ascii: "-") { index += 1 }
                guard let byte = current, isDigit(byte) else { return false }
                while let byte = current, isDigit(byte) { index += 1 }
            }
            return true
        }

        mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
            index += count
            return true
        }

        func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
        func isHexDigit(_ byte: UInt8) -> Bool { isDigit(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte) }
    }
}
