import Foundation

/// One protocol message, a WebSocket text frame: `{"event": E, "channel": C?, "data": D,
/// "user_id": U?}` (Pusher Channels protocol 7). `data` is a JSON-encoded string on the wire;
/// incoming data that is a JSON object or array is accepted and kept as its JSON text.
public struct RealtimeMessage: Hashable, Sendable {
    /// The event name: a namespaced protocol event or an app event.
    public var event: String
    /// The channel, for channel events.
    public var channel: String?
    /// The payload as text (usually JSON), or `nil`.
    public var data: String?
    /// The sender of a client event on a presence channel (set by the server).
    public var userID: String?

    /// Creates a message.
    ///
    /// - Parameters:
    ///   - event: the event name.
    ///   - channel: the channel, if any.
    ///   - data: the payload text, if any.
    ///   - userID: the sending user, for client events on presence channels.
    public init(event: String, channel: String? = nil, data: String? = nil, userID: String? = nil) {
        self.event = event
        self.channel = channel
        self.data = data
        self.userID = userID
    }

    /// Creates a message whose data is `payload` encoded as JSON text.
    ///
    /// - Throws: `EncodingError` if the payload cannot be encoded.
    public init(event: String, channel: String? = nil, payload: some Encodable) throws {
        self.init(event: event, channel: channel, data: try Self.jsonText(payload))
    }

    /// Parses a text frame.
    ///
    /// - Parameter text: the frame's text.
    /// - Throws: `ProtocolError.malformedJSON` for text that is not JSON,
    ///   `.notAnObject` for JSON that is not an object, `.missingField("event")` or
    ///   `.invalidField` for fields of the wrong type.
    public init(parsing text: String) throws(ProtocolError) {
        // One linear pass (ProtocolFrameScanner): nothing but the protocol's members is built.
        let fields = try ProtocolFrameScanner.parse(text)
        guard let event = fields.event else { throw .missingField("event") }
        guard case .string(let name) = event, !name.isEmpty else { throw .invalidField("event", "not a non-empty string") }
        var channel: String?
        switch fields.channel {
        case nil, .null?: channel = nil
        case .string(let value)?: channel = value
        case .other?: throw .invalidField("channel", "not a string")
        }
        var data: String?
        switch fields.data {
        case nil, .null?: data = nil
        // A non-string data is kept as its JSON text, exactly as sent.
        case .string(let value)?, .other(let value)?: data = value
        }
        var userID: String?
        switch fields.userID {
        case nil, .null?: userID = nil
        case .string(let value)?: userID = value
        // A numeric user id is taken as its text (Pusher's libraries send numbers).
        case .other(let value)? where value.first.map { $0 == "-" || $0.isNumber } == true: userID = value
        case .other?: throw .invalidField("user_id", "not a string")
        }
        self.init(event: name, channel: channel, data: data, userID: userID)
    }

    /// The same reading through `JSONSerialization`: the reference the scanner is tested
    /// against (`FastParseTests`), never used on peer input (its cost grows with what `data`
    /// holds, and it re-encodes a non-string `data` with sorted keys).
    init(parsingWithFoundation text: String) throws(ProtocolError) {
        let object: Any
        do {
            object = try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
        } catch {
            throw .malformedJSON(String(text.prefix(80)))
        }
        guard let fields = object as? [String: Any] else { throw .notAnObject }
        guard let event = fields["event"] else { throw .missingField("event") }
        guard let name = event as? String, !name.isEmpty else { throw .invalidField("event", "not a non-empty string") }
        self.event = name
        switch fields["channel"] {
        case nil, is NSNull: channel = nil
        case let value as String: channel = value
        default: throw .invalidField("channel", "not a string")
        }
        switch fields["data"] {
        case nil, is NSNull: data = nil
        case let value as String: data = value
        case let value?:
            // An object, array, number or Boolean: keep its JSON text (`true` stays `true`).
            guard let encoded = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .fragmentsAllowed]) else {
                throw .invalidField("data", "not representable as JSON text")
            }
            data = String(decoding: encoded, as: UTF8.self)
        }
        switch fields["user_id"] {
        case nil, is NSNull: userID = nil
        case let value as String: userID = value
        case let value as NSNumber: userID = value.stringValue
        default: throw .invalidField("user_id", "not a string")
        }
    }

    /// The frame's text: keys `channel`, `data`, `event`, `user_id` in that (sorted) order,
    /// absent ones left out, values as JSON strings (RFC 8259 §7: `"` and `\` escaped, control
    /// characters as `\n`-style or `\u00XX` escapes, nothing else escaped) — the bytes
    /// `JSONEncoder` gives with `.sortedKeys` and `.withoutEscapingSlashes`, written directly
    /// because the server writes one per subscriber.
    public var text: String {
        var output = "{"
        output.reserveCapacity(32 + event.utf8.count + (channel?.utf8.count ?? 0) + (data?.utf8.count ?? 0) * 9 / 8)
        var first = true
        for (key, value) in [("channel", channel), ("data", data), ("event", event), ("user_id", userID)] {
            guard let value else { continue }
            if !first { output += "," }
            first = false
            output += "\"\(key)\":"
            Self.appendJSONString(value, to: &output)
        }
        output += "}"
        return output
    }

    /// Appends `value` as a JSON string literal. Text with nothing to escape is appended as
    /// it is; otherwise runs between escapes are copied at once into one byte buffer (a string
    /// append per escape made escape-heavy data, `\"` repeated, cost milliseconds per 10 KiB).
    package static func appendJSONString(_ value: String, to output: inout String) {
        var value = value
        value.withUTF8 { utf8 in
            func needsEscape(_ byte: UInt8) -> Bool { byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") }
            guard let firstEscape = utf8.firstIndex(where: needsEscape) else {
                output += "\""
                output += String(decoding: utf8, as: UTF8.self)
                output += "\""
                return
            }
            let hex: StaticString = "0123456789abcdef"
            var bytes: [UInt8] = []
            bytes.reserveCapacity(utf8.count + utf8.count / 8 + 8)
            bytes.append(UInt8(ascii: "\""))
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[..<firstEscape]))
            var index = firstEscape
            while index < utf8.count {
                var end = index
                while end < utf8.count, !needsEscape(utf8[end]) { end += 1 }
                if end > index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[index..<end])) }
                guard end < utf8.count else { break }
                let byte = utf8[end]
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                default:
                    bytes.append(UInt8(ascii: "u"))
                    bytes.append(UInt8(ascii: "0"))
                    bytes.append(UInt8(ascii: "0"))
                    bytes.append(hex.utf8Start[Int(byte >> 4)])
                    bytes.append(hex.utf8Start[Int(byte & 0xF)])
                }
                index = end + 1
            }
            bytes.append(UInt8(ascii: "\""))
            output += String(decoding: bytes, as: UTF8.self)
        }
    }

    /// The frame's text through `JSONEncoder` (the reference `text` must equal; used in tests).
    var encoderText: String {
        var fields: [String: String] = ["event": event]
        if let channel { fields["channel"] = channel }
        if let data { fields["data"] = data }
        if let userID { fields["user_id"] = userID }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // A [String: String] always encodes.
        return String(decoding: (try? encoder.encode(fields)) ?? Data("{}".utf8), as: UTF8.self)
    }

    /// Decodes `data` as JSON into `T`, through `StrictJSON.decode(_:from:)`: a peer's data
    /// nested deeper than `StrictJSON.maxDepth` or repeating a member name is refused.
    ///
    /// - Throws: `ProtocolError.missingField("data")` without data,
    ///   `.invalidField("data", …)` when it does not decode.
    public func decodeData<T: Decodable>(_ type: T.Type) throws(ProtocolError) -> T {
        guard let data else { throw .missingField("data") }
        do {
            return try StrictJSON.decode(T.self, from: data.utf8)
        } catch {
            throw .invalidField("data", error.description)
        }
    }

    /// Which field a decoding failed at, and why (`since.id: expected UInt64`).
    static func describe(_ error: DecodingError) -> String {
        func path(_ keys: [any CodingKey]) -> String {
            keys.map { $0.intValue.map { "[\($0)]" } ?? $0.stringValue }.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context): return "missing \(path(context.codingPath + [key]))"
        case .typeMismatch(let type, let context): return "\(path(context.codingPath)) is not \(type)"
        case .valueNotFound(let type, let context): return "\(path(context.codingPath)) is null, not \(type)"
        case .dataCorrupted(let context): return context.codingPath.isEmpty ? "not JSON" : "\(path(context.codingPath)): \(context.debugDescription)"
        @unknown default: return "\(error)"
        }
    }

    /// JSON text of an encodable value, keys sorted.
    ///
    /// - Throws: `EncodingError`.
    public static func jsonText(_ value: some Encodable) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }
}

/// Why a frame is not a valid protocol message.
public enum ProtocolError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The text is not JSON (the start of it is kept).
    case malformedJSON(String)
    /// The JSON is not an object.
    case notAnObject
    /// A required field is absent.
    case missingField(String)
    /// A field has the wrong type or value: the field, and what is wrong.
    case invalidField(String, String)
    /// Arrays and objects nested deeper than `limit` levels (the frame is level 1).
    case tooDeep(limit: Int)

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .malformedJSON(let start): return "malformed JSON: \(start)"
        case .notAnObject: return "the message is not a JSON object"
        case .missingField(let name): return "missing field \"\(name)\""
        case .invalidField(let name, let problem): return "invalid field \"\(name)\": \(problem)"
        case .tooDeep(let limit): return "JSON nested deeper than \(limit) levels"
        }
    }
}
