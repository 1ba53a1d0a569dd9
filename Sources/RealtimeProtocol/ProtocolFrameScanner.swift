/// `RealtimeMessage(parsing:)`'s reader: one pass over the frame's bytes that checks the whole
/// text is JSON (RFC 8259) and takes only what the protocol reads — `event`, `channel`,
/// `user_id` and `data` — without building anything else. A `data` that is not a string (an
/// object, an array, a number, a Boolean) is kept as its JSON text, exactly as sent; other
/// members are checked and skipped. So a frame's cost is linear in its size whatever it holds:
/// a 54 KB `data` object with thousands of keys cost 0.28 s of the service thread through
/// `JSONSerialization` (parse, then re-encode with sorted keys), on `ping` too.
///
/// Refused, as `ProtocolError`: text that is not JSON (`malformedJSON`, also for a lone
/// surrogate escape, RFC 8259 §8.2), JSON that is not an object (`notAnObject`), nesting deeper
/// than `maximumDepth` (`tooDeep`), and the members' types (`missingField`, `invalidField`).
enum ProtocolFrameScanner {
    /// One member's value: a string (decoded), `null`, or any other JSON value as its text.
    enum Member: Equatable {
        case string(String)
        case null
        case other(String)
    }

    /// The members the protocol reads, each `nil` when absent; the last of a repeated key.
    struct Fields: Equatable {
        var event: Member?
        var channel: Member?
        var data: Member?
        var userID: Member?
    }

    /// Most arrays and objects open at once inside the frame (the frame itself is level 1).
    static let maximumDepth = 32

    /// The protocol's members of the frame. A repeated key keeps its last value, as
    /// `JSONSerialization` does.
    ///
    /// - Throws: `ProtocolError.malformedJSON`, `.notAnObject` or `.tooDeep`.
    static func parse(_ text: String) throws(ProtocolError) -> Fields {
        var text = text
        let result = text.withUTF8 { bytes -> Result<Fields, Failure> in
            var scanner = Scanner(bytes: bytes)
            do throws(Failure) {
                return .success(try scanner.frame())
            } catch {
                return .failure(error)
            }
        }
        switch result {
        case .success(let fields): return fields
        // The excerpt is cut only on an error: walking 80 characters of every frame cost
        // about 3 % of the client's CPU per room event.
        case .failure(.notJSON): throw .malformedJSON(String(text.prefix(80)))
        case .failure(.notAnObject): throw .notAnObject
        case .failure(.tooDeep): throw .tooDeep(limit: maximumDepth)
        }
    }

    private enum Failure: Error {
        case notJSON
        case notAnObject
        case tooDeep
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        /// The frame: an object whose members are read or skipped.
        mutating func frame() throws(Failure) -> Fields {
            skipWhitespace()
            guard take(UInt8(ascii: "{")) else {
                // Valid JSON of another kind is "not an object"; anything else is not JSON.
                try skipValue(depth: 1)
                guard end() else { throw .notJSON }
                throw .notAnObject
            }
            var members = Fields()
            skipWhitespace()
            if take(UInt8(ascii: "}")) {
                guard end() else { throw .notJSON }
                return members
            }
            while true {
                skipWhitespace()
                let key = try memberKey()
                skipWhitespace()
                guard take(UInt8(ascii: ":")) else { throw .notJSON }
                skipWhitespace()
                switch key {
                case .event: members.event = try member()
                case .channel: members.channel = try member()
                case .data: members.data = try member()
                case .userID: members.userID = try member()
                case .other: try skipValue(depth: 2)
                }
                skipWhitespace()
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")), end() else { throw .notJSON }
                return members
            }
        }

        /// The keys the protocol reads.
        private enum Key {
            case event, channel, data, userID, other
        }

        /// A top-level key, compared in place: no string is built unless it has escapes.
        private mutating func memberKey() throws(Failure) -> Key {
            let start = index
            try skipString()
            let raw = UnsafeBufferPointer(rebasing: bytes[(start + 1)..<(index - 1)])
            if raw.contains(UInt8(ascii: "\\")) {
                index = start
                switch try string() {
                case "event": return .event
                case "channel": return .channel
                case "data": return .data
                case "user_id": return .userID
                default: return .other
                }
            }
            if raw.equals("event") { return .event }
            if raw.equals("channel") { return .channel }
            if raw.equals("data") { return .data }
            if raw.equals("user_id") { return .userID }
            return .other
        }

        /// Checks and skips a string without decoding it (RFC 8259 §7).
        private mutating func skipString() throws(Failure) {
            guard take(UInt8(ascii: "\"")) else { throw .notJSON }
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                if byte == UInt8(ascii: "\"") { return }
                if byte < 0x20 { throw .notJSON }
                guard byte == UInt8(ascii: "\\") else { continue }
                guard index < bytes.count else { throw .notJSON }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"), UInt8(ascii: "f"),
                     UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    continue
                case UInt8(ascii: "u"):
                    guard unicodeEscape() != nil else { throw .notJSON }
                default:
                    throw .notJSON
                }
            }
            throw .notJSON
        }

        /// A member's value: a string is decoded, another value kept as its text.
        private mutating func member() throws(Failure) -> Member {
            guard index < bytes.count else { throw .notJSON }
            if bytes[index] == UInt8(ascii: "\"") { return .string(try string()) }
            if literal("null") { return .null }
            let start = index
            try skipValue(depth: 2)
            return .other(String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self))
        }

        /// Checks and skips one value; `depth` is the nesting level it would open.
        private mutating func skipValue(depth: Int) throws(Failure) {
            guard index < bytes.count else { throw .notJSON }
            switch bytes[index] {
            case UInt8(ascii: "\""):
                try skipString()
            case UInt8(ascii: "{"):
                guard depth <= ProtocolFrameScanner.maximumDepth else { throw .tooDeep }
                index += 1
                skipWhitespace()
                if take(UInt8(ascii: "}")) { return }
                while true {
                    skipWhitespace()
                    try skipString()
                    skipWhitespace()
                    guard take(UInt8(ascii: ":")) else { throw .notJSON }
                    skipWhitespace()
                    try skipValue(depth: depth + 1)
                    skipWhitespace()
                    if take(UInt8(ascii: ",")) { continue }
                    guard take(UInt8(ascii: "}")) else { throw .notJSON }
                    return
                }
            case UInt8(ascii: "["):
                guard depth <= ProtocolFrameScanner.maximumDepth else { throw .tooDeep }
                index += 1
                skipWhitespace()
                if take(UInt8(ascii: "]")) { return }
                while true {
                    skipWhitespace()
                    try skipValue(depth: depth + 1)
                    skipWhitespace()
                    if take(UInt8(ascii: ",")) { continue }
                    guard take(UInt8(ascii: "]")) else { throw .notJSON }
                    return
                }
            case UInt8(ascii: "t"):
                guard literal("true") else { throw .notJSON }
            case UInt8(ascii: "f"):
                guard literal("false") else { throw .notJSON }
            case UInt8(ascii: "n"):
                guard literal("null") else { throw .notJSON }
            default:
                guard try skipNumber() else { throw .notJSON }
            }
        }

        /// Checks and skips a number (RFC 8259 §6: `-? int frac? exp?`); false when none
        /// starts here.
        private mutating func skipNumber() throws(Failure) -> Bool {
            let start = index
            _ = take(UInt8(ascii: "-"))
            guard index < bytes.count, isDigit(bytes[index]) else {
                guard index == start else { throw .notJSON }
                return false
            }
            if !take(UInt8(ascii: "0")) { while index < bytes.count, isDigit(bytes[index]) { index += 1 } }
            if take(UInt8(ascii: ".")) { try digits() }
            if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
                index += 1
                if !take(UInt8(ascii: "+")) { _ = take(UInt8(ascii: "-")) }
                try digits()
            }
            return true
        }

        /// One or more digits.
        private mutating func digits() throws(Failure) {
            guard index < bytes.count, isDigit(bytes[index]) else { throw .notJSON }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }

        private func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

        /// Whether only whitespace is left.
        private mutating func end() -> Bool {
            skipWhitespace()
            return index == bytes.count
        }

        private mutating func skipWhitespace() {
            while index < bytes.count {
                switch bytes[index] {
                case 0x20, 0x09, 0x0A, 0x0D: index += 1
                default: return
                }
            }
        }

        private mutating func take(_ byte: UInt8) -> Bool {
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        private mutating func literal(_ word: StaticString) -> Bool {
            let count = word.utf8CodeUnitCount
            guard index + count <= bytes.count else { return false }
            for offset in 0..<count where bytes[index + offset] != word.utf8Start[offset] { return false }
            index += count
            return true
        }

        /// The string at the current position, decoded (RFC 8259 §7).
        private mutating func string() throws(Failure) -> String {
            guard take(UInt8(ascii: "\"")) else { throw .notJSON }
            let start = index
            // The common case: no escapes. The slice ends at ASCII bytes, so it is valid UTF-8.
            while index < bytes.count {
                let byte = bytes[index]
                if byte == UInt8(ascii: "\"") {
                    let value = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
                    index += 1
                    return value
                }
                if byte == UInt8(ascii: "\\") { break }
                if byte < 0x20 { throw .notJSON }
                index += 1
            }
            guard index < bytes.count else { throw .notJSON }
            // Escapes: find the closing quote first (a backslash and the byte after it never
            // end the string), since the escaped length bounds the decoded one; then decode
            // byte by byte into the string's own storage, one allocation and no copy.
            var close = index
            while close < bytes.count {
                let byte = bytes[close]
                if byte == UInt8(ascii: "\"") { break }
                if byte == UInt8(ascii: "\\") { close += 2; continue }
                if byte < 0x20 { throw .notJSON }
                close += 1
            }
            guard close < bytes.count else { throw .notJSON }
            var failed = false
            var value = String(unsafeUninitializedCapacity: close - start) { output -> Int in
                var count = index - start
                _ = output.initialize(from: UnsafeBufferPointer(rebasing: bytes[start..<index]))
                while index < close {
                    let byte = bytes[index]
                    index += 1
                    guard byte == UInt8(ascii: "\\") else {
                        output[count] = byte
                        count += 1
                        continue
                    }
                    let escape = bytes[index]
                    index += 1
                    switch escape {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): output[count] = escape
                    case UInt8(ascii: "b"): output[count] = 0x08
                    case UInt8(ascii: "f"): output[count] = 0x0C
                    case UInt8(ascii: "n"): output[count] = 0x0A
                    case UInt8(ascii: "r"): output[count] = 0x0D
                    case UInt8(ascii: "t"): output[count] = 0x09
                    case UInt8(ascii: "u"):
                        // 6 (or 12, a surrogate pair) escaped bytes give at most 3 (or 4).
                        // The closing quote is neither a backslash, `u` nor hex: it may be
                        // looked at, never consumed.
                        guard let scalar = unicodeEscape() else {
                            failed = true
                            return 0
                        }
                        UTF8.encode(scalar) { output[count] = $0; count += 1 }
                        continue
                    default:
                        failed = true
                        return 0
                    }
                    count += 1
                }
                return count
            }
            guard !failed else { throw .notJSON }
            index = close + 1
            // A string made mostly of `\uXXXX` escapes decodes to far fewer bytes than the
            // capacity taken (down to 1 in 6): it is copied to its own size, so that a peer's
            // escapes cost no more memory than their decoded text.
            guard value.utf8.count < (close - start) / 2 else { return value }
            return value.withUTF8 { String(decoding: $0, as: UTF8.self) }
        }

        /// The scalar of `\uXXXX` (the `\u` already read), pairing surrogates; nil for a lone
        /// surrogate or bad hex.
        private mutating func unicodeEscape() -> Unicode.Scalar? {
            guard let high = hex4() else { return nil }
            if (0xD800...0xDBFF).contains(high) {
                guard take(UInt8(ascii: "\\")), take(UInt8(ascii: "u")), let low = hex4(), (0xDC00...0xDFFF).contains(low) else { return nil }
                return Unicode.Scalar(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
            }
            return Unicode.Scalar(high)
        }

        private mutating func hex4() -> UInt32? {
            guard index + 4 <= bytes.count else { return nil }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[index]
                let digit: UInt8
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
                default: return nil
                }
                value = value << 4 | UInt32(digit)
                index += 1
            }
            return value
        }
    }
}

extension UnsafeBufferPointer<UInt8> {
    /// Whether these bytes are `word`'s UTF-8, compared byte by byte: the parsers' member names
    /// on the per-event paths (the generic `elementsEqual` over a `UTF8View` was 2 % of a room
    /// event's time on the client's socket thread, and a `String` per key more).
    func equals(_ word: StaticString) -> Bool {
        guard count == word.utf8CodeUnitCount else { return false }
        for offset in 0..<count where self[offset] != word.utf8Start[offset] { return false }
        return true
    }
}
