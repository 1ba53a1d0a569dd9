import CCurl
import SystemSupport

/// One webhook POST through libcurl's easy interface, blocking the calling thread: libcurl
/// enforces the whole request's deadline and never leaves a request behind, and the answer's
/// body is counted, not kept (URLSession on Linux spun a core while waiting for a slow answer
/// and buffered any body whole).
enum WebhookPoster {
    /// Largest answer body read, in bytes; a larger one aborts the request (a failure).
    static let maxResponseBytes = 64 * 1024

    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// Posts `body` to `url`.
    ///
    /// - Parameters:
    ///   - headers: `Name: value` lines.
    ///   - timeout: the whole request's deadline.
    /// - Returns: the HTTP status, or `nil` when no complete answer came (refused, timed out,
    ///   too large, not http(s)).
    static func post(url: String, body: [UInt8], headers: [String], timeout: Duration) -> Int? {
        guard initialized, let handle = curl_easy_init() else { return nil }
        defer { curl_easy_cleanup(handle) }
        var list: UnsafeMutablePointer<curl_slist>?
        for header in headers { list = curl_slist_append(list, header) }
        defer { curl_slist_free_all(list) }
        let counter = Unmanaged.passRetained(Counter())
        defer { counter.release() }
        let milliseconds = Int(min(max(timeout.seconds, 0.001), 3600) * 1000)
        var body = body
        body.append(0)
        let configured = body.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { text in
                ccurl_set_url(handle, url) == CURLE_OK
                    && ccurl_set_post_body(handle, text.baseAddress, text.count - 1) == CURLE_OK
                    && ccurl_set_headers(handle, list) == CURLE_OK
                    && ccurl_set_limits(handle, milliseconds, min(milliseconds, 5000)) == CURLE_OK
                    && ccurl_set_writer(handle, { _, size, count, context in
                        let counter = Unmanaged<Counter>.fromOpaque(context!).takeUnretainedValue()
                        counter.bytes += size * count
                        return counter.bytes > WebhookPoster.maxResponseBytes ? 0 : size * count
                    }, counter.toOpaque()) == CURLE_OK
            }
        }
        guard configured, curl_easy_perform(handle) == CURLE_OK else { return nil }
        return ccurl_response_code(handle)
    }

    /// The bytes of an answer body so far (touched only by the thread running the request).
    private final class Counter {
        var bytes = 0
    }
}
