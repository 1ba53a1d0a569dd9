/// Why `realtime publish` did not publish: one line for standard error, exit status 1.
enum PublishError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `--api` is not an `http://` or `https://` URL with a host and without a query.
    case invalidAPIURL(String)
    /// The server answered with a status outside 200–299 (401 for a wrong key, secret or
    /// clock, 400 for a bad event, 404 for an unknown app, 413 for too much data).
    case rejected(status: Int, body: String)
    /// No complete answer within the timeout.
    case timedOut(seconds: Int)
    /// The request could not be sent or its answer read (refused, unknown host, TLS, a
    /// dropped connection); the text says which.
    case connectionFailed(String)

    /// One line: what happened, with the status and the body the server sent (control
    /// characters escaped, so a multi-line body stays on the line).
    var description: String {
        switch self {
        case .invalidAPIURL(let url):
            return "--api is not an http:// or https:// URL with a host and no query: \(url)"
        case .rejected(let status, let body):
            return "the server answered \(status): \(body.escapingControlCharacters)"
        case .timedOut(let seconds):
            return "no answer within \(seconds) s"
        case .connectionFailed(let reason):
            return "cannot reach the server: \(reason)"
        }
    }
}
