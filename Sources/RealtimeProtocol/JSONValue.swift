import Foundation

/// Any JSON value (RFC 8259), for payloads whose shape the protocol does not fix: presence
/// `user_info`, event data.
public enum JSONValue: Hashable, Sendable, Codable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Decodes any JSON value.
    ///
    /// Each level tries the types in turn, and with Foundation's decoders every miss builds an
    /// error holding the whole coding path, so a value's cost grows with the square of its
    /// depth: a value nested deeper than `StrictJSON.maxDepth` is refused. Peer input goes
    /// through `StrictJSON.decode(_:from:)`, which checks that bound before decoding.
    ///
    /// - Throws: `DecodingError` when the input is not JSON or is nested deeper than
    ///   `StrictJSON.maxDepth` (counting the levels of the type that holds it).
    public init(from decoder: any Decoder) throws {
        guard decoder.codingPath.count <= StrictJSON.maxDepth else {
            throw DecodingError.dataCorrupted(.init(codingPath: decoder.codingPath, debugDescription: "nested deeper than \(StrictJSON.maxDepth)"))
        }
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Encodes the value as JSON.
    ///
    /// - Throws: `EncodingError` for a non-finite number.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The string, if this is one.
    public var string: String? { if case .string(let value) = self { value } else { nil } }
    /// The number, if this is one.
    public var number: Double? { if case .number(let value) = self { value } else { nil } }
    /// The Boolean, if this is one.
    public var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
    /// The elements, if this is an array.
    public var array: [JSONValue]? { if case .array(let value) = self { value } else { nil } }
    /// The members, if this is an object.
    public var object: [String: JSONValue]? { if case .object(let value) = self { value } else { nil } }

    /// The member `key` of an object, or `nil`.
    public subscript(key: String) -> JSONValue? { object?[key] }

    /// The element at `index` of an array, or `nil` (not an array, or out of range).
    public subscript(index: Int) -> JSONValue? {
        guard case .array(let elements) = self, elements.indices.contains(index) else { return nil }
        return elements[index]
    }

    /// The bytes of a binary value: JSON has no bytes, so they travel as `{"$binary": "<base64>"}`
    /// (docs/rooms-protocol.md "Binary values", base64 of RFC 4648 §4). `nil` for anything else,
    /// including an object with other members or text that is not base64.
    public var data: [UInt8]? {
        guard case .object(let members) = self, members.count == 1, case .string(let text)? = members["$binary"] else { return nil }
        return Data(base64Encoded: text).map(Array.init)
    }

    /// A binary value, `{"$binary": "<base64>"}` (the form `data` reads).
    ///
    /// - Parameter bytes: the bytes.
    public static func binary(_ bytes: some Collection<UInt8>) -> JSONValue {
        .object(["$binary": .string(Data(bytes).base64EncodedString())])
    }
}

extension JSONValue: CustomStringConvertible, CustomDebugStringConvertible {
    /// The value as compact JSON with sorted keys, as the protocol writes it
    /// (`{"status":"shipped"}`): what `print(data)` shows (it showed the enum's
    /// cases). A value JSON cannot hold (a non-finite number) prints its number as `nan` or `inf`.
    public var description: String {
        if let text = try? RealtimeMessage.jsonText(self) { return text }
        switch self {
        case .number(let value): return "\(value)"
        case .array(let items): return "[\(items.map(\.description).joined(separator: ","))]"
        case .object(let members):
            return "{\(members.sorted { $0.key < $1.key }.map { "\(JSONValue.string($0.key).description):\($0.value.description)" }.joined(separator: ","))}"
        default: return "null"
        }
    }

    /// The same as `description`.
    public var debugDescription: String { description }
}
