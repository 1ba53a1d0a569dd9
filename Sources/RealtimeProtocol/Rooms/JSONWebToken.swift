import Foundation

/// Compact JSON Web Tokens signed with HMAC-SHA256 (RFC 7519, JWS RFC 7515, algorithm `HS256`
/// from RFC 7518 §3.2): what room tokens are, so that an app backend in any language can mint
/// them with a common library (PyJWT, jsonwebtoken, firebase/php-jwt).
///
/// Only `HS256` is accepted: a token whose header names another algorithm (`none` included)
/// is refused, and no part of a token is parsed before its signature has verified.
public enum JSONWebToken {
    /// Largest token accepted, in bytes: a token is parsed before it is trusted.
    public static let maxLength = 8 * 1024

    /// Why a token is refused.
    public enum Failure: Error, Hashable, Sendable, CustomStringConvertible {
        /// Not three base64url parts, not JSON (or JSON repeating a member name, or nested
        /// deeper than `StrictJSON.maxDepth`), an algorithm other than HS256, or too long.
        case malformed(String)
        /// The signature is not the HMAC of the token under the key.
        case badSignature

        /// A human-readable explanation.
        public var description: String {
            switch self {
            case .malformed(let why): return "malformed token: \(why)"
            case .badSignature: return "the token's signature does not verify"
            }
        }
    }

    /// Signs `claims` as a compact JWS: `base64url(header).base64url(claims).base64url(mac)`.
    ///
    /// - Parameters:
    ///   - claims: the payload; encoded with sorted keys.
    ///   - secret: the HMAC key, as UTF-8 (the app secret).
    /// - Returns: the token text.
    /// - Throws: `EncodingError` when the claims cannot be encoded.
    public static func sign(_ claims: some Encodable, secret: String) throws -> String {
        let header = base64URL(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let payload = base64URL(Array(try RealtimeMessage.jsonText(claims).utf8))
        let input = "\(header).\(payload)"
        return "\(input).\(base64URL(Crypto.hmacSHA256(key: secret, message: input)))"
    }

    /// Verifies a token's signature and decodes its claims.
    ///
    /// The signature is checked first, over the token's raw bytes: nothing of a token is
    /// parsed before it is known to come from the secret's holder, so a forged token costs one
    /// HMAC whatever its header holds. Then the header must be a JSON object naming `HS256`,
    /// and the claims must decode; JSON that repeats a member name is refused (RFC 7519 §4),
    /// as is JSON nested deeper than `StrictJSON.maxDepth`.
    ///
    /// - Parameters:
    ///   - token: the compact token.
    ///   - secret: the HMAC key, as UTF-8.
    ///   - type: the claims' type.
    /// - Returns: the decoded claims (their times are not checked here).
    /// - Throws: `Failure.malformed` or `.badSignature`.
    public static func verify<Claims: Decodable>(_ token: String, secret: String, as type: Claims.Type) throws(Failure) -> Claims {
        guard token.utf8.count <= maxLength else { throw .malformed("longer than \(maxLength) bytes") }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw .malformed("not three parts") }
        guard decodeBase64URL(parts[2]) != nil else { throw .malformed("signature is not base64url") }
        // Compared as text with the one canonical encoding of the expected MAC, so a token has
        // exactly one valid spelling (no unused low bits in its last character).
        let expected = base64URL(Crypto.hmacSHA256(key: secret, message: "\(parts[0]).\(parts[1])"))
        guard Crypto.constantTimeEqual(Array(parts[2].utf8), Array(expected.utf8)) else { throw .badSignature }
        guard let headerBytes = decodeBase64URL(parts[0]),
              let header = try? StrictJSON.decode([String: JSONValue].self, from: headerBytes) else {
            throw .malformed("header is not base64url JSON with unique member names")
        }
        guard header["alg"]?.string == "HS256" else { throw .malformed("algorithm is not HS256") }
        guard let payload = decodeBase64URL(parts[1]) else { throw .malformed("claims are not base64url") }
        do {
            return try StrictJSON.decode(Claims.self, from: payload)
        } catch {
            throw .malformed("claims do not decode: \(error)")
        }
    }

    /// Decodes a token's claims without checking its signature: for a client, which does not
    /// hold the secret and reads its own token's rule (`sealed`, `history`) only to know what to
    /// expect; the server verifies every token it is given (`verify`).
    ///
    /// - Parameters:
    ///   - token: the compact token.
    ///   - type: the claims' type.
    /// - Returns: the claims, or `nil` when the token is not three base64url parts whose middle
    ///   one decodes as `type`.
    public static func unverifiedClaims<Claims: Decodable>(_ token: String, as type: Claims.Type) -> Claims? {
        guard token.utf8.count <= maxLength else { return nil }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = decodeBase64URL(parts[1]) else { return nil }
        return try? StrictJSON.decode(Claims.self, from: payload)
    }

    /// base64url without padding (RFC 4648 §5).
    static func base64URL(_ bytes: [UInt8]) -> String {
        // Byte by byte: NSString's replacingOccurrences cost more than the HMAC on every join.
        var encoded = Array(Data(bytes).base64EncodedData())
        while encoded.last == UInt8(ascii: "=") { encoded.removeLast() }
        for index in encoded.indices {
            if encoded[index] == UInt8(ascii: "+") { encoded[index] = UInt8(ascii: "-") } else if encoded[index] == UInt8(ascii: "/") { encoded[index] = UInt8(ascii: "_") }
        }
        return String(decoding: encoded, as: UTF8.self)
    }

    /// Decodes base64url without padding (RFC 7515 §2): one encoding per value, so `=`, `+`
    /// and `/` are refused.
    static func decodeBase64URL(_ text: Substring) -> [UInt8]? {
        guard text.utf8.allSatisfy({ byte in
            (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                || byte == UInt8(ascii: "-") || byte == UInt8(ascii: "_")
        }), text.utf8.count % 4 != 1 else { return nil }
        var standard = text.utf8.map { $0 == UInt8(ascii: "-") ? UInt8(ascii: "+") : $0 == UInt8(ascii: "_") ? UInt8(ascii: "/") : $0 }
        while standard.count % 4 != 0 { standard.append(UInt8(ascii: "=")) }
        return Data(base64Encoded: Data(standard)).map(Array.init)
    }
}
