import Foundation
import Glibc
import RealtimeProtocol
import TestSupport
import Testing

/// Tokens and JSON as a hostile peer writes them (issue 30, findings 1 and 9): deep nesting
/// costs one HMAC when unsigned and a linear walk when signed, and a repeated member name is
/// refused wherever peer JSON is decoded.
@Suite("Hostile tokens and JSON")
struct HostileTokenTests {
    static func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
    }

    /// A token with this header and claims text, signed with `secret`, or with a made-up
    /// signature when `secret` is nil (a forgery: the attacker has only the public key).
    static func token(header: String, claims: String, secret: String?) -> String {
        let input = "\(base64URL(header)).\(base64URL(claims))"
        guard let secret else { return "\(input).\(String(repeating: "A", count: 43))" }
        let mac = Data(Crypto.hmacSHA256(key: secret, message: input)).base64EncodedString()
            .replacingOccurrences(of: "=", with: "").replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
        return "\(input).\(mac)"
    }

    static let claims = #"{"room":"order:1","exp":2000000000}"#
    static let deepHeader = #"{"alg":"HS256","x":"# + String(repeating: "[", count: 511) + String(repeating: "]", count: 511) + "}"

    /// The least CPU time this thread spent on `body` over `runs` runs, in milliseconds.
    static func threadCPU(runs: Int = 5, _ body: () -> Void) -> Double {
        var best = Double.infinity
        for _ in 0..<runs {
            var start = timespec()
            var end = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &start)
            body()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &end)
            best = min(best, Double(end.tv_sec - start.tv_sec) * 1000 + Double(end.tv_nsec - start.tv_nsec) / 1_000_000)
        }
        return best
    }

    @Test("a forged token with a header 511 arrays deep is refused as badly signed in under 1 ms of CPU: nothing unsigned is parsed")
    func forgedDeepHeader() {
        let forged = Self.token(header: Self.deepHeader, claims: Self.claims, secret: nil)
        #expect(forged.utf8.count < 1600)
        #expect(throws: JSONWebToken.Failure.badSignature) { try JSONWebToken.verify(forged, secret: "s", as: RoomClaims.self) }
        let cpu = Self.threadCPU { _ = try? JSONWebToken.verify(forged, secret: "s", as: RoomClaims.self) }
        #expect(cpu < Double(Sanitizers.slowdown), "verifying the forgery took \(cpu) ms of CPU")
    }

    @Test("a signed token whose header or info nests past 64 levels is refused as malformed, in under 1 ms of CPU", arguments: [
        (deepHeader, claims),
        (#"{"alg":"HS256"}"#, #"{"room":"order:1","exp":2000000000,"info":"# + String(repeating: "[", count: 511) + String(repeating: "]", count: 511) + "}"),
        (#"{"alg":"HS256"}"#, #"{"room":"order:1","exp":2000000000,"rule":{"history":1},"info":"# + String(repeating: #"{"a":"#, count: 300) + "1" + String(repeating: "}", count: 300) + "}"),
    ])
    func signedDeepValues(header: String, claims: String) {
        let token = Self.token(header: header, claims: claims, secret: "s")
        #expect(throws: JSONWebToken.Failure.self) { try JSONWebToken.verify(token, secret: "s", as: RoomClaims.self) }
        do {
            _ = try JSONWebToken.verify(token, secret: "s", as: RoomClaims.self)
        } catch {
            guard case .malformed = error else { Issue.record("expected malformed, got \(error)"); return }
        }
        let cpu = Self.threadCPU { _ = try? JSONWebToken.verify(token, secret: "s", as: RoomClaims.self) }
        #expect(cpu < Double(Sanitizers.slowdown), "refusing took \(cpu) ms of CPU")
    }

    @Test("a signed token whose info is 64 levels deep, the most allowed, still verifies")
    func deepestAllowedInfo() throws {
        // The claims object is level 1, `info` levels 2 to 64.
        let info = String(repeating: "[", count: 63) + String(repeating: "]", count: 63)
        let token = Self.token(header: #"{"alg":"HS256"}"#, claims: #"{"room":"order:1","exp":2000000000,"info":\#(info)}"#, secret: "s")
        let verified = try JSONWebToken.verify(token, secret: "s", as: RoomClaims.self)
        var depth = 0
        var value = verified.info
        while case .array(let elements)? = value {
            depth += 1
            value = elements.first
        }
        #expect(depth == 63)
    }

    @Test("a token repeating a member name is refused, in its header or its claims, however the name is escaped (RFC 7519 §4)", arguments: [
        (#"{"alg":"HS256","alg":"none"}"#, claims, false),
        (#"{"alg":"none","alg":"HS256"}"#, claims, false),
        (#"{"alg":"HS256"}"#, #"{"room":"order:1","room":"order:2","exp":2000000000}"#, true),
        (#"{"alg":"HS256"}"#, #"{"room":"order:1","r\u006fom":"order:2","exp":2000000000}"#, true),
        (#"{"alg":"HS256"}"#, #"{"room":"order:1","exp":2000000000,"rule":{"history":1,"history":5}}"#, true),
    ])
    func duplicateNames(header: String, claims: String, inClaims: Bool) {
        let token = Self.token(header: header, claims: claims, secret: "s")
        #expect(throws: JSONWebToken.Failure.self) { try JSONWebToken.verify(token, secret: "s", as: RoomClaims.self) }
        // A client reads its own token's claims, never its header.
        #expect((JSONWebToken.unverifiedClaims(token, as: RoomClaims.self) == nil) == inClaims)
    }

    @Test("StrictJSON.decode names what it refuses: a repeated name, depth past 64, text that is not JSON, a wrong type")
    func decodeRefusals() throws {
        func failure(_ text: String) -> StrictJSON.DecodeFailure? {
            do {
                _ = try StrictJSON.decode([String: JSONValue].self, from: text.utf8)
                return nil
            } catch {
                return error
            }
        }
        #expect(failure(#"{"a":1,"\u0061":2}"#) == .duplicateName("a"))
        #expect(failure(#"{"a":[{"b":1,"b":1}]}"#) == .duplicateName("b"))
        #expect(failure(#"{"a":1,"b":{"a":1}}"#) == nil)
        #expect(failure(#"{"a":"# + String(repeating: "[", count: 63) + String(repeating: "]", count: 63) + "}") == nil)
        #expect(failure(#"{"a":"# + String(repeating: "[", count: 64) + String(repeating: "]", count: 64) + "}") == .notJSON)
        #expect(failure(#"{"a":1,}"#) == .notJSON)
        #expect(failure("[1]") != nil)
        guard case .mismatch? = failure("[1]") else { Issue.record("an array is not an object"); return }
    }

    @Test("JSONValue refuses a value nested past 64 levels from any decoder, so Foundation's quadratic walk stays bounded")
    func jsonValueDepth() throws {
        let deep = String(repeating: "[", count: 200) + String(repeating: "]", count: 200)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(JSONValue.self, from: Data(deep.utf8)) }
        let cpu = HostileTokenTests.threadCPU { _ = try? JSONDecoder().decode(JSONValue.self, from: Data(deep.utf8)) }
        #expect(cpu < Double(20 * Sanitizers.slowdown), "refusing took \(cpu) ms of CPU")
        let allowed = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
        #expect(throws: Never.self) { try JSONDecoder().decode(JSONValue.self, from: Data(allowed.utf8)) }
    }
}
