/// The fast path of `RealtimeMessage(parsing:)`: almost every frame is a flat JSON object whose
/// values are strings (`{"event":"…","channel":"…","data":"…"}`), and scanning that directly is
/// several times cheaper than `JSONSerialization`. Anything else — nested values, numbers,
/// Booleans, invalid JSON, lone surrogates — makes `parse` return nil, and `JSONSerialization`
/// decides (and reports errors), so the result is always the same as the slow path's
/// (RFC 8259 §4 objects, §7 strings).
enum FlatJSONObject {
    /// The members the protocol reads: each `nil` when absent, `.some(nil)` for `null`.
    struct Fields: Equatable {
        var event: String??
        var channel: String??
        var data: String??
        var userID: String??
    }

    /// The protocol's members of a flat object of strings and nulls, or nil when the text is
    /// anything else. Other keys are skipped; a repeated key keeps its last value, as
    /// `JSONSerialization` does.
    static func parse(_ text: String) -> Fields? {
        var text = text
        return text.withUTF8 { bytes in
            var scanner = Scanner(bytes: bytes)
            return scanner.object()
        }
    }

    private struct Scanner {
        let bytes: UnsafeBufferPointer<UInt8>
        var index = 0

        init(bytes: UnsafeBufferPointer<UInt8>) { self.bytes = bytes }

        mutating func object() -> Fields? {
            skipWhitespace()
            guard take(UInt8(ascii: "{")) else { return nil }
            var members = Fields()
            skipWhitespace()
            if take(UInt8(ascii: "}")) { return end() ? members : nil }
            while true {
                skipWhitespace()
                guard let key = string() else { return nil }
                skipWhitespace()
                guard take(UInt8(ascii: ":")) else { return nil }
                skipWhitespace()
                let value: String?
                if let text = string() {
                    value = text
                } else if literal("null") {
                    value = nil
                } else {
                    return nil
                }
                switch key {
                case "event": members.event = .some(value)
                case "channel": members.channel = .some(value)
                case "data": members.data = .some(value)
                case "user_id": members.userID = .some(value)
                default: break
                }
                skipWhitespace()
                if take(UInt8(ascii: ",")) { continue }
                guard take(UInt8(ascii: "}")) else { return nil }
                return end() ? members : nil
            }
        }

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

        /// A string at the current position, or nil (position unchanged meaningfully only on
        /// success; callers give up on nil).
        private mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
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
                if byte < 0x20 { return nil }
                index += 1
            }
            guard index < bytes.count else { return nil }
            var decoded: [UInt8] = []
            decoded.reserveCapacity(bytes.count - start)
            decoded.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[start..<index]))
            while index < bytes.count {
                // Copy the run up to the next quote or backslash in one go.
                var end = index
                while end < bytes.count, bytes[end] != UInt8(ascii: "\""), bytes[end] != UInt8(ascii: "\\") {
                    if bytes[end] < 0x20 { return nil }
                    end += 1
                }
                decoded.append(contentsOf: UnsafeBufferPointer(rebasing: bytes[index..<end]))
                index = end
                guard index < bytes.count else { return nil }
                let byte = bytes[index]
                index += 1
                if byte == UInt8(ascii: "\"") { return String(decoding: decoded, as: UTF8.self) }
                guard index < bytes.count else { return nil }
                let escape = bytes[index]
                index += 1
                switch escape {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded.append(escape)
                case UInt8(ascii: "b"): decoded.append(0x08)
                case UInt8(ascii: "f"): decoded.append(0x0C)
                case UInt8(ascii: "n"): decoded.append(0x0A)
                case UInt8(ascii: "r"): decoded.append(0x0D)
                case UInt8(ascii: "t"): decoded.append(0x09)
                case UInt8(ascii: "u"):
                    guard let scalar = unicodeEscape() else { return nil }
                    decoded.append(contentsOf: String(Character(scalar)).utf8)
                default:
                    return nil
                }
            }
            return nil
        }

        /// The scalar of `\uXXXX` (the `\u` already read), pairing surrogates; nil for a lone
        /// surrogate or bad hex (the slow path then decides).
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
