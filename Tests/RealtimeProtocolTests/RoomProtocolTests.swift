import Foundation
import RealtimeProtocol
import Testing

@Suite("Room protocol values")
struct RoomProtocolTests {
    @Test("a signed token verifies and decodes; a tampered one, another key and other algorithms are refused")
    func tokens() throws {
        let claims = RoomClaims(subject: "ann", room: "order:1", expiresAt: 2_000_000_000, issuedAt: 1_900_000_000, rule: RoomRule(history: 20, presence: true))
        let token = try JSONWebToken.sign(claims, secret: "s")
        #expect(try JSONWebToken.verify(token, secret: "s", as: RoomClaims.self) == claims)
        #expect(throws: JSONWebToken.Failure.badSignature) { try JSONWebToken.verify(token, secret: "t", as: RoomClaims.self) }
        var parts = token.split(separator: ".").map(String.init)
        let forged = RoomClaims(subject: "mallory", room: "order:1", expiresAt: 2_000_000_000, rule: RoomRule(history: 20))
        parts[1] = String(try JSONWebToken.sign(forged, secret: "x").split(separator: ".")[1])
        #expect(throws: JSONWebToken.Failure.badSignature) { try JSONWebToken.verify(parts.joined(separator: "."), secret: "s", as: RoomClaims.self) }
        for header in [#"{"alg":"none"}"#, #"{"alg":"HS512"}"#, #"{"typ":"JWT"}"#] {
            let encoded = Data(header.utf8).base64EncodedString().replacingOccurrences(of: "=", with: "")
            #expect(throws: JSONWebToken.Failure.self) { try JSONWebToken.verify("\(encoded).\(parts[1]).\(parts[2])", secret: "s", as: RoomClaims.self) }
        }
        #expect(throws: JSONWebToken.Failure.self) { try JSONWebToken.verify(String(repeating: "a", count: 9000), secret: "s", as: RoomClaims.self) }
        #expect(throws: JSONWebToken.Failure.self) { try JSONWebToken.verify("a.b", secret: "s", as: RoomClaims.self) }
        // One spelling per token: the signature's last character with other unused low bits,
        // padding, or standard base64 characters are refused.
        let signature = parts[2]
        let last = signature.last!
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
        let sibling = alphabet[(alphabet.firstIndex(of: last)! ^ 1)]
        let original = try JSONWebToken.sign(claims, secret: "s").split(separator: ".").map(String.init)
        for variant in [String(original[2].dropLast()) + String(sibling), original[2] + "=", original[2].replacingOccurrences(of: "-", with: "+")] where variant != original[2] {
            #expect(throws: JSONWebToken.Failure.self) { try JSONWebToken.verify("\(original[0]).\(original[1]).\(variant)", secret: "s", as: RoomClaims.self) }
        }
        _ = signature
    }

    @Test("a token's claims: numeric sub and fractional exp are read as PyJWT may write them; absent rule keys take defaults")
    func claimsDecoding() throws {
        let json = #"{"sub":42,"room":"order:1","exp":1900000000.5,"rule":{"history":3}}"#
        let claims = try JSONDecoder().decode(RoomClaims.self, from: Data(json.utf8))
        #expect(claims.subject == "42" && claims.expiresAt == 1_900_000_000)
        #expect(claims.rule == RoomRule(history: 3))
        #expect(claims.rule?.span == 1800 && claims.rule?.presence == false)
        #expect(throws: DecodingError.self) { try JSONDecoder().decode(RoomClaims.self, from: Data(#"{"room":"x","exp":1e300}"#.utf8)) }
    }

    @Test("room names match patterns segment by segment", arguments: [
        ("order:1042", "order:{id}", ["id": "1042"]),
        ("chat:34:42", "chat:{a}:{b}", ["a": "34", "b": "42"]),
        ("shop", "shop", [:]),
        ("user-7.feed", "user-{id}.feed", ["id": "7"]),
        ("order:", "order:{id}", nil),
        ("order:1:2", "order:{id}", nil),
        ("order:1042", "chat:{id}", nil),
        ("shop2", "shop", nil),
        ("bad room", "bad room", nil),
    ] as [(String, String, [String: String]?)])
    func patterns(name: String, pattern: String, expected: [String: String]?) {
        #expect(RoomName.match(name, pattern: pattern) == expected)
    }

    @Test("patterns with unclosed, empty, repeated or adjacent placeholders are invalid", arguments: [
        "order:{id", "order:{}", "a:{x}:{x}", "a:{x}{y}", "", "has space:{id}",
    ])
    func invalidPatterns(_ pattern: String) {
        #expect(!RoomName.isValidPattern(pattern))
    }

    @Test("a kept record's JSON is what JSONSerialization reads back, with data embedded as its JSON text")
    func recordJSON() throws {
        let record = RoomEventRecord(id: 7, at: 1_764_579_200_123, event: "up\"dated\n", data: #"{"a":[1,2.5,"x"]}"#, from: "ann")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(record.json(replayed: true).utf8)) as? [String: Any])
        #expect(object["event"] as? String == "up\"dated\n")
        let meta = try #require(object["meta"] as? [String: Any])
        #expect(meta["id"] as? Int == 7 && meta["at"] as? Int == 1_764_579_200_123 && meta["from"] as? String == "ann" && meta["replayed"] as? Bool == true)
        #expect(((object["data"] as? [String: Any])?["a"] as? [Any])?.count == 3)
        let anonymous = RoomEventRecord(id: 1, at: 0, event: "e", data: "null", from: nil).json()
        #expect(anonymous == #"{"data":null,"event":"e","meta":{"at":0,"from":null,"id":1}}"#)
    }

    @Test("event names: the six reserved names, namespaces and control characters are refused")
    func eventNames() {
        for name in RoomSystemEvent.reserved { #expect(!RoomSystemEvent.isValidEventName(name)) }
        #expect(!RoomSystemEvent.isValidEventName("bird:join"))
        #expect(!RoomSystemEvent.isValidEventName("a\u{1}b"))
        #expect(!RoomSystemEvent.isValidEventName(""))
        #expect(!RoomSystemEvent.isValidEventName(String(repeating: "x", count: 201)))
        #expect(RoomSystemEvent.isValidEventName("updated"))
        #expect(RoomSystemEvent.isValidEventName("client-typing"))
    }
}
