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

    /// The grammar of RFC 8259, walked over UTF-8 bytes: what `isValid` checks and `Builder`
    /// builds on.
    struct Parser {
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
