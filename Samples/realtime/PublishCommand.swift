import CurlHTTP
import Foundation
import RealtimeProtocol

/// `realtime publish`: one event through the server's HTTP API, Pusher's signed REST API
/// (`POST /apps/{id}/events` with `{"name","channels","data"}`, or `POST /apps/{id}/room_events`
/// with `{"name","rooms","data"}`, and the `auth_*` query of `RESTSignature.signedParameters`).
struct PublishCommand: Sendable {
    /// How long the whole request may take, in seconds.
    static let timeout: TimeInterval = 10

    /// What to publish, and where.
    var options: PublishOptions

    /// The signed request: where to post, and what.
    struct Request: Sendable, Hashable {
        /// `{api}/apps/{id}/events?auth_key=…&auth_signature=…` (or `room_events`).
        var url: URL
        /// The JSON body.
        var body: [UInt8]
    }

    /// The signed request.
    ///
    /// - Parameter timestamp: `auth_timestamp`, seconds since 1970 (the server accepts 600 s
    ///   either side of its clock).
    /// - Returns: `POST {api}/apps/{id}/events?auth_key=…&auth_signature=…` (or `room_events`)
    ///   with the JSON body.
    /// - Throws: `PublishError.invalidAPIURL` when `--api` is not a usable base URL.
    func request(timestamp: Int) throws(PublishError) -> Request {
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
        return Request(url: url, body: Array(body.utf8))
    }

    /// Most bytes of the server's answer kept (the API answers `{}` or a short error).
    static let maxAnswerBytes = 1 << 20

    /// Sends the event and waits for the server's answer (the body of a 2xx response) or the
    /// reason it failed, on the calling thread. Through libcurl (`CurlHTTP`), whose deadline
    /// covers the whole request, not URLSession.
    ///
    /// - Returns: the body text or a `PublishError`.
    func send() -> Result<String, PublishError> {
        let request: Request
        do {
            request = try self.request(timestamp: Int(Date().timeIntervalSince1970))
        } catch {
            return .failure(error)
        }
        let result = CurlHTTP.post(url: request.url.absoluteString, body: request.body,
                                   headers: ["Content-Type: application/json", "Expect:"],
                                   timeout: .seconds(Self.timeout), maxResponseBytes: Self.maxAnswerBytes)
        return Self.outcome(result)
    }

    /// Turns what libcurl gave into the command's result.
    private static func outcome(_ result: Result<CurlHTTP.Answer, CurlHTTP.Failure>) -> Result<String, PublishError> {
        switch result {
        case .success(let answer):
            let body = String(decoding: answer.body, as: UTF8.self)
            guard (200..<300).contains(answer.status) else { return .failure(.rejected(status: answer.status, body: body)) }
            return .success(body)
        case .failure(.timedOut):
            return .failure(.timedOut(seconds: Int(timeout)))
        case .failure(.tooLarge(let limit)):
            return .failure(.connectionFailed("an answer longer than \(limit) bytes"))
        case .failure(.transport(let reason)):
            return .failure(.connectionFailed(reason))
        }
    }

    /// `text` with every byte outside RFC 3986's unreserved set percent-encoded.
    private static func percentEncoded(_ text: String) -> String {
        var unreserved = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789")
        unreserved.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: unreserved) ?? text
    }
}
