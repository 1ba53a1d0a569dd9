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

    /// Whether some room name matches both patterns (a plain name is a pattern without
    /// placeholders).
    ///
    /// A backend refuses a public rule whose pattern overlaps another rule's: the public grant
    /// admits every name its pattern matches, so a name that another rule claims (first match
    /// wins) would let a visitor past that rule's authorizer (docs/rooms-protocol.md "Auth
    /// route"; Backends/README.md "Public rules").
    ///
    /// Each pattern is a regular language: its literal bytes, and for each placeholder one or
    /// more name bytes other than `:` and the first byte of the literal after it (what `match`
    /// takes). The answer is a search of the two automata's product for the shortest common
    /// name, which must fit in `maxLength` bytes; at most (n + 1)(m + 1) states for patterns of
    /// n and m items.
    ///
    /// - Parameters:
    ///   - first: a pattern (`news:{topic}`).
    ///   - second: another pattern (`news:{topic}-staff`).
    /// - Returns: `true` when a valid name matches both (`news:x-staff`); `false` when none does
    ///   or either is not a valid pattern.
    public static func patternsOverlap(_ first: String, _ second: String) -> Bool {
        guard let a = parse(first).map(items), let b = parse(second).map(items) else { return false }
        // Breadth first over (position in a, position in b): the first visit is the shortest.
        var seen: Set<Int> = [0]
        var frontier = [(0, 0)]
        for _ in 0..<maxLength {
            var next: [(Int, Int)] = []
            for (i, j) in frontier {
                for (targetA, stepA) in moves(a, from: i) {
                    for (targetB, stepB) in moves(b, from: j) where stepA.admitsSome(with: stepB) {
                        if targetA == a.count && targetB == b.count { return true }
                        if seen.insert(targetA * (b.count + 1) + targetB).inserted { next.append((targetA, targetB)) }
                    }
                }
            }
            frontier = next
        }
        return false
    }

    /// One byte of a pattern's language: a literal byte, or any name byte but the excluded ones
    /// (a placeholder, which repeats).
    enum Step {
        case byte(UInt8)
        case anyBut([UInt8])

        /// Whether some name byte satisfies both steps. Two placeholders always share one: each
        /// excludes at most two of the alphabet's 69 bytes.
        func admitsSome(with other: Step) -> Bool {
            switch (self, other) {
            case (.byte(let x), .byte(let y)): return x == y
            case (.byte(let x), .anyBut(let excluded)), (.anyBut(let excluded), .byte(let x)): return !excluded.contains(x)
            case (.anyBut, .anyBut): return true
            }
        }
    }

    static func items(_ parts: [Part]) -> [Step] {
        var steps: [Step] = []
        for (index, part) in parts.enumerated() {
            switch part {
            case .literal(let text):
                steps += text.utf8.map(Step.byte)
            case .parameter:
                var excluded = [UInt8(ascii: ":")]
                if index + 1 < parts.count, case .literal(let next) = parts[index + 1], let first = next.utf8.first, first != UInt8(ascii: ":") {
                    excluded.append(first)
                }
                steps.append(.anyBut(excluded))
            }
        }
        return steps
    }

    /// The automaton's moves from `position` (items before it taken): the next item, and a
    /// placeholder just taken taking one more byte.
    static func moves(_ steps: [Step], from position: Int) -> [(Int, Step)] {
        var moves: [(Int, Step)] = []
        if position < steps.count { moves.append((position + 1, steps[position])) }
        if position > 0, case .anyBut = steps[position - 1] { moves.append((position, steps[position - 1])) }
        return moves
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
