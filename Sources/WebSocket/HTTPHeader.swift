/// One HTTP header field (RFC 9110 §5): a name and its value.
public struct HTTPHeader: Hashable, Sendable {
    /// The field name; compared case-insensitively. Request headers come lower-cased.
    public var name: String
    /// The field value.
    public var value: String

    /// Creates a header field.
    ///
    /// - Parameters:
    ///   - name: the field name, such as `content-type`.
    ///   - value: the field value.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}
