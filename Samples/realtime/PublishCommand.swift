import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import RealtimeProtocol

/// `realtime publish`: one event through the server's HTTP API, Pusher's signed REST API
/// (`POST /apps/{id}/events` with `{"name","channels","data"}`, or `POST /apps/{id}/room_events`
/// with `{"name","rooms","data"}`, and the `auth_*` query of `RESTSignature.signedParameters`).
struct PublishCommand: Sendable {
    /// How long the whole request may take, in seconds.
    static let timeout: TimeInterval = 10

    /// What to publish, and where.
    var options: PublishOptions

    /// The signed request.
    ///
    /// - Parameter timestamp: `auth_timestamp`, seconds since 1970 (the server accepts 600 s
    ///   either side of its clock).
    /// - Returns: `POST {api}/apps/{id}/events?auth_key=…&auth_signature=…` (or `room_events`)
    ///   with the JSON body.
    /// - Throws: `PublishError.invalidAPIURL` when `--api` is not a usable base URL.
    func request(timestamp: Int) throws(PublishError) -> URLRequest {
        guard var components = URLComponents(string: options.api),
              let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
              let host = components.host, !host.isEmpty,
              components.percentEncodedQuery == nil, components.fragment == nil
        else { throw .invalidAPIURL(options.api) }
        var base = components.percentEncodedPath
        while base.hasSuffix("/") { base.removeLast() }
        let toRooms = !options.rooms.isEmpty
        let path = "\(base)/apps/\(options.appID)/\(toRooms ? "room_events" : "events")"
        let body = JSONText.object([
            ("name", JSONText.quoted(options.event)),
            (toRooms ? "rooms" : "channels", JSONText.array(toRooms ? options.rooms : options.channels)),
            ("data", JSONText.quoted(options.data)),
        ])
        let parameters = RESTSignature.signedParameters(
            method: "POST", path: path, body: Array(body.utf8), key: options.key, secret: options.secret, timestamp: timestamp)
        components.percentEncodedPath = path
        // Percent-encode everything but RFC 3986 unreserved characters: a `+` left as is
        // would reach the server as a space and break the signature.
        components.percentEncodedQuery = parameters.sorted { $0.key < $1.key }
            .map { "\(Self.percentEncoded($0.key))=\(Self.percentEncoded($0.value))" }
            .joined(separator: "&")
        guard let url = components.url else { throw .invalidAPIURL(options.api) }
        var request = URLRequest(url: url, timeoutInterval: Self.timeout)
        request.httpMethod = "POST"
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.httpBody = Data(body.utf8)
        return request
    }

    /// Sends the event and calls `completion` once, on a URLSession queue, with the server's
    /// answer (the body of a 2xx response) or the reason it failed.
    ///
    /// - Parameter completion: receives the body text or a `PublishError`.
    func run(completion: @escaping @Sendable (Result<String, PublishError>) -> Void) {
        let request: URLRequest
        do {
            request = try self.request(timestamp: Int(Date().timeIntervalSince1970))
        } catch {
            completion(.failure(error))
            return
        }
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = Self.timeout
        configuration.timeoutIntervalForResource = Self.timeout
        let session = URLSession(configuration: configuration)
        let task = session.dataTask(with: request) { data, response, error in
            session.finishTasksAndInvalidate()
            completion(Self.outcome(data: data, response: response, error: error))
        }
        task.resume()
    }

    /// Turns what URLSession gave into the command's result.
    private static func outcome(data: Data?, response: URLResponse?, error: (any Error)?) -> Result<String, PublishError> {
        if let error {
            let code = (error as? URLError)?.code
            if code == .timedOut { return .failure(.timedOut(seconds: Int(timeout))) }
            return .failure(.connectionFailed(describe(code, error)))
        }
        guard let response = response as? HTTPURLResponse else {
            return .failure(.connectionFailed("the answer is not HTTP"))
        }
        let body = String(decoding: data ?? Data(), as: UTF8.self)
        guard (200..<300).contains(response.statusCode) else {
            return .failure(.rejected(status: response.statusCode, body: body))
        }
        return .success(body)
    }

    /// A short reason for a URLSession error: Foundation's description on Linux is only the
    /// numeric code.
    private static func describe(_ code: URLError.Code?, _ error: any Error) -> String {
        switch code {
        case .cannotConnectToHost?: return "connection refused"
        case .cannotFindHost?, .dnsLookupFailed?: return "host not found"
        case .networkConnectionLost?: return "the connection dropped before the answer"
        case .notConnectedToInternet?: return "no network"
        case .secureConnectionFailed?, .serverCertificateUntrusted?, .serverCertificateHasBadDate?,
             .serverCertificateHasUnknownRoot?, .serverCertificateNotYetValid?:
            return "TLS handshake failed"
        case .badServerResponse?: return "the answer is not valid HTTP"
        case let code?: return "URLError \(code.rawValue): \(error.localizedDescription)"
        case nil: return "\(error)"
        }
    }

    /// `text` with every byte outside RFC 3986's unreserved set percent-encoded.
    private static func percentEncoded(_ text: String) -> String {
        var unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        unreserved.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }
}
