import Foundation
import RealtimeProtocol
import TestSupport
import Testing

/// End-to-end encryption against the official Python `pusher` library (PyNaCl underneath):
/// the same shared secrets, and payloads that open on the other side.
@Suite(.enabled(if: PythonPeer.isAvailable, "needs python3 with the pusher package and its PyNaCl (scripts/setup installs them)"))
struct PusherEncryptionTests {
    let masterKey = Crypto.randomBytes(32)
    let channel = "private-encrypted-orders"
    let data = #"{"total":"12.50 €","items":["tea","scones"]}"#

    var masterKeyBase64: String { Data(masterKey).base64EncodedString() }
    var signer: AuthorizationSigner {
        get throws { try AuthorizationSigner(key: "278d425bdf160c739803", secret: "7ad3773142a6692b25b8", encryptionMasterKey: masterKey) }
    }

    func python(_ arguments: [String]) throws -> String {
        try PythonPeer.run("pusher_encrypted.py", arguments)
    }

    @Test("an encrypted channel's auth and shared_secret equal the Python pusher library's")
    func authorization() throws {
        let output = try python(["authorize", "278d425bdf160c739803", "7ad3773142a6692b25b8", masterKeyBase64, "1234.1234", channel])
        let theirs = try JSONDecoder().decode(ChannelAuthorizationResponse.self, from: Data(output.utf8))
        let ours = try signer.authorizeChannel(socketID: "1234.1234", channel: channel)
        #expect(ours == theirs, "master key \(masterKeyBase64)")
        #expect(ours.sharedSecret == Data(AuthorizationSigner.sharedSecret(channel: channel, masterKey: masterKey)).base64EncodedString())
    }

    @Test("a payload the Python pusher library encrypts, as its trigger publishes it, opens with SecretBox and our shared secret")
    func pythonToSwift() throws {
        let output = try python(["encrypt", masterKeyBase64, channel, data])
        let payload = try JSONDecoder().decode(EncryptedPayload.self, from: Data(output.utf8))
        let key = AuthorizationSigner.sharedSecret(channel: channel, masterKey: masterKey)
        #expect(String(decoding: try SecretBox.open(payload, key: key), as: UTF8.self) == data, "master key \(masterKeyBase64)")
        let otherChannel = AuthorizationSigner.sharedSecret(channel: "private-encrypted-other", masterKey: masterKey)
        #expect(throws: SecretBoxError.authenticationFailed) { try SecretBox.open(payload, key: otherChannel) }
    }

    @Test("a payload AuthorizationSigner encrypts opens in Python with PyNaCl and the library's shared secret")
    func swiftToPython() throws {
        let payload = try signer.encrypt(data: data, channel: channel)
        let answer = try signer.authorizeChannel(socketID: "1.1", channel: channel)
        let sharedSecret = try #require(answer.sharedSecret)
        let output = try python(["open", sharedSecret, payload])
        struct Opened: Decodable { var data: String }
        #expect(try JSONDecoder().decode(Opened.self, from: Data(output.utf8)).data == data, "master key \(masterKeyBase64)")
    }

    @Test("a payload altered in transit does not open in Python either")
    func tampered() throws {
        var payload = try JSONDecoder().decode(EncryptedPayload.self, from: Data(try signer.encrypt(data: data, channel: channel).utf8))
        var bytes = try #require(Data(base64Encoded: payload.ciphertext))
        bytes[bytes.startIndex + 20] ^= 0x01
        payload.ciphertext = bytes.base64EncodedString()
        let sharedSecret = Data(AuthorizationSigner.sharedSecret(channel: channel, masterKey: masterKey)).base64EncodedString()
        #expect(throws: PythonPeer.Failure.self) { try python(["open", sharedSecret, try RealtimeMessage.jsonText(payload)]) }
    }
}
