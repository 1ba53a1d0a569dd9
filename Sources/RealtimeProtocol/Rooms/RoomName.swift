/// Room names and the patterns rules are declared by (rooms seed: `order:{id}`,
/// `chat:{a}:{b}`, `shop`).
///
/// A name is 1…164 characters of `A–Z a–z 0–9 _ - = @ , . ; :` (Pusher's channel alphabet).
/// A pattern is a name in which `{param}` stands for one segment: one or more name characters
/// other than `:`.
public enum RoomName {
    /// Longest room name, in characters (Pusher's channel-name limit).
    public static let maxLength = 164

    /// Whether `name` is a valid room name.
    public static func isValid(_ name: String) -> Bool {
        !name.isEmpty && name.utf8.count <= maxLength && name.utf8.allSatisfy(isNameByte)
    }

    /// Matches a room name against a pattern.
    ///
    /// - Parameters:
    ///   - name: a room name (`order:1042`).
    ///   - pattern: a pattern (`order:{id}`) or a plain name.
    /// - Returns: the parameters (`["id": "1042"]`), or `nil` when the name does not match.
    public static func match(_ name: String, pattern: String) -> [String: String]? {
        guard isValid(name), let parts = parse(pattern) else { return nil }
        var parameters: [String: String] = [:]
        var rest = Substring(name)
        for (index, part) in parts.enumerated() {
            switch part {
            case .literal(let text):
                guard rest.hasPrefix(text) else { return nil }
                rest = rest.dropFirst(text.count)
            case .parameter(let key):
                // A parameter is one segment: up to the next literal's start, never past a ':'.
                let segment = rest.prefix { $0 != ":" }
                var value = segment
                if index + 1 < parts.count, case .literal(let next) = parts[index + 1], let first = next.first, first != ":" {
                    guard let end = segment.firstIndex(of: first) else { return nil }
                    value = segment[..<end]
                }
                guard !value.isEmpty else { return nil }
                parameters[key] = String(value)
                rest = rest.dropFirst(value.count)
            }
        }
        return rest.isEmpty ? parameters : nil
    }

    /// Whether `pattern` is a valid pattern: name characters and `{param}` placeholders with
    /// distinct non-empty names, never two placeholders in a row.
    public static func isValidPattern(_ pattern: String) -> Bool { parse(pattern) != nil }

    enum Part: Equatable {
        case literal(String)
        case parameter(String)
    }

    static func parse(_ pattern: String) -> [Part]? {
        guard !pattern.isEmpty, pattern.utf8.count <= maxLength * 2 else { return nil }
        var parts: [Part] = []
        var names: Set<String> = []
        var rest = Substring(pattern)
        while !rest.isEmpty {
            if rest.first == "{" {
                guard let close = rest.firstIndex(of: "}") else { return nil }
                let key = String(rest[rest.index(after: rest.startIndex)..<close])
                guard !key.isEmpty, key.utf8.allSatisfy({ isNameByte($0) && $0 != UInt8(ascii: ":") }), names.insert(key).inserted else { return nil }
                if case .parameter = parts.last { return nil }
                parts.append(.parameter(key))
                rest = rest[rest.index(after: close)...]
            } else {
                let literal = rest.prefix { $0 != "{" }
                guard literal.utf8.allSatisfy(isNameByte) else { return nil }
                parts.append(.literal(String(literal)))
                rest = rest.dropFirst(literal.count)
            }
        }
        return parts
    }

    static func isNameByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "="), UInt8(ascii: "@"), UInt8(ascii: ","),
             UInt8(ascii: "."), UInt8(ascii: ";"), UInt8(ascii: ":"):
            return true
        default:
            return false
        }
    }
}
