/// One XML element of an XMPP stream (a stanza, a feature list, a SASL reply): name,
/// namespace, attributes, children and text, as read by the stream's scanner.
public struct XMPPElement: Sendable, Hashable, CustomStringConvertible {
    /// The local name (`iq`, `features`, `mechanism`).
    public var name: String
    /// The prefix written in the tag (`stream` in `<stream:features>`), if any.
    public var prefix: String?
    /// The namespace the name is in (`jabber:client`, `urn:ietf:params:xml:ns:xmpp-sasl`), if any.
    public var namespace: String?
    /// The attributes, by qualified name as written (`xml:lang`, `xmlns` included).
    public var attributes: [String: String]
    /// The child elements, in order.
    public var children: [XMPPElement]
    /// The character data directly inside the element, entities decoded.
    public var text: String

    /// Creates an element.
    ///
    /// - Parameters:
    ///   - name: the local name.
    ///   - prefix: the prefix, if any.
    ///   - namespace: the namespace, if any.
    ///   - attributes: the attributes by qualified name.
    ///   - children: the child elements.
    ///   - text: the character data.
    public init(name: String, prefix: String? = nil, namespace: String? = nil, attributes: [String: String] = [:], children: [XMPPElement] = [], text: String = "") {
        self.name = name
        self.prefix = prefix
        self.namespace = namespace
        self.attributes = attributes
        self.children = children
        self.text = text
    }

    /// The value of an attribute.
    ///
    /// - Parameter name: the qualified name (`type`, `id`, `xml:lang`).
    public subscript(attribute name: String) -> String? { attributes[name] }

    /// The first child with this local name (and namespace, when given).
    ///
    /// - Parameters:
    ///   - name: the local name.
    ///   - namespace: the namespace to match, or `nil` for any.
    /// - Returns: the child, or `nil`.
    public func child(_ name: String, namespace: String? = nil) -> XMPPElement? {
        children.first { $0.name == name && (namespace == nil || $0.namespace == namespace) }
    }

    /// Whether the element has this local name and namespace.
    ///
    /// - Parameters:
    ///   - name: the local name.
    ///   - namespace: the namespace.
    /// - Returns: whether both match.
    public func `is`(_ name: String, _ namespace: String) -> Bool {
        self.name == name && self.namespace == namespace
    }

    /// The qualified name as written (`stream:features`).
    public var qualifiedName: String { prefix.map { "\($0):\(name)" } ?? name }

    /// The element as XML, attributes sorted by name.
    public var description: String {
        var xml = "<\(qualifiedName)"
        for (key, value) in attributes.sorted(by: { $0.key < $1.key }) {
            xml += " \(key)='\(Self.escape(value))'"
        }
        guard !children.isEmpty || !text.isEmpty else { return xml + "/>" }
        xml += ">" + Self.escape(text)
        for child in children { xml += child.description }
        return xml + "</\(qualifiedName)>"
    }

    /// Escapes `&`, `<`, `>`, `'` and `"` for use in XML text or a quoted attribute.
    ///
    /// - Parameter text: the raw text.
    /// - Returns: the escaped text.
    public static func escape(_ text: String) -> String {
        var escaped = ""
        escaped.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": escaped += "&amp;"
            case "<": escaped += "&lt;"
            case ">": escaped += "&gt;"
            case "'": escaped += "&apos;"
            case "\"": escaped += "&quot;"
            default: escaped.append(character)
            }
        }
        return escaped
    }
}
