import Foundation
import RealtimeProtocol
import WebSocket

/// The browser client (`Clients/javascript`), served by the server it talks to:
/// `GET /client/realtime.js` and the ES modules it imports, so a page of the app loads the
/// client from its realtime server with no bundler and no package registry.
///
/// The files are embedded in the server at build time (the `EmbedClient` plugin writes
/// `ClientModule+Files.swift` from `Clients/javascript/src` and its `package.json`). Each
/// answer carries the client's version (`x-bird-client-version`), an `ETag` of its content
/// (a matching `If-None-Match`, weak or strong, is answered 304, RFC 9110 §13.1.2), a cache lifetime, and
/// `Access-Control-Allow-Origin: *`: a page loads a module script from another origin only
/// with CORS (HTML's "fetch a single module script").
public enum ClientModule {
    /// The path prefix the files are served under.
    public static let prefix = "/client/"
    /// How long a browser may use a file without asking again, in seconds.
    public static let maxAge = 300

    /// The answer to a `GET` or `HEAD` of a path under `prefix`, or `nil` for another path.
    ///
    /// - Parameters:
    ///   - path: the request's path.
    ///   - ifNoneMatch: the request's `If-None-Match` field, if any.
    /// - Returns: 200 with the file, 304 when `ifNoneMatch` names its ETag, 404 for a file
    ///   that is not part of the client; `nil` when `path` is not under `prefix`.
    public static func response(path: String, ifNoneMatch: String?) -> HTTPServerResponse? {
        guard path.hasPrefix(prefix) else { return nil }
        let name = String(path.dropFirst(prefix.count))
        guard let file = served[name] else {
            return HTTPServerResponse(status: 404, text: "no such file of the client: \(name.prefix(80))")
        }
        var headers = [
            HTTPHeader(name: "content-type", value: "text/javascript; charset=utf-8"),
            HTTPHeader(name: "cache-control", value: "public, max-age=\(maxAge)"),
            HTTPHeader(name: "etag", value: file.etag),
            HTTPHeader(name: "x-bird-client-version", value: version),
            HTTPHeader(name: "access-control-allow-origin", value: "*"),
        ]
        // Weak comparison (RFC 9110 §13.1.2): a proxy that compressed the file may have weakened
        // its tag to W/"…".
        let matches = ifNoneMatch?.split(separator: ",").contains { member in
            let tag = member.trimmingCharacters(in: .whitespaces)
            return tag == "*" || (tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag) == file.etag
        }
        if matches == true {
            return HTTPServerResponse(status: 304, headers: headers)
        }
        headers.append(HTTPHeader(name: "x-content-type-options", value: "nosniff"))
        return HTTPServerResponse(status: 200, headers: headers, body: file.body)
    }

    /// The embedded files with their ETags, computed once.
    private static let served: [String: (body: [UInt8], etag: String)] = files.mapValues { text in
        let body = Array(text.utf8)
        let digest = Crypto.sha256(body).prefix(12).map { String(format: "%02x", $0) }.joined()
        return (body, "\"\(version)-\(digest)\"")
    }
}
