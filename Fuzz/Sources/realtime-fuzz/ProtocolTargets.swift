import Foundation
@testable import RealtimeProtocol

/// `RealtimeMessage(parsing:)` (the flat-JSON scanner every frame goes through, on both sides).
/// Invariants: an accepted frame is JSON by RFC 8259's grammar (the scanner is no more lenient
/// than `StrictJSON`), and the message re-encoded reads back as the same message.
let protocolMessageTarget = FuzzTarget(name: "protocol-message", summary: "every text frame, client and server: RealtimeMessage(parsing:)") { bytes in
    let text = String(decoding: bytes, as: UTF8.self)
    guard let message = try? RealtimeMessage(parsing: text) else { return }
    require(StrictJSON.isValid(text), "the frame scanner accepted text that is not JSON: \(text.debugDescription)")
    let again = try? RealtimeMessage(parsing: message.text)
    require(again == message, "\(message) re-encoded as \(message.text.debugDescription) reads back as \(String(describing: again))")
}

/// `StrictJSON`: `isValid`, `parse` and the room-event fast path `roomEvent`, against each other.
let strictJSONTarget = FuzzTarget(name: "strict-json", summary: "room event data on the server, every room event on the client: StrictJSON") { bytes in
    let text = String(decoding: bytes, as: UTF8.self)
    let value = StrictJSON.parse(text)
    require(StrictJSON.isValid(text) == (value != nil), "isValid and parse disagree on \(text.debugDescription)")
    if let value, value.isFinite {
        // JSONEncoder writes what StrictJSON reads: the same value back.
        let encoded = (try? JSONEncoder().encode(value)).map { String(decoding: $0, as: UTF8.self) }
        require(encoded.flatMap(StrictJSON.parse) == value, "\(value) encoded as \(String(describing: encoded)) does not read back")
    }
    guard let fields = StrictJSON.roomEvent(text) else { return }
    // The fast path reads a subset of what parse reads, with the same values.
    require(value?["event"]?.string == fields.event, "roomEvent's event \(fields.event.debugDescription) differs in \(text.debugDescription)")
    require(StrictJSON.parse(fields.data) == (value?["data"] ?? .null), "roomEvent's data \(fields.data.debugDescription) differs in \(text.debugDescription)")
    if let meta = fields.meta {
        require(value?["meta"]?["id"]?.number == Double(meta.id) && meta.id >= 1, "roomEvent's meta.id differs in \(text.debugDescription)")
        require(value?["meta"]?["from"]?.string == meta.from, "roomEvent's meta.from differs in \(text.debugDescription)")
    }
}

/// `JSONValue`'s `Decodable` (room data decoded with `JSONDecoder`, tokens' `info`): the value
/// encoded and decoded again is the same value.
let jsonValueTarget = FuzzTarget(name: "json-value", summary: "JSONValue through JSONDecoder (token info, auth answers)") { bytes in
    guard let value = try? JSONDecoder().decode(JSONValue.self, from: Data(bytes)), value.isFinite else { return }
    let again = (try? JSONEncoder().encode(value)).flatMap { try? JSONDecoder().decode(JSONValue.self, from: $0) }
    require(again == value, "\(value) does not survive JSONEncoder and JSONDecoder")
}

/// `PresenceMember(parsing:)` (every `member_added` and `channel_data`, the client's O(1) path)
/// against the `Decodable` reading it replaced: whatever the fast path accepts, the reference
/// reads the same way.
let presenceMemberTarget = FuzzTarget(name: "presence-member", summary: "member_added and channel_data: PresenceMember(parsing:)") { bytes in
    let text = String(decoding: bytes, as: UTF8.self)
    guard let member = PresenceMember(parsing: text) else { return }
    let reference = try? JSONDecoder().decode(PresenceMember.self, from: Data(text.utf8))
    require(reference == member, "PresenceMember(parsing:) read \(member), JSONDecoder \(String(describing: reference)) from \(text.debugDescription)")
}

/// Room tokens (JWT HS256, RFC 7519) and the auth endpoint's answers. The first byte picks the
/// form: a token as sent; claims bytes signed with the right secret (so the claims decoder is
/// reached); an auth answer's JSON; a channel signature; base64url round trips; header bytes
/// signed with the right secret (so the header's parser is reached).
let tokensTarget = FuzzTarget(name: "tokens", summary: "room tokens (JWT), auth endpoint answers, channel signatures") { bytes in
    var reader = FuzzReader(bytes)
    let form = reader.byte() % 6
    let rest = reader.chunk()
    let secret = "app-secret"
    switch form {
    case 0:
        let token = String(decoding: rest, as: UTF8.self)
        do throws(JSONWebToken.Failure) {
            let claims = try JSONWebToken.verify(token, secret: secret, as: RoomClaims.self)
            fatalError("a token not signed by the harness verified: \(claims)")
        } catch .malformed(let why) {
            // Nothing of an unsigned token is parsed: only its shape is refused before the MAC.
            require(why.hasPrefix("longer than") || why == "not three parts" || why == "signature is not base64url",
                    "an unsigned token was parsed past its signature: \(why)")
        } catch {}
        _ = JSONWebToken.unverifiedClaims(token, as: RoomClaims.self)
    case 1:
        let header = JSONWebToken.base64URL(Array(#"{"alg":"HS256","typ":"JWT"}"#.utf8))
        let input = "\(header).\(JSONWebToken.base64URL(Array(rest)))"
        let token = "\(input).\(JSONWebToken.base64URL(Crypto.hmacSHA256(key: secret, message: input)))"
        guard let claims = try? JSONWebToken.verify(token, secret: secret, as: RoomClaims.self) else { return }
        require(rest.withUnsafeBufferPointer { StrictJSON.refusal(of: $0) } == nil, "claims with a repeated name or past 64 levels verified: \(claims)")
        require(JSONWebToken.unverifiedClaims(token, as: RoomClaims.self) == claims, "unverifiedClaims differs from verify for \(claims)")
        // Claims a backend signs are read back as signed.
        if let resigned = try? JSONWebToken.sign(claims, secret: secret) {
            require((try? JSONWebToken.verify(resigned, secret: secret, as: RoomClaims.self)) == claims, "\(claims) re-signed does not verify")
        }
    case 2:
        let data = Data(rest)
        _ = try? JSONDecoder().decode(RoomAuthorizationResponse.self, from: data)
        _ = try? JSONDecoder().decode(ChannelAuthorizationResponse.self, from: data)
        _ = try? JSONDecoder().decode(UserAuthenticationResponse.self, from: data)
        _ = try? JSONDecoder().decode(RoomConfiguration.self, from: data)
    case 3:
        let auth = String(decoding: rest, as: UTF8.self)
        let signer = ChannelAuthorization(key: "app-key", secret: secret)
        require(!signer.verify(auth, signs: "1.2:private-a"), "an auth not made by the signer verified: \(auth.debugDescription)")
    case 4:
        let bytes = Array(rest)
        require(JSONWebToken.decodeBase64URL(Substring(JSONWebToken.base64URL(bytes))) == bytes, "base64url does not round-trip \(bytes)")
        _ = JSONWebToken.decodeBase64URL(Substring(String(decoding: rest, as: UTF8.self)))
    default:
        let claims = JSONWebToken.base64URL(Array(#"{"room":"r","exp":2000000000}"#.utf8))
        let input = "\(JSONWebToken.base64URL(Array(rest))).\(claims)"
        let token = "\(input).\(JSONWebToken.base64URL(Crypto.hmacSHA256(key: secret, message: input)))"
        guard (try? JSONWebToken.verify(token, secret: secret, as: RoomClaims.self)) != nil else { return }
        let header = Array(rest)
        require(header.withUnsafeBufferPointer { StrictJSON.refusal(of: $0) } == nil, "a header with a repeated name or past 64 levels verified")
        require(StrictJSON.parse(String(decoding: header, as: UTF8.self))?["alg"]?.string == "HS256", "a header not naming HS256 verified")
    }
}

extension JSONValue {
    /// No infinite number inside (RFC 8259 has none; JSONEncoder refuses them).
    var isFinite: Bool {
        switch self {
        case .number(let number): number.isFinite
        case .array(let items): items.allSatisfy(\.isFinite)
        case .object(let members): members.values.allSatisfy(\.isFinite)
        default: true
        }
    }
}
