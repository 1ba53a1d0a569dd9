extension StrictJSON {
    /// Builds values on the grammar of `Parser`.
    struct Builder {
        var parser: Parser

        /// Walks an object at the parser (whitespace allowed around it when it is the whole
        /// text): `member` reads each value after its key, handed over as its UTF-8 bytes (the
        /// key's own bytes when it has no escape, else its decoded text, so that known names
        /// are compared without building a string), and returns whether it was valid.
        mutating func rawKeyMembers(_ member: (inout Builder, UnsafeBufferPointer<UInt8>) -> Bool) -> Bool {
            let topLevel = parser.index == 0
            parser.skipWhitespace()
            guard parser.current == UInt8(ascii: "{") else { return false }
            parser.index += 1
            parser.skipWhitespace()
            if parser.current == UInt8(ascii: "}") {
                parser.index += 1
            } else {
                while true {
                    guard parser.current == UInt8(ascii: "\"") else { return false }
                    let start = parser.index
                    guard parser.string() else { return false }
                    let body = UnsafeBufferPointer(rebasing: parser.bytes[(start + 1)..<(parser.index - 1)])
                    var decoded: String?
                    if body.contains(UInt8(ascii: "\\")) {
                        parser.index = start
                        guard let key = string() else { return false }
                        decoded = key
                    }
                    parser.skipWhitespace()
                    guard parser.current == UInt8(ascii: ":") else { return false }
                    parser.index += 1
                    parser.skipWhitespace()
                    if var decoded {
                        guard decoded.withUTF8({ member(&self, $0) }) else { return false }
                    } else {
                        guard member(&self, body) else { return false }
                    }
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
            if parser.current == UInt8(ascii: "}") {
                parser.index += 1
                return .object([:])
            }
            // Room for 6 members at once: a small payload's object grows no table on the way.
            var members = [String: JSONValue](minimumCapacity: 6)
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
            if let exact = Self.exactDouble(text) { return .number(exact) }
            return Double(String(decoding: text, as: UTF8.self)).map(JSONValue.number)
        }

        /// Powers of ten a `Double` holds exactly (10^0 … 10^22).
        private static let exactPowersOfTen: [Double] = (0...22).map { power in (0..<power).reduce(1.0) { value, _ in value * 10 } }

        /// The value of a number without an exponent and of at most 15 digits (integer and
        /// fraction together, leading zeros counted): its digits as a whole number and the power
        /// of ten it is divided by are then both exact in a `Double`, so one IEEE division,
        /// correctly rounded, is the nearest `Double`, as `strtod` would give (Clinger's fast
        /// path, "How to read floating point numbers accurately", 1990). `nil` otherwise, for
        /// `strtod` to read.
        static func exactDouble(_ text: UnsafeBufferPointer<UInt8>) -> Double? {
            guard text.count <= 24 else { return nil }
            var mantissa: Int64 = 0
            var digits = 0
            var fraction = -1
            var negative = false
            for byte in text {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"):
                    digits += 1
                    guard digits <= 15 else { return nil }
                    mantissa = mantissa * 10 + Int64(byte - 0x30)
                    if fraction >= 0 { fraction += 1 }
                case UInt8(ascii: "."): fraction = 0
                case UInt8(ascii: "-"): negative = true
                default: return nil
                }
            }
            let magnitude = Double(mantissa) / exactPowersOfTen[max(fraction, 0)]
            // -0 stays -0, as strtod reads "-0" and "-0.0".
            return negative ? -magnitude : magnitude
        }
    }
}
