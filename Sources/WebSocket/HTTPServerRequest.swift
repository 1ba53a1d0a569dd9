/// A plain HTTP request, or the upgrade request of a WebSocket connection, as a listener
/// received it.
///
/// libwebsockets parses the request: `path` and the query are percent-decoded by it, and only
/// the ~90 header names lws knows are listed in `headers` (lws 4.1 cannot enumerate other
/// headers; name them in `listen(customHeaderNames:)` to have them looked up).
public struct HTTPServerRequest: Hashable, Sendable {
    /// One `name=value` pair of the query string.
    public struct QueryItem: Hashable, Sendable {
        /// The name, percent-decoded.
        public var name: String
        /// The value, percent-decoded; empty when the item had no `=`.
        public var value: String

        /// Creates a query item.
        ///
        /// - Parameters:
        ///   - name: the decoded name.
        ///   - value: the decoded value.
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    /// The method, upper-case: GET, POST, PUT, PATCH, DELETE, OPTIONS or HEAD (the ones
    /// lws 4.1 parses).
    public var method: String
    /// The path without the query, percent-decoded, e.g. `/apps/1/events`.
    public var path: String
    /// The query items in request order, percent-decoded.
    public var queryItems: [QueryItem]
    /// The header fields, names lower-cased.
    public var headers: [HTTPHeader]
    /// The body (empty for upgrade requests and requests without one).
    public var body: [UInt8]
    /// The peer's IP address as text (`lws_get_peer_simple`).
    public var remoteAddress: String

    /// Creates a request value (for tests and fakes).
    ///
    /// - Parameters:
    ///   - method: the method, e.g. `POST`.
    ///   - path: the decoded path.
    ///   - queryItems: the decoded query items.
    ///   - headers: the header fields, names lower-cased.
    ///   - body: the body bytes.
    ///   - remoteAddress: the peer's address.
    public init(
        method: String,
        path: String,
        queryItems: [QueryItem] = [],
        headers: [HTTPHeader] = [],
        body: [UInt8] = [],
        remoteAddress: String = ""
    ) {
        self.method = method
        self.path = path
        self.queryItems = queryItems
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
    }

    /// The query string rebuilt from the decoded items, `name=value` joined by `&`.
    public var query: String {
        queryItems.map { "\($0.name)=\($0.value)" }.joined(separator: "&")
    }

    /// The first value of a query item.
    ///
    /// - Parameter name: the item name (case-sensitive).
    /// - Returns: its decoded value, or nil when absent.
    public func queryValue(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }

    /// The value of a header field.
    ///
    /// - Parameter name: the field name (case-insensitive).
    /// - Returns: its value, or nil when absent.
    public func header(_ name: String) -> String? {
        let lowered = name.lowercased()
        return headers.first { $0.name == lowered }?.value
    }
}
