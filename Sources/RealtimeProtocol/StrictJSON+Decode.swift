import Foundation

extension StrictJSON {
    /// Why peer JSON was refused by `decode(_:from:)`.
    public enum DecodeFailure: Error, Hashable, Sendable, CustomStringConvertible {
        /// Not exactly one JSON value by RFC 8259's grammar, or nested deeper than `maxDepth`.
        case notJSON
        /// An object names this member twice. RFC 8259 §4 leaves what a repeated name means
        /// to each parser, and parsers disagree (Foundation's keeps the first, Python's the
        /// last), so a token or body one peer reads one way could be read another way here:
        /// RFC 7519 §4 tells a JWT parser to reject it, and every peer input is refused alike.
        case duplicateName(String)
        /// JSON, but not the type asked for: which field, and why.
        case mismatch(String)

        /// A human-readable explanation.
        public var description: String {
            switch self {
            case .notJSON: return "not JSON text (RFC 8259), or nested deeper than \(StrictJSON.maxDepth)"
            case .duplicateName(let name): return "the member name \"\(name.prefix(64))\" appears twice in one object"
            case .mismatch(let why): return why
            }
        }
    }

    /// Checks that `bytes` are exactly one JSON value by RFC 8259's grammar, nested at most
    /// `maxDepth` deep, whose objects never name a member twice (names compared after
    /// unescaping, so `"a"` and `"\u0061"` are the same name).
    ///
    /// Linear in the input: this is what makes `decode` safe on a hostile peer's bytes.
    ///
    /// - Parameter bytes: UTF-8 text.
    /// - Returns: `nil` when the text passes, else why not (`.notJSON` or `.duplicateName`).
    public static func refusal(of bytes: UnsafeBufferPointer<UInt8>) -> DecodeFailure? {
        var builder = Builder(parser: Parser(bytes: bytes))
        var duplicate: String?
        builder.parser.skipWhitespace()
        guard builder.valueWithUniqueNames(depth: 0, duplicate: &duplicate) else { return duplicate.map(DecodeFailure.duplicateName) ?? .notJSON }
        builder.parser.skipWhitespace()
        return builder.parser.index == bytes.count ? nil : .notJSON
    }

    /// Decodes a peer's JSON into `T` with `JSONDecoder`, after `refusal(of:)` has passed it:
    /// Foundation's decoding of a nested value costs time in the square of its depth (each
    /// `JSONValue` level tries several types, and each miss builds an error holding the whole
    /// coding path), so a deep value must never reach it, and a repeated name must not be read
    /// as its first occurrence where the sender meant the last.
    ///
    /// - Parameters:
    ///   - type: the type to decode.
    ///   - bytes: the UTF-8 text.
    /// - Returns: the value.
    /// - Throws: `DecodeFailure` (`.notJSON`, `.duplicateName`, or `.mismatch` naming the field).
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws(DecodeFailure) -> T {
        let data = Data(bytes)
        let refused = data.withUnsafeBytes { raw in refusal(of: raw.bindMemory(to: UInt8.self)) }
        if let refused { throw refused }
        do {
            return try JSONDecoder().decode(T.self, from: data)
        } catch let error as DecodingError {
            throw .mismatch("not a valid \(T.self): \(RealtimeMessage.describe(error))")
        } catch {
            throw .mismatch("not a valid \(T.self)")
        }
    }
}

extension StrictJSON.Builder {
    /// Walks one value as `Parser.value` does, and refuses an object that names a member twice
    /// (the name is left in `duplicate`).
    mutating func valueWithUniqueNames(depth: Int, duplicate: inout String?) -> Bool {
        let keyed: Bool
        let close: UInt8
        switch parser.current {
        case UInt8(ascii: "{")?: (keyed, close) = (true, UInt8(ascii: "}"))
        case UInt8(ascii: "[")?: (keyed, close) = (false, UInt8(ascii: "]"))
        default: return parser.value(depth: depth)
        }
        guard depth < StrictJSON.maxDepth else { return false }
        parser.index += 1
        parser.skipWhitespace()
        if parser.current == close {
            parser.index += 1
            return true
        }
        var names = Set<String>()
        while true {
            if keyed {
                guard parser.current == UInt8(ascii: "\""), let name = string() else { return false }
                guard names.insert(name).inserted else {
                    duplicate = name
                    return false
                }
                parser.skipWhitespace()
                guard parser.current == UInt8(ascii: ":") else { return false }
                parser.index += 1
                parser.skipWhitespace()
            }
            guard valueWithUniqueNames(depth: depth + 1, duplicate: &duplicate) else { return false }
            parser.skipWhitespace()
            if parser.current == close {
                parser.index += 1
                return true
            }
            guard parser.current == UInt8(ascii: ",") else { return false }
            parser.index += 1
            parser.skipWhitespace()
        }
    }
}
