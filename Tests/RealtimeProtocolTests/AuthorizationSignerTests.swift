import Foundation
import RealtimeProtocol
import Testing

@Suite struct AuthorizationSignerTests {
    /// Pusher's published example app (DESIGN.md), with the master key 0x00…0x1f.
    static let masterKey = [UInt8](0..<32)
    let plain = AuthorizationSigner(key: "278d425bdf160c739803", secret: "7ad3773142a6692b25b8")
    let encrypted = try! AuthorizationSigner(key: "278d425bdf160c739803", secret: "7ad3773142a6692b25b8", encryptionMasterKey: AuthorizationSignerTests.masterKey)

    @Test("a private channel's auth equals Pusher's published vector")
    func privateChannel() throws {
        let answer = try plain.authorizeChannel(socketID: "1234.1234", channel: "private-foobar")
        #expect(answer == ChannelAuthorizationResponse(auth: "278d425bdf160c739803:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4"))
        #expect(try RealtimeMessage.jsonText(answer) == #"{"auth":"278d425bdf160c739803:58df8b0c36d6982b82c3ecf6b4662e34fe8c25bba48f5369f135bf843651c3a4"}"#)
    }

    @Test("a presence channel's answer carries the member as compact JSON and signs exactly that text")
    func presenceChannel() throws {
        let member = PresenceMember(userID: "10", userInfo: .object(["name": .string("Mr. Pusher")]))
        let answer = try plain.authorizeChannel(socketID: "1234.1234", channel: "presence-foobar", member: member)
        let channelData = try #require(answer.channelData)
        #expect(channelData == #"{"user_id":"10","user_info":{"name":"Mr. Pusher"}}"#)
        let verifier = ChannelAuthorization(key: plain.key, secret: "7ad3773142a6692b25b8")
        #expect(verifier.verify(answer.auth, signs: "1234.1234:presence-foobar:\(channelData)"))
        #expect(answer.sharedSecret == nil)
        let withoutInfo = try plain.authorizeChannel(socketID: "1.2", channel: "presence-x", member: PresenceMember(userID: "ana"))
        #expect(withoutInfo.channelData == #"{"user_id":"ana"}"#)
    }

    @Test("an encrypted channel's auth and shared secret equal the Python pusher library's (3.3.4) for the same inputs")
    func encryptedChannel() throws {
        let answer = try encrypted.authorizeChannel(socketID: "1234.1234", channel: "private-encrypted-foobar")
        #expect(answer.auth == "278d425bdf160c739803:e6a18892d037c5d5e76a2265df4f086ffc38631605530dfd214aa5bff495f533")
        #expect(answer.sharedSecret == "g3Au6SZ+UCU+IMfFsFva0rq+Gi4tzSHR6WCcWZbS9sY=")
        #expect(answer.channelData == nil)
        let secret = AuthorizationSigner.sharedSecret(channel: "private-encrypted-foobar", masterKey: Self.masterKey)
        #expect(Data(secret).base64EncodedString() == answer.sharedSecret)
        #expect(secret == Crypto.sha256(Array("private-encrypted-foobar".utf8) + Self.masterKey))
    }

    @Test("a signin's auth equals the Python pusher library's (3.3.4) over the same user data")
    func signin() throws {
        let userData = #"{"id": "10", "user_info": {"name": "Mr. Pusher"}}"#
        let answer = try plain.authenticateUser(socketID: "1234.1234", userData: userData)
        #expect(answer == UserAuthenticationResponse(auth: "278d425bdf160c739803:9ab024dac5964e1cc6c8255c57176eca46e7c1b260900d5db2ed2544d8390179", userData: userData))
        #expect(try RealtimeMessage.jsonText(answer).contains(#""user_data":"{\"id\": \"10\""#))
    }

    @Test("the master key may be given as base64, as Pusher hands it out")
    func base64MasterKey() throws {
        let signer = try AuthorizationSigner(key: plain.key, secret: "7ad3773142a6692b25b8", encryptionMasterKeyBase64: "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
        #expect(signer == encrypted)
        #expect(signer.supportsEncryptedChannels)
        #expect(!plain.supportsEncryptedChannels)
        #expect(throws: AuthorizationSignerError.invalidMasterKey(nil)) { try AuthorizationSigner(key: "k", secret: "s", encryptionMasterKeyBase64: "not base64!") }
        #expect(throws: AuthorizationSignerError.invalidMasterKey(3)) { try AuthorizationSigner(key: "k", secret: "s", encryptionMasterKeyBase64: "AAAA") }
        #expect(throws: AuthorizationSignerError.invalidMasterKey(31)) { try AuthorizationSigner(key: "k", secret: "s", encryptionMasterKey: [UInt8](repeating: 1, count: 31)) }
    }

    @Test("a payload the Python pusher library (3.3.4) encrypted opens with our shared secret")
    func opensPythonPayload() throws {
        // pusher.crypto.encrypt("private-encrypted-foobar", "hello", master key 0x00…0x1f, nonce 24 zero bytes)
        let payload = EncryptedPayload(nonce: "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA", ciphertext: "+EhuacN5oLAOzs4RAickWMrPZkXU")
        let key = AuthorizationSigner.sharedSecret(channel: "private-encrypted-foobar", masterKey: Self.masterKey)
        #expect(String(decoding: try SecretBox.open(payload, key: key), as: UTF8.self) == "hello")
        let otherChannel = AuthorizationSigner.sharedSecret(channel: "private-encrypted-other", masterKey: Self.masterKey)
        #expect(throws: SecretBoxError.authenticationFailed) { try SecretBox.open(payload, key: otherChannel) }
    }

    @Test("encrypt gives an EncryptedPayload's JSON that opens with the channel's shared secret, a fresh nonce each time")
    func encrypt() throws {
        let channel = "private-encrypted-orders"
        let text = try encrypted.encrypt(data: #"{"total":"12.50 €"}"#, channel: channel)
        let payload = try JSONDecoder().decode(EncryptedPayload.self, from: Data(text.utf8))
        let key = try #require(Data(base64Encoded: try encrypted.authorizeChannel(socketID: "1.1", channel: channel).sharedSecret ?? ""))
        #expect(String(decoding: try SecretBox.open(payload, key: Array(key)), as: UTF8.self) == #"{"total":"12.50 €"}"#)
        let again = try JSONDecoder().decode(EncryptedPayload.self, from: Data(try encrypted.encrypt(data: #"{"total":"12.50 €"}"#, channel: channel).utf8))
        #expect(again.nonce != payload.nonce)
    }

    @Test("what cannot be signed gives a typed error", arguments: [
        ("", "private-a", nil, AuthorizationSignerError.invalidSocketID("")),
        ("1234", "private-a", nil, .invalidSocketID("1234")),
        ("1.2.3", "private-a", nil, .invalidSocketID("1.2.3")),
        (".2", "private-a", nil, .invalidSocketID(".2")),
        ("1.", "private-a", nil, .invalidSocketID("1.")),
        ("a.2", "private-a", nil, .invalidSocketID("a.2")),
        ("1.2\n", "private-a", nil, .invalidSocketID("1.2\n")),
        ("١.٢", "private-a", nil, .invalidSocketID("١.٢")),
        ("1.2", "", nil, .invalidChannelName("")),
        ("1.2", "private-a b", nil, .invalidChannelName("private-a b")),
        ("1.2", "private-" + String(repeating: "x", count: 157), nil, .invalidChannelName("private-" + String(repeating: "x", count: 157))),
        ("1.2", "news", nil, .publicChannel("news")),
        ("1.2", "news", PresenceMember(userID: "u"), .publicChannel("news")),
        ("1.2", "presence-room", nil, .memberRequired("presence-room")),
        ("1.2", "presence-room", PresenceMember(userID: ""), .invalidMember("the user id is empty")),
        ("1.2", "private-a", PresenceMember(userID: "u"), .memberNotAllowed("private-a")),
        ("1.2", "private-encrypted-a", PresenceMember(userID: "u"), .memberNotAllowed("private-encrypted-a")),
        ("1.2", "private-encrypted-a", nil, .masterKeyRequired("private-encrypted-a")),
    ] as [(String, String, PresenceMember?, AuthorizationSignerError)])
    func channelRefusals(socketID: String, channel: String, member: PresenceMember?, error: AuthorizationSignerError) {
        #expect(throws: error) { try plain.authorizeChannel(socketID: socketID, channel: channel, member: member) }
        #expect(!error.description.isEmpty)
    }

    @Test("user data without a valid id is refused", arguments: [
        ("", "not a JSON object"), ("[]", "not a JSON object"), (#""id""#, "not a JSON object"),
        (#"{"name":"x"}"#, #"no "id""#), (#"{"id":10}"#, #""id" is not a string"#), (#"{"id":null}"#, #""id" is not a string"#),
        (#"{"id":""}"#, #""id" must be 1 to 200 characters of A-Z a-z 0-9 _ - = @ , . ;"#),
        (#"{"id":"a b"}"#, #""id" must be 1 to 200 characters of A-Z a-z 0-9 _ - = @ , . ;"#),
    ])
    func userRefusals(userData: String, why: String) {
        #expect(throws: AuthorizationSignerError.invalidUserData(why)) { try plain.authenticateUser(socketID: "1.2", userData: userData) }
        #expect(throws: AuthorizationSignerError.invalidSocketID("x")) { try plain.authenticateUser(socketID: "x", userData: #"{"id":"10"}"#) }
    }

    @Test("encrypt refuses channels that are not encrypted, and signers without a master key")
    func encryptRefusals() {
        #expect(throws: AuthorizationSignerError.notEncryptedChannel("private-a")) { try encrypted.encrypt(data: "x", channel: "private-a") }
        #expect(throws: AuthorizationSignerError.invalidChannelName("private-encrypted- a")) { try encrypted.encrypt(data: "x", channel: "private-encrypted- a") }
        #expect(throws: AuthorizationSignerError.masterKeyRequired("private-encrypted-a")) { try plain.encrypt(data: "x", channel: "private-encrypted-a") }
    }

    @Test("the secret and the master key never show in descriptions or dumps")
    func redaction() {
        var dumped = ""
        dump(encrypted, to: &dumped)
        for text in [encrypted.description, encrypted.debugDescription, String(reflecting: encrypted), "\(encrypted)", dumped] {
            #expect(text.contains("278d425bdf160c739803"))
            #expect(!text.contains("7ad3773142a6692b25b8"))
            #expect(!text.contains("[0, 1, 2"))
        }
    }

    @Test("socket ids and channel names follow Pusher's rules", arguments: [
        ("123.456", true), ("0.0", true), ("1.2.3", false), ("12", false), ("-1.2", false), (" 1.2", false),
    ])
    func socketIDs(text: String, valid: Bool) {
        #expect(AuthorizationSigner.isValidSocketID(text) == valid)
    }
}
