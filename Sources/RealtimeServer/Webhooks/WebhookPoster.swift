import CurlHTTP

/// One webhook POST through libcurl (`CurlHTTP`), blocking the calling thread: libcurl enforces
/// the whole request's deadline and never leaves a request behind, and the answer's body is
/// counted, not kept.
enum WebhookPoster {
    /// Largest answer body read, in bytes; a larger one aborts the request (a failure).
    static let maxResponseBytes = 64 * 1024

    /// Posts `body` to `url`.
    ///
    /// - Parameters:
    ///   - headers: `Name: value` lines.
    ///   - timeout: the whole request's deadline.
    /// - Returns: the HTTP status, or `nil` when no complete answer came (refused, timed out,
    ///   too large, not http(s)).
    static func post(url: String, body: [UInt8], headers: [String], timeout: Duration) -> Int? {
        switch CurlHTTP.post(url: url, body: body, headers: headers, timeout: timeout, maxResponseBytes: maxResponseBytes, keepsBody: false) {
        case .success(let answer): return answer.status
        case .failure: return nil
        }
    }
}
