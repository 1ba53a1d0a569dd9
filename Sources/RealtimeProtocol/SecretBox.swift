import CSodium
import Foundation

/// The data of an event on a `private-encrypted-` channel: libsodium's `crypto_secretbox`
/// (XSalsa20-Poly1305) output, both fields base64 (Pusher's end-to-end encryption format:
/// `{"nonce": …, "ciphertext": …}`).
public struct EncryptedPayload: Codable, Hashable, Sendable {
    /// The 24-byte nonce, base64.
    public var nonce: String
    /// The MAC and ciphertext (16 + plaintext bytes), base64.
    public var ciphertext: String

    /// Creates a payload from its base64 fields.
    public init(nonce: String, ciphertext: String) {
        self.nonce = nonce
        self.ciphertext = ciphertext
    }
}

/// Why a secretbox operation failed.
public enum SecretBoxError: Error, Hashable, Sendable, CustomStringConvertible {
    /// `sodium_init()` failed (no entropy source): nothing can be sealed or opened.
    case sodiumUnavailable
    /// The key is not `SecretBox.keySize` (32) bytes.
    case invalidKeySize(Int)
    /// A field is not base64, or the nonce is not 24 bytes.
    case malformed(String)
    /// The MAC does not verify: a wrong key, or a ciphertext that was altered.
    case authenticationFailed

    /// A human-readable explanation.
    public var description: String {
        switch self {
        case .sodiumUnavailable: return "libsodium could not be initialised"
        case .invalidKeySize(let size): return "a secretbox key is 32 bytes, not \(size)"
        case .malformed(let what): return "malformed encrypted payload: \(what)"
        case .authenticationFailed: return "the encrypted payload does not open with this channel's key (altered, or another key)"
        }
    }
}

/// libsodium's `crypto_secretbox_easy` / `crypto_secretbox_open_easy`, for encrypted channels.
public enum SecretBox {
    /// Key size in bytes (`crypto_secretbox_KEYBYTES`).
    public static let keySize = 32
    /// Nonce size in bytes (`crypto_secretbox_NONCEBYTES`).
    public static let nonceSize = 24
    /// Authenticator size in bytes (`crypto_secretbox_MACBYTES`).
    public static let macSize = 16

    /// `sodium_init()` once per process (it is thread-safe and idempotent).
    private static let ready: Bool = sodium_init() >= 0

    /// Encrypts and authenticates `plaintext` under `key`.
    ///
    /// - Parameters:
    ///   - plaintext: the bytes (an event's data, as UTF-8).
    ///   - key: 32 bytes (an encrypted channel's shared secret).
    ///   - nonce: 24 bytes; random (`randombytes_buf`) when nil. Never reuse one with a key.
    /// - Returns: the payload, base64 fields.
    /// - Throws: `SecretBoxError.invalidKeySize`, `.malformed` for a nonce of the wrong size,
    ///   `.sodiumUnavailable`.
    public static func seal(_ plaintext: [UInt8], key: [UInt8], nonce: [UInt8]? = nil) throws(SecretBoxError) -> EncryptedPayload {
        guard ready else { throw .sodiumUnavailable }
        guard key.count == keySize else { throw .invalidKeySize(key.count) }
        var nonceBytes = nonce ?? [UInt8](repeating: 0, count: nonceSize)
        guard nonceBytes.count == nonceSize else { throw .malformed("the nonce is \(nonceBytes.count) bytes, not 24") }
        if nonce == nil { randombytes_buf(&nonceBytes, nonceSize) }
        var sealed = [UInt8](repeating: 0, count: macSize + plaintext.count)
        _ = crypto_secretbox_easy(&sealed, plaintext, UInt64(plaintext.count), nonceBytes, key)
        return EncryptedPayload(nonce: Data(nonceBytes).base64EncodedString(), ciphertext: Data(sealed).base64EncodedString())
    }

    /// Verifies and decrypts `payload` under `key`.
    ///
    /// - Returns: the plaintext.
    /// - Throws: `SecretBoxError.authenticationFailed` for an altered ciphertext or another
    ///   key, `.malformed` for bad base64, a short nonce or a ciphertext shorter than its MAC,
    ///   `.invalidKeySize`, `.sodiumUnavailable`.
    public static func open(_ payload: EncryptedPayload, key: [UInt8]) throws(SecretBoxError) -> [UInt8] {
        guard ready else { throw .sodiumUnavailable }
        guard key.count == keySize else { throw .invalidKeySize(key.count) }
        guard let nonce = Data(base64Encoded: payload.nonce).map(Array.init), nonce.count == nonceSize else {
            throw .malformed("the nonce is not 24 bytes of base64")
        }
        guard let sealed = Data(base64Encoded: payload.ciphertext).map(Array.init) else { throw .malformed("the ciphertext is not base64") }
        guard sealed.count >= macSize else { throw .malformed("the ciphertext is shorter than its authenticator") }
        var plaintext = [UInt8](repeating: 0, count: sealed.count - macSize)
        guard crypto_secretbox_open_easy(&plaintext, sealed, UInt64(sealed.count), nonce, key) == 0 else {
            throw .authenticationFailed
        }
        return plaintext
    }
}
