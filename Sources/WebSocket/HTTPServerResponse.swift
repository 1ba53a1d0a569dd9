/// The answer to a plain HTTP request.
public struct HTTPServerResponse: Hashable, Sendable {
    /// The status code, e.g. 200.
    public var status: Int
    /// Header fields to send. `content-length` is always computed from `body`; a
    /// `content-type` here replaces the default `text/plain; charset=utf-8`.
    public var headers: [HTTPHeader]
    /// The body bytes.
    public var body: [UInt8]

    /// Creates a response.
    ///
    /// - Parameters:
    ///   - status: the status code.
    ///   - headers: header fields (see `headers`).
    ///   - body: the body bytes.
    public init(status: Int = 200, headers: [HTTPHeader] = [], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// Creates a response with a UTF-8 body.
    ///
    /// - Parameters:
    ///   - status: the status code.
    ///   - contentType: the `content-type` field.
    ///   - text: the body.
    public init(status: Int = 200, contentType: String = "text/plain; charset=utf-8", text: String) {
        self.init(status: status, headers: [HTTPHeader(name: "content-type", value: contentType)], body: Array(text.utf8))
    }

    /// The `content-type` to send.
    var contentType: String {
        headers.first { $0.name.lowercased() == "content-type" }?.value ?? "text/plain; charset=utf-8"
    }
}
