import CCurl
import SystemSupport

/// HTTP POSTs through libcurl's easy interface, blocking the calling thread (run it on a
/// thread of its own): libcurl enforces the whole request's deadline, a late or hanging peer
/// leaves nothing behind, and the answer's body is read up to a limit. URLSession on Linux
/// (swift-corelibs-foundation) spun a core for as long as a request waited for an answer that
/// did not come, found twice: by the webhook dispatcher and by a hostile auth route.
package enum CurlHTTP {
    /// Why a request got no complete answer.
    package enum Failure: Error, Hashable, Sendable {
        /// No complete answer within the deadline.
        case timedOut
        /// The answer's body was longer than the limit: the transfer was aborted.
        case tooLarge(limit: Int)
        /// Anything else libcurl met (refused, reset, DNS, TLS, not http(s)), with its text.
        case transport(String)
    }

    /// An answer: its status and body.
    package struct Answer: Sendable, Hashable {
        /// The HTTP status.
        package var status: Int
        /// The body, at most the limit asked for.
        package var body: [UInt8]
    }

    private static let initialized: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

    /// Posts `body` to `url`.
    ///
    /// - Parameters:
    ///   - url: an `http://` or `https://` URL (redirects are not followed).
    ///   - body: the request body.
    ///   - headers: `Name: value` lines.
    ///   - timeout: the whole request's deadline (the connect phase gets at most 5 s of it).
    ///   - maxResponseBytes: the longest body kept; a longer one is `tooLarge`.
    ///   - keepsBody: `false` counts the body without keeping it.
    /// - Returns: the answer, or why there was none.
    package static func post(url: String, body: [UInt8], headers: [String], timeout: Duration,
                             maxResponseBytes: Int, keepsBody: Bool = true) -> Result<Answer, Failure> {
        perform(url: url, body: body, headers: headers, timeout: timeout, maxResponseBytes: maxResponseBytes, keepsBody: keepsBody)
    }

    /// Gets `url`: `post(url:body:…)` without a body, as `GET`.
    package static func get(url: String, headers: [String], timeout: Duration, maxResponseBytes: Int) -> Result<Answer, Failure> {
        perform(url: url, body: nil, headers: headers, timeout: timeout, maxResponseBytes: maxResponseBytes, keepsBody: true)
    }

    /// One request: a `POST` of `body`, or a `GET` when it is nil.
    private static func perform(url: String, body: [UInt8]?, headers: [String], timeout: Duration,
                                maxResponseBytes: Int, keepsBody: Bool) -> Result<Answer, Failure> {
        guard initialized, let handle = curl_easy_init() else { return .failure(.transport("libcurl is not available")) }
        defer { curl_easy_cleanup(handle) }
        var list: UnsafeMutablePointer<curl_slist>?
        for header in headers { list = curl_slist_append(list, header) }
        defer { curl_slist_free_all(list) }
        let sink = Unmanaged.passRetained(Sink(limit: maxResponseBytes, keeps: keepsBody))
        defer { sink.release() }
        let milliseconds = Int(min(max(timeout.seconds, 0.001), 3600) * 1000)
        var text = body ?? []
        text.append(0)
        let configured = text.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { text in
                ccurl_set_url(handle, url) == CURLE_OK
                    && (body == nil || ccurl_set_post_body(handle, text.baseAddress, text.count - 1) == CURLE_OK)
                    && ccurl_set_headers(handle, list) == CURLE_OK
                    && ccurl_set_limits(handle, milliseconds, min(milliseconds, 5000)) == CURLE_OK
                    && ccurl_set_writer(handle, { data, size, count, context in
                        let sink = Unmanaged<Sink>.fromOpaque(context!).takeUnretainedValue()
                        let length = size * count
                        sink.count += length
                        guard sink.count <= sink.limit else { return 0 }
                        if sink.keeps, let data {
                            data.withMemoryRebound(to: UInt8.self, capacity: length) { bytes in
                                sink.bytes.append(contentsOf: UnsafeBufferPointer(start: bytes, count: length))
                            }
                        }
                        return length
                    }, sink.toOpaque()) == CURLE_OK
            }
        }
        guard configured else { return .failure(.transport("cannot set up the request for \(url.prefix(200))")) }
        let result = curl_easy_perform(handle)
        let received = sink.takeUnretainedValue()
        switch result {
        case CURLE_OK:
            return .success(Answer(status: ccurl_response_code(handle), body: received.bytes))
        case CURLE_OPERATION_TIMEDOUT:
            return .failure(.timedOut)
        case CURLE_WRITE_ERROR where received.count > received.limit:
            return .failure(.tooLarge(limit: received.limit))
        default:
            return .failure(.transport(String(cString: curl_easy_strerror(result))))
        }
    }

    /// The answer body so far (touched only by the thread running the request).
    private final class Sink {
        let limit: Int
        let keeps: Bool
        var count = 0
        var bytes: [UInt8] = []
        init(limit: Int, keeps: Bool) {
            self.limit = limit
            self.keeps = keeps
        }
    }
}
