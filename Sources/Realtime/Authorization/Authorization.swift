import Dispatch
import CurlHTTP
import Foundation
import SystemSupport
import RealtimeProtocol

/// One subscription to authorise: the connection's socket id and the channel (the fields the
/// auth endpoint receives as a form POST, realtime-connection-lifecycle seed "What happens to
/// channels").
public struct ChannelAuthorizationRequest: Sendable, Hashable {
    /// The current connection's socket id: the signature covers it, so every new connection
    /// needs a new authorisation.
    public var socketID: String
    /// The channel name (`private-…`, `presence-…`, `private-encrypted-…`).
    public var channelName: String

    /// Creates a request.
    public init(socketID: String, channelName: String) {
        self.socketID = socketID
        self.channelName = channelName
    }
}

/// Why an authorisation or a signin failed. Channel authorisation failures arrive on the
/// channel as `<ns>:subscription_error`; signin failures through `onSigninError`. The
/// connection stays up either way.
public enum AuthorizationError: Error, Sendable, Hashable, CustomStringConvertible {
    /// No auth endpoint and no authoriser closure are configured for a channel that needs one.
    case notConfigured(String)
    /// The endpoint answered a status outside 200–299 (403 refused, 500 broken …), with the
    /// start of its body.
    case httpStatus(Int, body: String)
    /// The answer is not the expected JSON (`{"auth": …}`).
    case invalidResponse(String)
    /// No answer within `Options.authTimeout`.
    case timedOut(Duration)
    /// The request could not be sent (connection refused, DNS …).
    case transport(String)
    /// The authoriser closure threw.
    case authorizer(String)
    /// The server refused the signin (`<ns>:error` 4009 after `<ns>:signin`).
    case refusedByServer(code: Int?, message: String)

    /// The HTTP status for `httpStatus`, nil otherwise.
    public var status: Int? { if case .httpStatus(let status, _) = self { status } else { nil } }

    /// The explanation, as the seed's `onSigninError { error in print(error.message) }` reads it
    /// (the same text as `description`).
    public var message: String { description }

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .notConfigured(let what): return "no \(what) is configured"
        case .httpStatus(let status, let body): return "the auth endpoint answered \(status): \(body)"
        case .invalidResponse(let why): return "the auth endpoint's answer is not valid: \(why)"
        case .timedOut(let limit): return "no answer from the auth endpoint within \(limit)"
        case .transport(let why): return "the auth endpoint cannot be reached: \(why)"
        case .authorizer(let why): return "the authoriser failed: \(why)"
        case .refusedByServer(let code, let message): return "the server refused the signin (\(code.map(String.init) ?? "no code")): \(message)"
        }
    }
}

/// Authorises one private, presence or encrypted channel subscription: the alternative to an
/// auth endpoint (for example, a call into the app's own backend client). Throw to refuse; the
/// channel then gets `<ns>:subscription_error`.
public typealias ChannelAuthorizer = @Sendable (ChannelAuthorizationRequest) async throws -> ChannelAuthorizationResponse

/// Answers a batched room auth request (`Options.roomAuthorizer`): the alternative to a room
/// auth endpoint, given the room names (at most 100), answering per room as the route would
/// (docs/rooms-protocol.md "Auth route"). Throw `AuthorizationError.httpStatus(403, …)` to
/// refuse every room of the request, `.httpStatus(401, …)` to have it asked once more.
public typealias RoomAuthorizer = @Sendable (_ rooms: [String]) async throws -> RoomAuthorizationResponse

/// Authenticates the user for `signin()` on a connection with the given socket id: the
/// alternative to a user-auth endpoint. Throw to refuse; `onSigninError` is told.
public typealias UserAuthenticator = @Sendable (_ socketID: String) async throws -> UserAuthenticationResponse

/// POSTs to an auth endpoint through libcurl (`CurlHTTP`, on a thread of its own per request):
/// Pusher's `authEndpoint` convention (`application/x-www-form-urlencoded` body, JSON answer),
/// and the room auth route's JSON body. URLSession was used first: on Linux it spun a core for
/// as long as an answer did not come, and could not be cancelled safely (a hostile auth route
/// kept the client at 92 % CPU).
enum AuthEndpoint {
    /// The longest answer read (1 MiB): a room answer for 100 rooms is a few tens of KiB.
    static let maxResponseBytes = 1 << 20

    /// POSTs `fields` to `url` with `headers`, and decodes the JSON answer as `T`.
    ///
    /// - Throws: `AuthorizationError.httpStatus`, `.invalidResponse`, `.transport`,
    ///   `.timedOut` when no answer came within `timeout`.
    static func post<T: Decodable>(_ url: URL, fields: [(String, String)], headers: [String: String], timeout: Duration, as type: T.Type) async throws(AuthorizationError) -> T {
        let body = Data(fields.map { "\(formEncode($0.0))=\(formEncode($0.1))" }.joined(separator: "&").utf8)
        return try await post(url, body: body, contentType: "application/x-www-form-urlencoded", headers: headers, timeout: timeout, as: type)
    }

    /// POSTs `body` to `url` as `contentType` with `headers`, and decodes the JSON answer as `T`.
    ///
    /// - Throws: as the form POST; `.invalidResponse` for an answer over `maxResponseBytes`.
    static func post<T: Decodable>(_ url: URL, body: Data, contentType: String, headers: [String: String], timeout: Duration, as type: T.Type) async throws(AuthorizationError) -> T {
        var lines = ["Content-Type: \(contentType)", "Accept: application/json"]
        for (name, value) in headers.sorted(by: { $0.key < $1.key }) {
            // A header line break would start another header: refused, never sent.
            guard !name.contains(where: \.isNewline), !value.contains(where: \.isNewline) else {
                throw .notConfigured("a header without line breaks (\(name.prefix(40)))")
            }
            lines.append("\(name): \(value)")
        }
        let outcome = await send(url: url.absoluteString, body: Array(body), headers: lines, timeout: timeout)
        let answer: CurlHTTP.Answer
        switch outcome {
        case .success(let received): answer = received
        case .failure(.timedOut): throw .timedOut(timeout)
        case .failure(.tooLarge(let limit)): throw .invalidResponse("an answer longer than \(limit) bytes")
        case .failure(.transport(let message)): throw .transport(message)
        }
        let text = String(decoding: answer.body.prefix(200), as: UTF8.self)
        guard (200...299).contains(answer.status) else { throw .httpStatus(answer.status, body: text) }
        do {
            return try JSONDecoder().decode(T.self, from: Data(answer.body))
        } catch {
            throw .invalidResponse("not a JSON object with the expected fields: \(text)")
        }
    }

    /// Runs the blocking request on a thread of its own and resumes when libcurl is done (its
    /// deadline is the request's own: nothing is left behind).
    private static func send(url: String, body: [UInt8], headers: [String], timeout: Duration) async -> Result<CurlHTTP.Answer, CurlHTTP.Failure> {
        switch await onDetachedThread({ CurlHTTP.post(url: url, body: body, headers: headers, timeout: timeout, maxResponseBytes: maxResponseBytes) }) {
        case .success(let outcome): return outcome
        case .failure(let error): return .failure(.transport("cannot start a thread (error \(error.errno))"))
        }
    }

    /// `application/x-www-form-urlencoded` encoding of one name or value (WHATWG URL
    /// standard: unreserved characters kept, everything else percent-encoded).
    static func formEncode(_ text: String) -> String {
        let allowed = CharacterSet(charactersIn: "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._*")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
