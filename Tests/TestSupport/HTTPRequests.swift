import CurlHTTP
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// Sends a test's HTTP request with libcurl (`CurlHTTP`), as the package's own code does,
/// instead of URLSession: FoundationNetworking leaves its libcurl handles allocated in the test
/// process (LeakSanitizer, `scripts/sanitize address`).
public enum HTTPRequests {
    /// Sends `request` (GET, or POST with its body and headers) off the cooperative pool and
    /// returns the status and the body as text.
    ///
    /// - Throws: `URLError(.cannotConnectToHost)` (with libcurl's reason) when no answer came
    ///   within the request's timeout (10 s at most); `URLError(.unsupportedURL)` for a method
    ///   other than GET and POST.
    public static func send(_ request: URLRequest) async throws -> (status: Int, body: String) {
        guard let url = request.url?.absoluteString else { throw URLError(.badURL) }
        let headers = (request.allHTTPHeaderFields ?? [:]).map { "\($0.key): \($0.value)" } + ["Expect:"]
        let timeout = Duration.milliseconds(Int(min(request.timeoutInterval, 10) * 1000))
        let body = request.httpBody.map { Array($0) }
        let method = request.httpMethod ?? (body == nil ? "GET" : "POST")
        guard method == "GET" || method == "POST" else { throw URLError(.unsupportedURL) }
        let post = method == "POST"
        let result = await withCheckedContinuation { continuation in
            Thread.detachNewThread {
                continuation.resume(returning: post
                    ? CurlHTTP.post(url: url, body: body ?? [], headers: headers, timeout: timeout, maxResponseBytes: 16 << 20)
                    : CurlHTTP.get(url: url, headers: headers, timeout: timeout, maxResponseBytes: 16 << 20))
            }
        }
        switch result {
        case .success(let answer): return (answer.status, String(decoding: answer.body, as: UTF8.self))
        case .failure(let failure): throw URLError(.cannotConnectToHost, userInfo: [NSLocalizedDescriptionKey: "\(failure)"])
        }
    }
}
