import RealtimeProtocol

/// Builds JSON text by hand, so that keys keep the order they are written in (an output line
/// reads `time`, `kind`, … left to right) and every string is escaped the same way.
enum JSONText {
    /// `value` as a JSON string literal, quotes included.
    ///
    /// `"` and `\` are escaped, and so is every control character (Unicode category Cc: C0,
    /// DEL and C1), as the short escapes of RFC 8259 §7 where they exist and `\u00XX`
    /// otherwise, so server data can never put a raw control character on the terminal.
    /// U+2028 and U+2029 are escaped too: JavaScript consumers treat them as line ends.
    ///
    /// - Parameter value: any string.
    /// - Returns: the literal, for example `"a\"b\n"`.
    static func quoted(_ value: String) -> String {
        var text = "\""
        text.reserveCapacity(value.utf8.count + 2)
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": text += "\\\""
            case "\\": text += "\\\\"
            case "\n": text += "\\n"
            case "\r": text += "\\r"
            case "\t": text += "\\t"
            case "\u{08}": text += "\\b"
            case "\u{0C}": text += "\\f"
            case "\u{2028}", "\u{2029}":
                text += "\\u" + hex4(scalar.value)
            case _ where scalar.properties.generalCategory == .control:
                text += "\\u" + hex4(scalar.value)
            default:
                text.unicodeScalars.append(scalar)
            }
        }
        return text + "\""
    }

    /// A JSON array of strings.
    ///
    /// - Parameter values: the strings, in order.
    /// - Returns: for example `["a","b"]`.
    static func array(_ values: [String]) -> String {
        "[" + values.map(quoted).joined(separator: ",") + "]"
    }

    /// A JSON object from members whose values are already JSON text, in the given order.
    ///
    /// - Parameter members: key and JSON value text (`quoted(…)`, a number, an array).
    /// - Returns: for example `{"kind":"state","code":4201}`.
    static func object(_ members: [(key: String, value: String)]) -> String {
        "{" + members.map { quoted($0.key) + ":" + $0.value }.joined(separator: ",") + "}"
    }

    /// Any JSON value as JSON text, keys sorted, every string escaped as `quoted` does (so a
    /// room event's data can be embedded in a line with no raw control character). Integers
    /// within a double's exact range print without a fraction; other numbers as Swift prints a
    /// `Double` (the shortest text that reads back the same).
    ///
    /// - Parameter value: the value.
    /// - Returns: for example `{"n":1,"s":"a"}`.
    static func value(_ value: JSONValue) -> String {
        switch value {
        case .null: return "null"
        case .bool(let bool): return bool ? "true" : "false"
        case .number(let number):
            if number == number.rounded(), abs(number) < 9_007_199_254_740_992 { return String(Int64(number)) }
            return number.isFinite ? "\(number)" : "null"
        case .string(let string): return quoted(string)
        case .array(let elements): return "[" + elements.map(Self.value).joined(separator: ",") + "]"
        case .object(let members):
            return object(members.sorted { $0.key < $1.key }.map { ($0.key, Self.value($0.value)) })
        }
    }

    /// Four lower-case hex digits (every value passed is below U+10000).
    private static func hex4(_ value: UInt32) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits
    }
}
